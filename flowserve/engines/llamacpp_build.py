"""llama.cpp's `llama-server` binary, built once from the PyPI sdist.

    binary = ensure_llama_server()            # cached; builds on first use (~7 min, 2 cores)

The `llama-cpp-python` sdist ships the llama.cpp sources. `ensure_llama_server`
reuses `CACHE/llama_cpp_python-VERSION.tar.gz` or fetches it with `pip download
--no-binary llama-cpp-python --no-deps` (that sdist alone: `:all:` would also build its
build backends from source, minutes of silence), extracts `vendor/llama.cpp`, builds the
cmake target `llama-server` statically (no OpenSSL, no curl, portable AVX2 code) and installs the binary
as `CACHE/llama-server-VERSION/llama-server`. CACHE is `$FLOWSERVE_CACHE_DIR`, else
`$XDG_CACHE_HOME/flowserve`, else `~/.cache/flowserve`; `$FLOWSERVE_LLAMA_SERVER` names a
ready binary and skips all of this. A file lock per version makes concurrent callers (two
pytest sessions) build once; the others say that they wait, then reuse the result. The
build reports its progress every 10% of cmake's steps. Missing cmake or
compilers, a failed download or a failed build raise `FlowserveError` with the cause.
The process that runs it is `flowserve.engines.llamacpp_server.LlamaServer`.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from flowserve.errors import FlowserveError

DEFAULT_VERSION = "0.3.36"
# -O1 instead of Release's -O3: the build takes ~25% less CPU (576 vs ~780 core-seconds
# here), which keeps a cold test run within CI's budget; kernels run ~1.8× slower, which
# tests and ratio benchmarks on the tiny model do not notice.
CMAKE_FLAGS = (
    "-DLLAMA_BUILD_SERVER=ON", "-DBUILD_SHARED_LIBS=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_CURL=OFF",
    "-DGGML_NATIVE=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DCMAKE_BUILD_TYPE=Release",
    "-DCMAKE_C_FLAGS_RELEASE=-O1 -DNDEBUG", "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG",
)


def cache_root() -> Path:
    if env := os.environ.get("FLOWSERVE_CACHE_DIR"):
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "flowserve"


def binary_path(version: str = DEFAULT_VERSION, root: Path | None = None) -> Path:
    return (root or cache_root()) / f"llama-server-{version}" / "llama-server"


@contextlib.contextmanager
def file_lock(path: Path, on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Exclusive advisory lock held while the block runs (released if the process dies);
    `on_wait` hears it when another process holds the lock, before this one waits."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait(f"waiting for another process that holds {path} (building or fetching the same thing)")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_llama_server(version: str = DEFAULT_VERSION, *, cache_dir: Path | None = None,
                        jobs: int | None = None, progress: Callable[[str], None] | None = None) -> Path:
    """Path of a working llama-server binary for `version`, building it if not cached."""
    if env := os.environ.get("FLOWSERVE_LLAMA_SERVER"):
        path = Path(env).expanduser()
        if not os.access(path, os.X_OK):
            raise FlowserveError(f"FLOWSERVE_LLAMA_SERVER={env!r} is not an executable file")
        return path
    root = cache_dir or cache_root()
    target = binary_path(version, root)
    if os.access(target, os.X_OK):
        return target
    say = progress or (lambda _msg: None)
    with file_lock(root / f"llama-server-{version}.lock", say):
        if os.access(target, os.X_OK):  # another process built it while we waited
            return target
        _require_tools()
        sdist = fetch_sdist(version, root, say)
        work = Path(tempfile.mkdtemp(prefix=f"llama-build-{version}-", dir=root))
        try:
            say(f"extracting llama.cpp from {sdist.name}")
            src = _extract_llama_cpp(sdist, work)
            say(f"building llama-server {version} (takes minutes; log: {work / 'build.log'})")
            built = _cmake_build(src, work / "build", work / "build.log", jobs or os.cpu_count() or 1, say)
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_suffix(".tmp")
            shutil.copy2(built, tmp)
            shutil.copy2(work / "build.log", target.parent / "build.log")
            os.replace(tmp, target)  # atomic: readers see no binary or a whole one
        finally:
            shutil.rmtree(work, ignore_errors=True)
    say(f"llama-server {version}: {target}")
    return target


def _require_tools() -> None:
    missing = []
    if shutil.which("cmake") is None:
        missing.append("cmake")
    cc = os.environ.get("CC")
    cxx = os.environ.get("CXX")
    if not (shutil.which(cc) if cc else any(shutil.which(c) for c in ("cc", "gcc", "clang"))):
        missing.append("a C compiler (cc/gcc/clang)")
    if not (shutil.which(cxx) if cxx else any(shutil.which(c) for c in ("c++", "g++", "clang++"))):
        missing.append("a C++ compiler (c++/g++/clang++)")
    if missing:
        raise FlowserveError(
            f"building llama-server needs {', '.join(missing)} (e.g. `apt-get install cmake g++`), "
            f"or set FLOWSERVE_LLAMA_SERVER to an existing llama-server binary")


def fetch_sdist(version: str, root: Path, say: Callable[[str], None] = lambda _m: None) -> Path:
    """The cached sdist, or download it with pip (the only network access)."""
    cached = root / f"llama_cpp_python-{version}.tar.gz"
    if cached.exists():
        return cached
    say(f"downloading the llama-cpp-python=={version} sdist (about 77 MB) with pip")
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-binary", "llama-cpp-python", "--no-deps",
             "--disable-pip-version-check", "-d", tmp, f"llama-cpp-python=={version}"],
            capture_output=True, text=True, check=False)
        found = sorted(Path(tmp).glob("llama_cpp_python-*.tar.gz"))
        if proc.returncode != 0 or not found:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise FlowserveError(f"pip download llama-cpp-python=={version} failed: {' | '.join(tail)}")
        os.replace(found[0], cached)
    return cached


def _extract_llama_cpp(sdist: Path, dest: Path) -> Path:
    """Extract only vendor/llama.cpp (minus bundled vocabulary GGUFs) and return its path."""
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers()
                   if m.name.split("/")[1:3] == ["vendor", "llama.cpp"] and not m.name.endswith(".gguf")]
        if not members:
            raise FlowserveError(f"{sdist}: no vendor/llama.cpp sources inside")
        tar.extractall(dest, members=members, filter="data")
    return dest / members[0].name.split("/")[0] / "vendor" / "llama.cpp"


# ninja prints `[12/150] Building ...`, make `[ 45%] Building ...`
_STEP = re.compile(r"^\[\s*(?:(\d+)/(\d+)|(\d+)%)\]")


def build_percent(line: str) -> int | None:
    """How far a cmake build is, from one line of its output (ninja's or make's)."""
    m = _STEP.match(line)
    if m is None:
        return None
    if m.group(3) is not None:
        return int(m.group(3))
    return 100 * int(m.group(1)) // max(1, int(m.group(2)))


def _cmake_build(src: Path, build: Path, log: Path, jobs: int,
                 say: Callable[[str], None] = lambda _m: None) -> Path:
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    steps = [
        ["cmake", "-S", str(src), "-B", str(build), *generator, *CMAKE_FLAGS],
        ["cmake", "--build", str(build), "--target", "llama-server", "-j", str(jobs)],
    ]
    reported = 0
    with open(log, "w") as fh:
        for cmd in steps:
            fh.write(f"$ {' '.join(cmd)}\n")
            fh.flush()
            with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  errors="replace") as proc:
                assert proc.stdout is not None
                for line in proc.stdout:
                    fh.write(line)
                    pct = build_percent(line)
                    if pct is not None and pct >= reported + 10:
                        reported = pct - pct % 10
                        say(f"building llama-server: {reported}%")
            if proc.returncode != 0:
                fh.close()
                tail = log.read_text(errors="replace").strip().splitlines()[-15:]
                raise FlowserveError("building llama-server failed:\n" + "\n".join(tail))
    binary = build / "bin" / "llama-server"
    if not binary.exists():
        raise FlowserveError(f"the llama-server build finished but {binary} is missing (see {log})")
    return binary
