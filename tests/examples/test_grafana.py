"""examples/grafana-dashboard.json queries only metrics the gateway exports, and only label
values its series carry once a gateway on simulated engines has served queries and a program."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from flowserve.gateway.app import create_app
from flowserve.gateway.server import BackgroundServer
from flowserve.host.settings import load_serve_config

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = json.loads((ROOT / "examples" / "grafana-dashboard.json").read_text())
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}


def panels() -> list[dict]:
    return [p for p in DASHBOARD["panels"] if p["type"] != "row"]


def queried_metrics() -> set[str]:
    return {name for p in panels() for t in p["targets"] for name in re.findall(r"\bflowserve_\w+", t["expr"])}


def matchers() -> set[tuple[str, str, str]]:
    """(metric, label, value) of every `metric{label="value"}` the dashboard queries."""
    return {(name, label, value) for p in panels() for t in p["targets"]
            for name, inner in re.findall(r"\b(flowserve_\w+)\{([^}]*)\}", t["expr"])
            for label, value in re.findall(r'(\w+)="([^"]*)"', inner)}


def labelled(text: str) -> set[tuple[str, str, str]]:
    """(series, label, value) of every sample /metrics carries."""
    return {(s.name, k, v) for family in text_string_to_metric_families(text) for s in family.samples
            for k, v in s.labels.items()}


def exported(text: str) -> set[str]:
    """Every series name /metrics can carry: the samples present, and each declared
    family with its type's suffixes (a labelled counter has no sample before its first event)."""
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names |= {s.name for s in family.samples}
        names |= {family.name + suffix for suffix in SUFFIXES.get(family.type, ("",))}
    return names


def test_the_dashboard_is_importable_and_covers_the_gateways_concerns() -> None:
    assert DASHBOARD["__inputs"][0]["pluginId"] == "prometheus"
    ids = [p["id"] for p in DASHBOARD["panels"]]
    assert len(ids) == len(set(ids))
    for p in panels():
        assert p["targets"] and p["datasource"]["uid"] == "${DS_PROMETHEUS}"
        assert p["gridPos"]["x"] + p["gridPos"]["w"] <= 24
    titles = " ".join(p["title"].lower() for p in panels())
    for topic in ("latency", "slo attainment", "hit rate", "queue depth", "running", "tenant", "programs",
                  "program slo attainment", "program latency"):
        assert topic in titles, topic


def test_every_metric_the_dashboard_queries_exists_in_metrics() -> None:
    with BackgroundServer(create_app(load_serve_config(ROOT / "examples" / "serve-sim.yaml"))) as srv, \
            httpx.Client(base_url=srv.url, headers={"authorization": "Bearer sk-local-1"}, timeout=60) as http:
        for tenant in ("gold", "free"):
            r = http.post("/v1/completions", json={"model": "llama-3.1-8b", "prompt": "hello " * 40, "max_tokens": 3},
                          headers={"x-tenant": tenant, "x-slo-ms": "60000"})
            assert r.status_code == 200, r.text
        program = {"x-flowserve-program": "dashboard", "x-slo-ms": "60000"}
        for _ in range(2):
            r = http.post("/v1/completions", json={"model": "llama-3.1-8b", "prompt": "plan", "max_tokens": 3},
                          headers=program)
            assert r.status_code == 200, r.text
        assert http.delete("/v1/programs/dashboard").json()["deadline_met"] is True
        text = http.get("/metrics").text
    queried = queried_metrics()
    assert len(queried) >= 20
    assert queried <= exported(text), sorted(queried - exported(text))
    wanted = matchers()
    assert ("flowserve_query_latency_seconds_bucket", "workflow", "program") in wanted
    assert wanted <= labelled(text), sorted(wanted - labelled(text))
