"""What a server process does around loading its code (no imports of the service's own)."""

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def loading_without_collection() -> Iterator[None]:
    """Import the service's modules with the cyclic garbage collector paused, then set
    what was loaded aside from later collections.

    Importing the service creates ~200k objects that live as long as the process (modules,
    classes, pydantic schemas, SQLAlchemy mappers); every collection the allocations set off
    on the way scans the ones before it again (0.25–0.7 s of start-up's CPU here). Loading leaves
    little garbage (~2k objects in cycles), so it is frozen with the rest (`gc.freeze`)
    rather than swept by a full collection, which costs ~0.2 s itself: later collections
    skip the loaded objects too. Nothing changes when the collector was already off."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()
