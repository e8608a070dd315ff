"""Headless Chromium for the tests that look at a page as a person would: Debian's
`chromium`, installed with apt-get where it is missing and this user may (the project's
set-up, .ci/run, installs it the same way)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")
LOCK = Path.home() / ".cache" / "flowserve" / "chromium-install.lock"


def find_chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def ensure_chromium() -> tuple[str | None, str]:
    """(path, why not): installs Debian's package when missing, as root with apt-get; one
    installer at a time (a file lock)."""
    found = find_chromium()
    if found:
        return found, ""
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return None, "headless Chromium is missing and this user cannot install it (run: apt-get install chromium)"
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not find_chromium():
            for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]):
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                                      env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
                if done.returncode:
                    return None, f"installing Chromium failed: {' '.join(cmd)}: {done.stderr.strip()[-300:]}"
    found = find_chromium()
    return found, "" if found else "apt-get install -y chromium left no chromium executable on PATH"


def dump_dom(chromium: str, url: str, profile_dir: Path, budget_ms: int = 5000) -> str:
    """The page's DOM after its scripts ran for `budget_ms` of virtual time (fetches
    included: Chromium holds virtual time while a request is in flight)."""
    done = subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile_dir}", f"--virtual-time-budget={budget_ms}",
                           "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout
