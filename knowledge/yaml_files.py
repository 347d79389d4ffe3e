"""Reading the project's YAML data files (labelled questions and messages, examples)."""

from pathlib import Path
from typing import Any

import yaml


def read_yaml(path: Path) -> Any:
    """PyYAML's safe loading through libyaml's parser where PyYAML has it (its wheels do):
    8× faster than the pure-Python one, which matters for files read at every start."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(path.read_text(encoding="utf-8"), Loader=loader)
