"""A folder on a full disk, for the tests of what the gateway does when it cannot write.

As root, the folder is a 256 KiB tmpfs mounted for the test, filled up by `fill()`: every
later write fails with ENOSPC, as on a full disk. Elsewhere `fill()` points the files
this process holds open in the folder at /dev/full, whose writes fail with the same
ENOSPC: either way the kernel refuses the write, no Python object stands in for the disk.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass
class FullDisk:
    folder: Path
    mounted: bool

    def fill(self) -> None:
        """No space left from now on."""
        if self.mounted:
            with (self.folder / "filler").open("wb", buffering=0) as f:
                chunk = b"\0" * 4096
                try:
                    while True:
                        f.write(chunk)
                except OSError as e:
                    assert e.errno == errno.ENOSPC
            return
        full = os.open("/dev/full", os.O_WRONLY)
        try:
            for fd in os.listdir("/proc/self/fd"):
                with contextlib.suppress(OSError):
                    if Path(os.readlink(f"/proc/self/fd/{fd}")).parent == self.folder:
                        os.dup2(full, int(fd))
        finally:
            os.close(full)


@contextlib.contextmanager
def full_disk(base: Path) -> Iterator[FullDisk]:
    folder = base / "disk"
    folder.mkdir()
    mounted = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(folder)], capture_output=True).returncode == 0
    try:
        yield FullDisk(folder.resolve(), mounted)
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(folder)], check=True)
