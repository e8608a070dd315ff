"""A JSON Lines trace as a workload: the first line that is not a JSON object is named, and no
input gets past the reader as anything but a workload or a ConfigError (fuzzed)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flowserve.errors import ConfigError
from flowserve.graph.plan import CallStep, QueryPlan, Segment
from flowserve.workloads.base import QuerySpec
from flowserve.workloads.recorded import read_jsonl_trace
from flowserve.workloads.trace import write_trace


@pytest.mark.parametrize(("text", "message"), [
    ('[{"steps": []}]\n', "line 1 is not a JSON object; a JSON Lines trace has one query per line"),
    ('{"id": 0}\n\nnot json\n', "line 3 is not a JSON object"),
    ("\n \n", "holds no queries"),
])
def test_not_json_lines_names_the_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        read_jsonl_trace(str(path))


def test_a_simulations_trace_keeps_each_querys_model(tmp_path: Path) -> None:
    plan = QueryPlan("w", ((CallStep("s", (Segment(1, 10),), 4),),))
    path = tmp_path / "t.jsonl"
    write_trace(path, [QuerySpec(0, 0.0, plan, model="lora-3"), QuerySpec(1, 1.0, plan)])
    assert [q.model for q in read_jsonl_trace(str(path)).queries] == ["lora-3", None]
    line = json.loads(path.read_text().splitlines()[0])
    path.write_text(json.dumps({**line, "model": 7}) + "\n")
    with pytest.raises(ConfigError, match="model must be a string, got 7"):
        read_jsonl_trace(str(path))


LINE = st.one_of(st.text(max_size=30), st.builds(json.dumps, st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(
        ["id", "arrival", "steps", "dag", "workflow", "model", "prompt", "output", "stage", "calls", "Request"]),
        inner, max_size=4), max_leaves=12)))


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(LINE, max_size=4))
def test_fuzz_a_trace_reads_as_a_workload_or_a_config_error(lines: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.jsonl"
        path.write_text("\n".join(lines))
        try:
            wl = read_jsonl_trace(str(path))
        except ConfigError:
            return
        assert wl.queries
