"""Disaggregation in the cluster YAML (issue 46): instance roles, `kv_transfer:`, `links:`
between instances or groups with defaults by interconnect class, and the errors that name
what is wrong."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from flowserve.config import ClusterConfig, load_cluster
from flowserve.errors import ConfigError
from flowserve.host.settings import load_serve_config
from flowserve.profiles.links import LINK_CLASSES, link_between, link_class
from flowserve.schema import validate

P = {"name": "p", "gpu": "H100", "model": "llama-3.1-8b", "role": "prefill", "count": 2}
TINY = {"kind": "text2sql", "trace": "financial", "rate": 0.5, "queries": 6}
D = {"name": "d", "gpu": "A100-80G", "model": "llama-3.1-8b", "role": "decode", "count": 2}


def specs(data: dict[str, Any]):
    return {s.name: s for s in validate(ClusterConfig, data, "cluster").specs()}


def test_roles_default_to_both_and_are_read_per_entry() -> None:
    s = specs({"instances": [P, D, {"name": "x", "gpu": "L4", "model": "llama-3.1-8b"}]})
    assert [s[n].role for n in ("p-0", "p-1", "d-0", "x")] == ["prefill", "prefill", "decode", "both"]
    assert s["p-0"].prefills and not s["p-0"].decodes and s["d-0"].decodes and not s["d-0"].prefills
    assert s["x"].prefills and s["x"].decodes


def test_an_unknown_role_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match=r"instances\.0\.role"):
        specs({"instances": [{**P, "role": "prefil"}, D]})


def test_a_decode_instance_without_a_prefill_instance_of_its_model_names_both() -> None:
    other = {**P, "model": "mistral-7b", "name": "m", "count": 1}
    with pytest.raises(ConfigError) as e:
        specs({"instances": [D, other, {"name": "m2", "gpu": "A100-80G", "model": "mistral-7b"}]})
    msg = str(e.value)
    assert "decode instance 'd-0'" in msg and "llama-3.1-8b" in msg and "m (mistral-7b)" in msg
    assert "\n" not in msg


def test_a_prefill_instance_without_a_decode_instance_of_its_model_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"prefill instance 'p-0' serves llama-3\.1-8b, but no instance with "
                                          r"role decode or both"):
        specs({"instances": [P]})


def test_links_join_groups_and_an_instance_pair_wins_over_its_groups() -> None:
    s = specs({"instances": [P, D], "links": [
        {"between": ["p", "d"], "interconnect": "infiniband"},
        {"between": ["d-1", "p-0"], "interconnect": "roce", "bandwidth_gbps": 800, "latency_us": 10}]})
    assert link_between(s["p-0"], s["d-0"]) == LINK_CLASSES["infiniband"]
    assert link_between(s["p-1"], s["d-1"]) == LINK_CLASSES["infiniband"]
    special = link_between(s["p-0"], s["d-1"])
    assert special == link_between(s["d-1"], s["p-0"])  # either side's declaration
    assert (special.kind, special.bandwidth_bytes_s, special.latency_s) == ("roce", 100e9, 10e-6)
    assert special.efficiency == LINK_CLASSES["roce"].efficiency
    # a pair no link names: the cluster's default class
    assert link_between(s["p-0"], s["p-1"]) == LINK_CLASSES["ethernet"]


def test_the_default_link_class_is_the_clusters() -> None:
    s = specs({"instances": [P, D], "default_link": "nvlink"})
    assert link_between(s["p-0"], s["d-0"]) == link_class("nvlink")


@pytest.mark.parametrize(("link", "why"), [
    ({"between": ["p", "dx"], "interconnect": "nvlink"}, "links\\[0\\] names 'dx', which is no instance"),
    ({"between": ["p", "p"], "interconnect": "nvlink"}, "got 'p' twice"),
    ({"between": ["p"], "interconnect": "nvlink"}, "links.0.between"),
    ({"between": ["p", "d"], "interconnect": "token-ring"}, "links.0.interconnect"),
    ({"between": ["p", "d"], "interconnect": "roce", "efficiency": 1.5}, "links.0.efficiency"),
    ({"between": ["p", "d"], "interconnect": "roce", "bandwidth_gbps": 0}, "links.0.bandwidth_gbps"),
])
def test_bad_links_are_refused_naming_the_fault(link: dict[str, Any], why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        specs({"instances": [P, D], "links": [link]})


def test_kv_transfer_settings_reach_the_spec() -> None:
    s = specs({"instances": [{**P, "kv_transfer": {"protocol": "sglang", "bootstrap_port": 8998,
                                                   "layerwise": True}}, D]})
    t = s["p-0"].kv_transfer
    assert (t.protocol, t.bootstrap_port, t.layerwise) == ("sglang", 8998, True)
    assert s["d-0"].kv_transfer.protocol == "vllm"
    with pytest.raises(ConfigError, match="bootstrap_port is a prefill instance's"):
        specs({"instances": [P, {**D, "kv_transfer": {"bootstrap_port": 8998}}]})
    with pytest.raises(ConfigError, match="role and kv_transfer are an LLM instance's"):
        specs({"instances": [{"name": "e", "kind": "embedding", "role": "prefill"}]})


def test_cluster_and_serving_yaml_alike(tmp_path: Path) -> None:
    data = {"instances": [P, D], "links": [{"between": ["p", "d"], "interconnect": "infiniband"}]}
    cluster = tmp_path / "c.yaml"
    cluster.write_text(yaml.safe_dump(data))
    serving = tmp_path / "s.yaml"
    serving.write_text(yaml.safe_dump({**data, "gateway": {"dispatch": "round_robin"}}))
    from_cluster = load_cluster(str(cluster))
    served = load_serve_config(serving).instances
    assert [s.role for s in from_cluster] == [s.role for s in served] == ["prefill"] * 2 + ["decode"] * 2
    assert link_between(served[0], served[2]) == LINK_CLASSES["infiniband"]


def test_a_cluster_with_a_prefill_instance_is_refused_when_it_runs_not_left_idle() -> None:
    import flowserve

    cluster = {"instances": [P, D], "links": [{"between": ["p", "d"], "interconnect": "infiniband"}]}
    with pytest.raises(ConfigError, match=r"instance 'p-0': role 'prefill' is not scheduled yet"):
        flowserve.simulate(cluster, TINY)
    both = {"instances": [{**D, "role": "both"}]}  # the same engines without roles run
    assert len(flowserve.simulate(both, TINY).queries) == 6


NAMES = st.sampled_from(["p", "d", "p-0", "d-1", "x", "", "p-9"])


@settings(max_examples=300, deadline=None)
@given(links=st.lists(st.fixed_dictionaries({"between": st.lists(NAMES, max_size=3)}, optional={
    "interconnect": st.sampled_from(["nvlink", "infiniband", "roce", "ethernet", "x"]),
    "bandwidth_gbps": st.one_of(st.floats(allow_nan=True), st.integers(-1, 10**7), st.text(max_size=3)),
    "latency_us": st.floats(-1, 1e7), "efficiency": st.floats(-1, 2), "extra": st.none()}), max_size=4))
def test_fuzz_links_parse_or_fail_with_a_config_error(links: list[dict[str, Any]]) -> None:
    try:
        out = specs({"instances": [P, D], "links": links})
    except ConfigError as e:
        assert str(e).startswith("cluster")
    else:
        for a in out.values():
            for b in out.values():
                if a is not b:
                    link = link_between(a, b)
                    assert link.effective_bytes_s > 0 and link.latency_s >= 0
