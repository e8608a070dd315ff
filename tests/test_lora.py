"""Models and LoRA adapters in the cluster configuration: `models`, `lora_adapters`,
`max_loras`, `lora_load_s`, with precise errors (and fuzzed), and what they make."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from flowserve.config import ClusterConfig, load_cluster
from flowserve.errors import ConfigError
from flowserve.schema import validate
from flowserve.types.specs import LoraSpec

BASE = {"name": "a", "gpu": "A100-80G", "model": "llama-3.1-8b"}


def cluster(tmp_path, *instances: dict[str, Any]):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"instances": list(instances)}))
    return load_cluster(str(path))


def test_adapters_and_served_names_make_the_spec(tmp_path) -> None:
    [spec] = cluster(tmp_path, {**BASE, "models": ["chat"], "lora_adapters": ["sql", "Support"], "max_loras": 2,
                                "lora_load_s": 0.2})
    assert spec.engine.lora == LoraSpec(("sql", "Support"), 2, 0.2)
    assert spec.aliases == ("chat",)
    assert spec.served_names() == {"llama-3.1-8b", "chat", "sql", "support"}
    assert spec.serves("SUPPORT") and spec.serves(None) and not spec.serves("other")


def test_defaults_are_vllms_one_slot(tmp_path) -> None:
    [spec] = cluster(tmp_path, {**BASE, "lora_adapters": ["sql"]})
    assert spec.engine.lora == LoraSpec(("sql",), 1, 0.05)


def test_the_built_in_lora_cluster_keeps_its_adapters() -> None:
    specs = load_cluster("lora-a100")
    assert len(specs) == 4 and all(s.engine.lora is not None and s.engine.lora.max_loras == 4 for s in specs)
    assert all(s.serves("lora-31") and not s.serves("lora-32") for s in specs)


@pytest.mark.parametrize(("extra", "message"), [
    ({"max_loras": 2}, "max_loras is for an instance that serves lora_adapters"),
    ({"lora_load_s": 1}, "lora_load_s is for an instance that serves lora_adapters"),
    ({"lora_adapters": []}, "lora_adapters is empty"),
    ({"lora_adapters": ["x", "X"]}, "'x' named twice"),
    ({"lora_adapters": ["llama-3.1-8b"]}, "'llama-3.1-8b' named twice"),
    ({"models": ["chat"], "lora_adapters": ["Chat"]}, "'chat' named twice"),
    ({"lora_adapters": ["has space"]}, "without spaces"),
    ({"lora_adapters": ["x"], "max_loras": 0}, "max_loras"),
    ({"lora_adapters": ["x"], "lora_load_s": -1}, "lora_load_s"),
])
def test_bad_lora_settings_are_precise_errors(tmp_path, extra: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        cluster(tmp_path, {**BASE, **extra})


def test_a_name_is_an_adapter_everywhere_or_nowhere(tmp_path) -> None:
    with pytest.raises(ConfigError, match="'chat' is a LoRA adapter on instance 'b' and the base model"):
        cluster(tmp_path, {**BASE, "models": ["chat"]}, {**BASE, "name": "b", "lora_adapters": ["chat"]})


def test_non_llm_instances_take_no_adapters(tmp_path) -> None:
    with pytest.raises(ConfigError, match="models and lora_adapters are for LLM instances"):
        cluster(tmp_path, {"name": "e", "kind": "embedding", "lora_adapters": ["x"]})


NAME = st.text(st.characters(codec="utf-8"), max_size=6)


@settings(max_examples=300, deadline=None)
@given(models=st.one_of(st.none(), st.lists(NAME, max_size=3), NAME, st.integers()),
       adapters=st.one_of(st.none(), st.lists(NAME, max_size=3), NAME, st.integers()),
       max_loras=st.one_of(st.none(), st.integers(-2, 2000), st.text(max_size=3)),
       load_s=st.one_of(st.none(), st.floats(allow_nan=True), st.text(max_size=3)))
def test_fuzz_lora_settings_are_accepted_or_a_config_error(models, adapters, max_loras, load_s) -> None:
    inst = {**BASE, **{k: v for k, v in (("models", models), ("lora_adapters", adapters), ("max_loras", max_loras),
                                        ("lora_load_s", load_s)) if v is not None}}
    try:
        specs = validate(ClusterConfig, {"instances": [inst]}, "cluster").specs()
    except ConfigError:
        return
    lora = specs[0].engine.lora
    assert (lora is None) == (adapters is None)
    if lora is not None:
        assert lora.max_loras >= 1 and 0 <= lora.load_s <= 600
        assert all(specs[0].serves(a) for a in lora.adapters)


def test_a_lora_spec_refuses_what_no_engine_runs() -> None:
    for bad in ((), 1, 0.0), (("a",), 0, 0.0), (("a",), 1, -1.0):
        with pytest.raises(ValueError, match="a LoRA spec needs adapters"):
            LoraSpec(*bad)
