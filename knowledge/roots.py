"""Which files a remote ingest request may read: only those under the configured roots.

The admin endpoint takes a path from the network, so the path is resolved (symlinks
followed, `..` folded) before it is compared with the roots, and a folder is refused when
anything inside it links out of them: otherwise a symlink to /etc/passwd placed in a
documentation folder is ingested and later quoted to anyone who asks the bot. Each file is
then read through a descriptor checked after opening (`read_confined`): a regular file, no
hard link (its other name may lie anywhere on the disk), its real path still under the
roots (a folder swapped for a symlink between the check and the read is caught). Messages
name no server path: the caller sent the path and learns only whether it may be read.
"""

import os
import stat
from collections.abc import Sequence
from pathlib import Path

_OPEN_FILES = Path("/proc/self/fd")  # Linux: where an open descriptor's real path is read


class OutsideRoots(PermissionError):
    """The path, or something a folder links to, lies outside every ingest root."""


class NotFound(FileNotFoundError):
    """Nothing at the path (it lies under a root)."""


def resolve_ingest_path(requested: str, roots: Sequence[Path]) -> Path:
    """The real path of `requested` when it and everything it contains lie under one of
    `roots`; a relative path is taken relative to the first root."""
    if not roots:
        raise OutsideRoots("no ingest roots are configured")
    real_roots = [root.resolve() for root in roots]
    if not requested.strip():
        raise OutsideRoots("the path is empty")
    path = (real_roots[0] / requested).resolve()  # an absolute `requested` replaces the root
    if not _under(path, real_roots):
        raise OutsideRoots("the path is outside the ingest roots")
    if not path.exists():
        raise NotFound("no such file or folder under the ingest roots")
    escapes = links_outside(path, real_roots)
    if escapes:
        raise OutsideRoots(
            f"{escapes} link(s) inside the folder point outside the ingest roots; "
            "remove them or ingest a folder without them"
        )
    return path


def links_outside(folder: Path, real_roots: Sequence[Path]) -> int:
    """How many symlinks under `folder` (files or folders, not followed) resolve outside
    `real_roots` (resolved already); dangling links count too."""
    if not folder.is_dir():
        return 0
    escapes = 0
    for directory, subfolders, files in os.walk(folder, followlinks=False):
        for name in (*subfolders, *files):
            entry = Path(directory, name)
            if entry.is_symlink() and not _under(entry.resolve(), real_roots):
                escapes += 1
    return escapes


def _under(path: Path, real_roots: Sequence[Path]) -> bool:
    return any(path.is_relative_to(root) for root in real_roots)


def read_confined(path: Path, real_roots: Sequence[Path]) -> bytes:
    """The bytes of `path`, read through a descriptor that is checked after opening to be
    a regular file with one name, under `real_roots` (resolved already)."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise OutsideRoots("not a regular file")
        if status.st_nlink != 1:
            raise OutsideRoots("a hard link: its other name may lie outside the ingest roots")
        if _OPEN_FILES.is_dir():
            opened = Path(os.readlink(_OPEN_FILES / str(descriptor)))
            if not _under(opened, real_roots):
                raise OutsideRoots("the file lies outside the ingest roots")
        with os.fdopen(os.dup(descriptor), "rb") as file:
            return file.read()
    finally:
        os.close(descriptor)
