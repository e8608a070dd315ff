"""The endpoint picker as a service: which serving configs it takes, the CLI's refusal, and
the picker run from Python with its gRPC health."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from envoy_fronts import engines_config
from grpc_health.v1 import health_pb2, health_pb2_grpc
from http_engine import HttpEngine
from repo_paths import ROOT
from typer.testing import CliRunner

import flowserve
from flowserve.cli import app
from flowserve.errors import ConfigError
from flowserve.host.settings import load_serve_config
from flowserve.picker.service import EXT_PROC, picker_config


def test_the_picker_takes_engines_with_urls_and_refuses_simulated_ones() -> None:
    cfg = picker_config(load_serve_config(ROOT / "examples" / "envoy" / "engines.yaml"))
    assert [s.url for s in cfg.instances] == ["http://127.0.0.1:8081", "http://127.0.0.1:8082"]
    with pytest.raises(ConfigError, match="backend: openai"):
        picker_config(load_serve_config(ROOT / "examples" / "serve-sim.yaml"))
    r = CliRunner().invoke(app, ["epp", "--config", str(ROOT / "examples" / "serve-sim.yaml"), "--port", "0"])
    assert r.exit_code == 2 and "the endpoint picker routes to engines by address" in r.output


def test_the_picker_from_python_reports_its_health(tmp_path: Path) -> None:
    with HttpEngine("h0") as e:
        cfg = engines_config(tmp_path / "serve.yaml", [e])
        with flowserve.epp(cfg, port=0, background=True) as picker, \
                grpc.insecure_channel(f"127.0.0.1:{picker.port}") as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            for service in ("", "liveness", "readiness", EXT_PROC):
                status = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10).status
                assert status == health_pb2.HealthCheckResponse.SERVING, service
