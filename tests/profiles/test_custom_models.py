import pytest
import yaml
from typer.testing import CliRunner

from flowserve.cli import app
from flowserve.config import load_cluster
from flowserve.errors import ConfigError
from flowserve.profiles.cost_model import RooflineCostModel
from flowserve.profiles.fitted import FittedCostModel
from flowserve.profiles.hardware import get_gpu
from flowserve.profiles.instance import instance_profile, kv_capacity, roofline_for
from flowserve.profiles.models import ModelSpec
from flowserve.sim.run import PolicySpec, simulate, standalone_times
from flowserve.workloads import load_workload

COEF = (2e-3, 8e-3, 1.5e-5, 4e-10, 3e-4, 2e-8)
ARCH = {"params_b": 1.1, "layers": 22, "hidden": 2048, "heads": 32, "kv_heads": 4, "head_dim": 64,
        "max_context": 32768}


def write_cluster(tmp_path, instances, coef=COEF, max_context=32768):
    FittedCostModel("tiny-llama", coef, max_context, 200_000, 4, 1024, "cpu, 1 thread").save(tmp_path / "p.yaml")
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"instances": instances}))
    return str(path)


def test_profile_instance_takes_model_limits_and_slots_from_the_profile(tmp_path):
    ref = write_cluster(tmp_path, [{"name": "t", "profile": "p.yaml", "backend": "openai",
                                    "url": "http://127.0.0.1:9", "count": 2},
                                   {"name": "u", "profile": "p.yaml", "max_inflight": 2, "max_num_seqs": 8}])
    t0, t1, u = load_cluster(ref)
    assert (t0.name, t1.name, t0.model, t0.gpu) == ("t-0", "t-1", "tiny-llama", "cpu, 1 thread")
    assert (t0.max_inflight, t0.engine.max_num_seqs, t0.engine.token_budget) == (4, 4, 1024)
    assert (u.max_inflight, u.engine.max_num_seqs) == (2, 8)  # explicit settings win
    assert roofline_for(t0) is t0.profile and kv_capacity(t0) == 200_000
    assert instance_profile(t0).max_context == 32768


def test_declared_architecture_uses_the_roofline(tmp_path):
    ref = write_cluster(tmp_path, [{"name": "x", "gpu": "L4", "model": "my-1b", "model_arch": ARCH}])
    (spec,) = load_cluster(ref)
    expected = RooflineCostModel(get_gpu("L4"), ModelSpec("my-1b", **ARCH))
    assert roofline_for(spec) == expected
    assert instance_profile(spec).max_context == 32768


@pytest.mark.parametrize(("inst", "message"), [
    ({"name": "x", "gpu": "L4", "model": "my-1b"}, "unknown model 'my-1b'"),
    ({"name": "x", "gpu": "L4", "model": "my-1b"},  # issue 44 item 12: the way that works, named
     r"flowserve profile --url ENGINE_URL --model my-1b --out my-1b.yaml`, then `profile: my-1b.yaml`"),
    ({"name": "x", "model": "mistral-7b"}, "instance 'x': gpu is required unless the instance has a profile"),
    ({"name": "x", "profile": "p.yaml", "model": "llama-2-7b"}, "differs from the profile's model 'tiny-llama'"),
    ({"name": "x", "profile": "nope.yaml"}, "instance 'x': profile: cannot read"),
    ({"name": "x", "gpu": "L4", "model": "m", "model_arch": {**ARCH, "layers": 0}}, "model_arch.layers"),
])
def test_bad_custom_instances_are_config_errors(tmp_path, inst, message):
    with pytest.raises(ConfigError, match=message):
        load_cluster(write_cluster(tmp_path, [inst]))


def test_catalog_clusters_are_unchanged():
    specs = load_cluster("hetero-1")
    assert [s.model for s in specs] == ["llama-3.1-70b"] * 4
    assert all(s.profile is None and s.model_spec is None for s in specs)


def test_profiled_cluster_simulates_with_the_fitted_costs(tmp_path):
    wl = load_workload("text2sql", {"queries": 6, "rate": 0.2, "seed": 1})
    alone, runs = [], []
    for k in (1, 2, 3):
        sub = tmp_path / str(k)
        sub.mkdir()
        inst = [{"name": "t", "profile": "p.yaml", "count": 2}]
        specs = load_cluster(write_cluster(sub, inst, [c * k for c in COEF]))
        alone.append(standalone_times(wl, specs))
        runs.append(simulate(specs, wl, PolicySpec("least_load", "fcfs")))
    # standalone = LLM time (linear in the coefficients) + tool time (fixed)
    for a1, a2, a3 in zip(*alone, strict=True):
        assert a3 - a2 == pytest.approx(a2 - a1) and a2 > a1
    assert all(q.failed is None for q in runs[0].queries) and len(runs[0].queries) == 6
    llm_busy = [sum(i.busy_s for i in r.instances) for r in runs]
    assert llm_busy[2] > llm_busy[1] > llm_busy[0] > 0


def test_prompts_longer_than_the_profiled_context_fail_their_own_queries(tmp_path):
    specs = load_cluster(write_cluster(tmp_path, [{"name": "t", "profile": "p.yaml"}], max_context=2048))
    wl = load_workload("text2sql", {"queries": 3})
    res = simulate(specs, wl, PolicySpec())
    assert len(res.queries) == 3  # each ended, none dropped
    assert all("exceeds the model's context of 2048 tokens" in (q.failed or "") for q in res.queries)


def test_cli_simulates_a_profiled_cluster(tmp_path):
    ref = write_cluster(tmp_path, [{"name": "t", "profile": "p.yaml", "count": 2}])
    out = tmp_path / "s.json"
    res = CliRunner().invoke(app, ["simulate", "--cluster", ref, "--set", "workload.queries=5",
                                   "--slo-scales", "2,4", "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert out.exists()
