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
from flowserve.gateway.server import BackgroundServer
from flowserve.gateway.status import Counters, StatusBoard, read_counters, status_page
from flowserve.host.driver import LiveDriver
from flowserve.host.policy_params import PolicyParams
from flowserve.host.programs.book import LivePrograms
from flowserve.host.programs.open_program import OpenProgram
from flowserve.host.programs.store import LocalPrograms
from flowserve.host.root import compose_driver
from flowserve.host.settings import ProgramSettings, serve_config
from flowserve.policies.flowserve_queue import FlowserveQueue
from flowserve.policies.hexgen import HexgenWB
from flowserve.types.commands import PolicyChanged

KEY, ADMIN = "sk-user", "sk-admin"
MODEL = "llama-3.1-8b"
CONFIG = {
    "instances": [{"name": "sim", "gpu": "A100-80G", "model": MODEL, "count": 2, "max_inflight": 1}],
    "api_keys": {KEY: {"tenant": "user", "acts_for": ["gold"]}},
    "gateway": {"admin_keys": [ADMIN], "drain_timeout_s": 0.2, "queue": "flowserve",
                "queue_params": {"tenant_weights": {"gold": 3, "free": 1}}},
}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_active_params_are_defaults_then_config_then_announced_changes() -> None:
    heard = PolicyParams()
    for change in (PolicyChanged(1.0, "hexgen_wb", {"alpha": 0.2}), PolicyChanged(2.0, "other", {"alpha": 9.0}),
                   PolicyChanged(3.0, "hexgen_wb", {"alpha": 0.4})):
        heard.changed(change)
    params = heard.active(HexgenWB, {"beta": 10.0, "alpha": 0.7})
    assert params["alpha"] == 0.4 and params["beta"] == 10.0 and params["window_s"] == 100.0
    assert heard.active(FlowserveQueue, {"tenant_weights": {"gold": 3}})["tenant_weights"] == {"gold": 3}
    assert [c.time for c in heard.log] == [1.0, 2.0, 3.0]


def test_windowed_figures_are_differences_against_the_snapshot_a_window_ago() -> None:
    clock = Clock()
    cfg = serve_config(CONFIG, "test")
    driver = compose_driver(cfg.instances, cfg.gateway, clock=clock)
    m = driver.metrics
    board = StatusBoard(driver, window_s=60.0)
    m.tenants.add("a", ("slo", "met"), 3)
    m.tenants.add("b", ("slo", "missed"), 1)
    m.prompt_tokens.labels("sim-0").inc(1000)
    m.cached_tokens.labels("sim-0").inc(250)
    clock.now += 30
    first = board.snapshot()
    assert first["window"]["slo_attainment"] == 0.75 and first["window"]["token_hit_rate"] == 0.25
    assert first["window_s"] == 30.0
    clock.now += 40
    m.tenants.add("a", ("slo", "missed"), 4)
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


def test_programs_are_counted_in_the_window_and_listed_newest_first() -> None:
    clock = Clock()
    cfg = serve_config(CONFIG, "test")
    driver = compose_driver(cfg.instances, cfg.gateway, clock=clock)
    book = LivePrograms(driver, ProgramSettings(), clock, LocalPrograms())
    board = StatusBoard(driver, book, window_s=60.0)
    m = driver.metrics
    m.programs_ended.labels("deleted").inc(2)
    m.programs_ended.labels("idle").inc(1)
    m.programs_slo.labels("met").inc(2)
    clock.now += 70
    board.snapshot()  # the baseline once the window has passed it
    m.programs_ended.labels("failed").inc(1)
    m.programs_slo.labels("missed").inc(1)
    m.programs_slo.labels("met").inc(1)
    book.open = {("gold", "a"): OpenProgram("a", "gold", 0, "interactive", 30.0, opened=clock.now - 5,
                                            last=clock.now - 1, calls=3, inflight={"c3"}),
                 ("free", "b"): OpenProgram("b", "free", 0, "interactive", None, opened=clock.now - 2,
                                            last=clock.now - 2, calls=1, ended="deleted")}
    clock.now += 70
    snap = board.snapshot()
    w, t = snap["window"], snap["total"]
    assert (w["programs_ended"], w["programs_failed"], w["programs_slo_met"], w["programs_slo_missed"]) == (1, 1, 1, 1)
    assert w["programs_slo_attainment"] == 0.5 and t["programs_slo_attainment"] == 0.75
    assert t["programs_ended"] == 4 and t["programs_failed"] == 1
    assert snap["open_programs"] == 2
    assert [(p["id"], p["status"], p["calls"], p["calls_in_flight"], p["age_s"], p["idle_s"], p["slo_s"])
            for p in snap["programs"]] == [("b", "closing", 1, 0, 72.0, 72.0, None),
                                           ("a", "open", 3, 1, 75.0, 71.0, 30.0)]


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
        row = a.get("data-instance") or a.get("data-program")
        key = f"{row}.{a['data-field']}" if row else a.get("data-field") or a.get("id")
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
         "flowserve_instance_dispatched_total", "flowserve_instance_up", "flowserve_instance_circuit",
         "flowserve_programs_open", "flowserve_programs_ended_total", "flowserve_programs_slo_total")


def metric_sums(text: str) -> dict[tuple[str, str], float]:
    """The series the page shows, summed by instance, SLO result or query outcome."""
    out: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name not in SHOWN:
                continue
            label = (s.labels.get("instance") or s.labels.get("result") or s.labels.get("outcome")
                     or s.labels.get("how") or "")
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
    """Finished queries (two met their SLO, one missed); programs: two ended (one met its SLO,
    one missed), one open after its first call; and three long queries still open on two
    one-call-at-a-time instances: two running, one queued."""
    app = create_app(serve_config(CONFIG, "test"))
    srv = BackgroundServer(app).start()
    gw = app.state.gateway
    auth = {"authorization": f"Bearer {KEY}"}
    for slo_ms in ("600000", "600000", "0.001"):
        r = httpx.post(f"{srv.url}/v1/completions", json={"model": MODEL, "prompt": "a shared prompt " * 20,
                                                          "max_tokens": 2}, headers={**auth, "x-slo-ms": slo_ms})
        assert r.status_code == 200, r.text
    for program, slo_ms, calls in (("trip", "600000", 2), ("late", "0.001", 1), ("open-one", None, 1)):
        for _ in range(calls):
            headers = {**auth, "x-flowserve-program": program, **({"x-slo-ms": slo_ms} if slo_ms else {})}
            r = httpx.post(f"{srv.url}/v1/completions", json={"model": MODEL, "prompt": "plan", "max_tokens": 2},
                           headers=headers)
            assert r.status_code == 200, r.text
        if program != "open-one":
            assert httpx.delete(f"{srv.url}/v1/programs/{program}", headers=auth).json()["deadline_met"] is (
                program == "trip")
    long = [threading.Thread(target=httpx.post, args=(f"{srv.url}/v1/completions",), daemon=True,
                             kwargs={"json": {"model": MODEL, "prompt": f"long {i}", "max_tokens": 20_000},
                                     "headers": {**auth, "x-tenant": "gold"}, "timeout": 60})
            for i in range(3)]
    for t in long:
        t.start()
    asyncio.run_coroutine_threadsafe(gw.driver.until(
        lambda: sum(i["queued"] for i in gw.driver.instances()) == 1 and gw.driver.open_queries == 4),
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
    assert (met, missed) == (3, 2)  # the programs' deadlines count too
    assert v["slo-window"] == v["slo-total"] == pct(met, met + missed) == "60.0%"
    prompt = sum(val for (name, _), val in m.items() if name == "flowserve_prompt_tokens_total")
    cached = sum(val for (name, _), val in m.items() if name == "flowserve_cached_tokens_total")
    assert prompt > 0 and v["hit-window"] == v["hit-total"] == pct(cached, prompt)
    assert v["prompt"] == f"{prompt:.0f}" and v["cached"] == f"{cached:.0f}"
    # three completions, four program calls, two programs
    assert v["completed"] == f"{m[('flowserve_queries_total', 'completed')]:.0f}" == "9"
    assert v["open"] == "4" and driver.open_queries == 4  # the open program is a query too
    assert v["programs-open"] == f"{m[('flowserve_programs_open', '')]:.0f}" == "1"
    ended = sum(val for (name, _), val in m.items() if name == "flowserve_programs_ended_total")
    assert v["programs-ended"] == f"{ended:.0f}" == "2"
    assert v["programs-failed"] == f"{m.get(('flowserve_programs_ended_total', 'failed'), 0):.0f}" == "0"
    p_met, p_missed = m[("flowserve_programs_slo_total", "met")], m[("flowserve_programs_slo_total", "missed")]
    assert (v["programs-slo-met"], v["programs-slo-missed"]) == (f"{p_met:.0f}", f"{p_missed:.0f}") == ("1", "1")
    assert v["programs-slo-window"] == v["programs-slo-total"] == pct(p_met, p_met + p_missed) == "50.0%"
    assert (v["open-one.id"], v["open-one.status"], v["open-one.calls"], v["open-one.calls_in_flight"]) == (
        "open-one", "open", "1", "0")
    assert "trip.id" not in v and "late.id" not in v
    for inst in ("sim-0", "sim-1"):
        assert v[f"{inst}.queued"] == f"{m[('flowserve_instance_queue_depth', inst)]:.0f}"
        assert v[f"{inst}.running"] == f"{m[('flowserve_instance_inflight', inst)]:.0f}" == "1"
        assert v[f"{inst}.dispatched"] == f"{m[('flowserve_instance_dispatched_total', inst)]:.0f}"
        assert v[f"{inst}.up"] == ("up" if m[("flowserve_instance_up", inst)] == 1 else "down") == "up"
        assert v[f"{inst}.circuit"] == "closed" and m[("flowserve_instance_circuit", inst)] == 0
    assert sum(int(v[f"{i}.queued"]) for i in ("sim-0", "sim-1")) == 1
    assert v["dispatch"] == "round_robin" and v["queue"] == "flowserve"
    assert 'tenant_weights={"gold":3,"free":1}' in dom


def test_status_json_answers_for_policies_given_by_import_path() -> None:
    """Issue 35 item 15: a plug-in policy (import path) made /status.json a 500 (KeyError)."""
    import flowserve

    cfg = {**CONFIG, "gateway": {"admin_keys": [ADMIN]}}
    with flowserve.serve(cfg, port=0, dispatch="thirdparty:FewestCalls", queue="thirdparty:Lifo",
                         background=True) as srv:
        snap = httpx.get(f"{srv.url}/status.json", headers={"authorization": f"Bearer {ADMIN}"})
        assert snap.status_code == 200, snap.text
        policies = snap.json()["policies"]
        assert policies["dispatch"] == {"name": "thirdparty:FewestCalls", "params": {"spread": 0}}
        assert policies["queue"]["name"] == "thirdparty:Lifo"
