"""Where a command or a Python call writes its results: checked before any work, so a
bad path fails at once with one line naming the option, not after a long run."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from flowserve.errors import ConfigError


def check_output(path: Path, option: str, folder: bool = False) -> None:
    """The one check of every output path option (`--json`, `--out`, `--cache`, ...):
    ConfigError, naming the option, for a directory where a file is written (or the
    reverse), a device or pipe, or a place where nothing can be created."""
    where = f"{option} {str(path)!r}"
    if path.exists():
        if folder and not path.is_dir():
            raise ConfigError(f"{where}: not a directory (this option names a folder to write into)")
        if not folder and path.is_dir():
            raise ConfigError(f"{where}: is a directory; give a file path")
        if not folder and not path.is_file():
            raise ConfigError(f"{where}: not a regular file (a device, pipe or socket); give a file path")
        if not os.access(path, os.W_OK):
            raise ConfigError(f"{where}: not writable")
        if not folder:
            return
    base = path if folder and path.is_dir() else next(p for p in path.absolute().parents if p.exists())
    if not base.is_dir():
        raise ConfigError(f"{where}: {str(base)!r} is not a directory")
    try:  # what the command will do there: create files (and folders) in it
        with tempfile.TemporaryFile(dir=base):
            pass
    except OSError as e:
        raise ConfigError(f"{where}: cannot write in {str(base)!r} ({e.strerror})") from None
