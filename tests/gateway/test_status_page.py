"""The live status page: its JSON against the gateway's counters (unit tests), and the page
itself rendered by headless Chromium against a gateway on simulated engines, its numbers
checked against `/metrics`."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest
from browser import dump_dom, ensure_chromium
from prometheus_client.parser import text_string_to_metric_families

from flowserve.gateway.app import create_app
from flowserve.gateway.driver import LiveDriver
from flowserve.gateway.server import BackgroundServer
from flowserve.gateway.settings import serve_config
from flowserve.gateway.status import Counters, StatusBoard, active_params, read_counters, status_page
from flowserve.policies.flowserve_queue import FlowserveQueue
from flowserve.policies.hexgen import HexgenWB
from flowserve.types.commands import PolicyChanged

KEY, ADMIN = "sk-user", "sk-admin"
MODEL = "llama-3.1-8b"
CONFIG = {
    "instances": [{"name": "sim", "gpu": "A100-80G", "model": MODEL, "count": 2, "max_inflight": 1}],
    "api_keys": [KEY],
    "gateway": {"admin_keys": [ADMIN], "drain_timeout_s": 0.2, "queue": "flowserve",
                "queue_params": {"tenant_weights": {"gold": 3, "free": 1}}},
}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_active_params_are_defaults_then_config_then_announced_changes() -> None:
    changes = [PolicyChanged(1.0, "hexgen_wb", {"alpha": 0.2}), PolicyChanged(2.0, "other", {"alpha": 9.0}),
               PolicyChanged(3.0, "hexgen_wb", {"alpha": 0.4})]
    params = active_params(HexgenWB, {"beta": 10.0, "alpha": 0.7}, changes)
    assert params["alpha"] == 0.4 and params["beta"] == 10.0 and params["window_s"] == 100.0
    assert active_params(FlowserveQueue, {"tenant_weights": {"gold": 3}}, [])["tenant_weights"] == {"gold": 3}


def test_windowed_figures_are_differences_against_the_snapshot_a_window_ago() -> None:
    clock = Clock()
    cfg = serve_config(CONFIG, "test")
    driver = LiveDriver(cfg.instances, cfg.gateway, clock=clock)
    m = driver.metrics
    board = StatusBoard(driver, window_s=60.0)
    m.slo.labels("a", "met").inc(3)
    m.slo.labels("b", "missed").inc(1)
    m.prompt_tokens.labels("sim-0").inc(1000)
    m.cached_tokens.labels("sim-0").inc(250)
    clock.now += 30
    first = board.snapshot()
    assert first["window"]["slo_attainment"] == 0.75 and first["window"]["token_hit_rate"] == 0.25
    assert first["window_s"] == 30.0
    clock.now += 40
    m.slo.labels("a", "missed").inc(4)
    m.prompt_tokens.labels("sim-1").inc(1000)
    assert board.snapshot()["window"]["slo_missed"] == 5  # the start (t = 100) is still the latest ≤ now - 60
    clock.now += 30  # t = 200: the snapshot at t = 130 is the latest at or before the window's start
    later = board.snapshot()
    assert later["window_s"] == 70.0
    assert later["window"]["slo_met"] == 0 and later["window"]["slo_missed"] == 4
    assert later["window"]["token_hit_rate"] == 0.0 and later["window"]["slo_attainment"] == 0.0
    assert later["total"]["slo_attainment"] == 3 / 8 and later["total"]["token_hit_rate"] == 250 / 2000
    assert [round(p["ago_s"]) for p in later["series"]] == [70, 30, 0]
    assert read_counters(m.registry) == Counters(3, 5, 2000, 250)
    assert [s["name"] for s in later["instances"]] == ["sim-0", "sim-1"]
    assert later["policies"]["queue"]["params"]["tenant_weights"] == {"gold": 3, "free": 1}


def test_the_page_is_one_file_with_no_external_assets() -> None:
    page = status_page()
    assert "<script>" in page and "<style>" in page
    assert "src=" not in page and "<link" not in page and "@import" not in page and "//" not in page.split(
        "<script>")[0]


class Cells(HTMLParser):
    """Text of the elements with an id or a data-field (and data-instance)."""

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, str] = {}
        self._open: list[str | None] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        key = f"{a['data-instance']}.{a['data-field']}" if "data-instance" in a else a.get("data-field") or a.get("id")
        self._open.append(key)
        if key:
            self.values[key] = ""

    def handle_endtag(self, tag: str) -> None:
        if self._open:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        for key in self._open:
            if key:
                self.values[key] += data


SHOWN = ("flowserve_slo_total", "flowserve_prompt_tokens_total", "flowserve_cached_tokens_total",
         "flowserve_queries_total", "flowserve_instance_queue_depth", "flowserve_instance_inflight",
         "flowserve_instance_dispatched_total", "flowserve_instance_up", "flowserve_instance_circuit")


def metric_sums(text: str) -> dict[tuple[str, str], float]:
    """The series the page shows, summed by instance, SLO result or query outcome."""
    out: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name not in SHOWN:
                continue
            label = s.labels.get("instance") or s.labels.get("result") or s.labels.get("outcome") or ""
            out[(s.name, label)] = out.get((s.name, label), 0.0) + s.value
    return out


def pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%"


@pytest.fixture(scope="module")
def chromium() -> str:
    path, why = ensure_chromium()
    if path is None:
        pytest.skip(why)
    return path


@pytest.fixture
def busy_gateway() -> Iterator[tuple[BackgroundServer, LiveDriver]]:
    """Finished queries (two met their SLO, one missed) and three long ones still open on two
    one-call-at-a-time instances: two running, one queued."""
    app = create_app(serve_config(CONFIG, "test"))
    srv = BackgroundServer(app).start()
    gw = app.state.gateway
    auth = {"authorization": f"Bearer {KEY}"}
    for slo_ms in ("600000", "600000", "0.001"):
        r = httpx.post(f"{srv.url}/v1/completions", json={"model": MODEL, "prompt": "a shared prompt " * 20,
                                                          "max_tokens": 2}, headers={**auth, "x-slo-ms": slo_ms})
        assert r.status_code == 200, r.text
    long = [threading.Thread(target=httpx.post, args=(f"{srv.url}/v1/completions",), daemon=True,
                             kwargs={"json": {"model": MODEL, "prompt": f"long {i}", "max_tokens": 20_000},
                                     "headers": {**auth, "x-tenant": "gold"}, "timeout": 60})
            for i in range(3)]
    for t in long:
        t.start()
    asyncio.run_coroutine_threadsafe(gw.driver.until(
        lambda: sum(i["queued"] for i in gw.driver.instances()) == 1 and gw.driver.open_queries == 3),
        gw.driver_loop).result(30)
    yield srv, gw.driver
    srv.stop()  # the open queries fail after the 0.2 s drain
    for t in long:
        t.join(30)


def test_the_rendered_page_shows_what_metrics_says(chromium: str, busy_gateway: tuple[BackgroundServer, LiveDriver],
                                                   tmp_path: Path) -> None:
    srv, driver = busy_gateway
    assert httpx.get(f"{srv.url}/status.json").status_code == 401  # the data needs an admin key
    before = httpx.get(f"{srv.url}/metrics").text
    dom = dump_dom(chromium, f"{srv.url}/status#key={ADMIN}", tmp_path / "profile")
    assert metric_sums(httpx.get(f"{srv.url}/metrics").text) == metric_sums(before), "the gateway moved meanwhile"
    cells = Cells()
    cells.feed(dom)
    v = cells.values
    m = metric_sums(before)
    met, missed = m[("flowserve_slo_total", "met")], m[("flowserve_slo_total", "missed")]
    assert (met, missed) == (2, 1)
    assert v["slo-window"] == v["slo-total"] == pct(met, met + missed) == "66.7%"
    prompt = sum(val for (name, _), val in m.items() if name == "flowserve_prompt_tokens_total")
    cached = sum(val for (name, _), val in m.items() if name == "flowserve_cached_tokens_total")
    assert prompt > 0 and v["hit-window"] == v["hit-total"] == pct(cached, prompt)
    assert v["prompt"] == f"{prompt:.0f}" and v["cached"] == f"{cached:.0f}"
    assert v["completed"] == f"{m[('flowserve_queries_total', 'completed')]:.0f}" == "3"
    assert v["open"] == "3" and driver.open_queries == 3
    for inst in ("sim-0", "sim-1"):
        assert v[f"{inst}.queued"] == f"{m[('flowserve_instance_queue_depth', inst)]:.0f}"
        assert v[f"{inst}.running"] == f"{m[('flowserve_instance_inflight', inst)]:.0f}" == "1"
        assert v[f"{inst}.dispatched"] == f"{m[('flowserve_instance_dispatched_total', inst)]:.0f}"
        assert v[f"{inst}.up"] == ("up" if m[("flowserve_instance_up", inst)] == 1 else "down") == "up"
        assert v[f"{inst}.circuit"] == "closed" and m[("flowserve_instance_circuit", inst)] == 0
    assert sum(int(v[f"{i}.queued"]) for i in ("sim-0", "sim-1")) == 1
    assert v["dispatch"] == "round_robin" and v["queue"] == "flowserve"
    assert 'tenant_weights={"gold":3,"free":1}' in dom
