"""Decode pipelining live: a streamed output's complete lines reach the core as
CallProgress while the call runs, and a part's successor starts before the call ends."""

from __future__ import annotations

import asyncio
import itertools

from hypothesis import given
from hypothesis import strategies as st
from live_support import ScriptedBackend, ext_spec, run

from flowserve.apps.teola import SearchGen
from flowserve.engines.backend import CallOutcome, EngineRequest, TokenSink
from flowserve.graph.primitives import split_parts
from flowserve.host.parts import PartSink
from flowserve.host.root import compose_driver
from flowserve.host.settings import GatewaySettings
from flowserve.profiles.ops import op_profile
from flowserve.types.events import CallProgress
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import LLMCall, ToolOp, WorkflowRef


def test_each_complete_line_is_one_part_with_its_token_count() -> None:
    events: list[CallProgress] = []
    seen: list[str] = []
    sink = PartSink(7, "a", lambda: 1.0, events.append, TokenSink(seen.append))
    for d in ["1. first ", "query\n", "\n", "- second", " one\nthi", "rd"]:
        sink.push(d)
    assert [(e.call_id, e.index, e.text, e.output_tokens) for e in events] == [
        (7, 0, "first query", 2), (7, 1, "second one", 3)]
    assert "".join(seen) == "1. first query\n\n- second one\nthird" and sink.sent >= 2


@given(text=st.text(st.sampled_from("ab -1.\n "), max_size=40), cuts=st.lists(st.integers(0, 40), max_size=8))
def test_fuzz_streamed_parts_are_the_parts_of_the_complete_lines(text: str, cuts: list[int]) -> None:
    events: list[CallProgress] = []
    sink = PartSink(1, "a", lambda: 0.0, events.append)
    bounds = sorted({0, len(text), *(min(c, len(text)) for c in cuts)})
    for a, b in itertools.pairwise(bounds):
        sink.push(text[a:b])
    done = text.rpartition("\n")[0]
    assert [e.text for e in events] == split_parts(done)
    assert [e.index for e in events] == list(range(len(events)))


class LineByLine(ScriptedBackend):
    """The judge streams its first line, then waits for `hold` before the rest."""

    def __init__(self, spec: InstanceSpec) -> None:
        super().__init__(spec)
        self.hold = asyncio.Event()
        self.judging = asyncio.Event()

    async def _run(self, call: LLMCall, req: EngineRequest) -> CallOutcome:
        self.calls.append(call)
        text = "volcano eruptions\nbread yeast\norbits" if call.node == "judge" else "the answer"
        first, _, rest = text.partition("\n")
        if req.sink is not None:
            req.sink.push(first + "\n")
        if call.node == "judge":
            self.judging.set()
            await self.hold.wait()
        if req.sink is not None:
            req.sink.push(rest)
        return CallOutcome(output_tokens=len(text.split()), cached_tokens=0, prompt_tokens=call.input_tokens,
                           text=text, finish_reason="stop")


def _searches(passes: str) -> tuple[list[str], list[str]]:
    async def body() -> tuple[list[str], list[str]]:
        llm = LineByLine(ext_spec("llm"))
        search = InstanceSpec("search-0", "", "search", kind="search", op_profile=op_profile("search"))
        d = compose_driver([llm.spec, search], GatewaySettings(passes=passes), backend_factory=lambda s, _d: llm,
                           workflows={SearchGen.name: SearchGen})
        queries: list[str] = []

        async def web_search(op: ToolOp, instance: InstanceSpec | None) -> list[str]:
            queries.append(op.args["query"])
            return [f"snippet about {op.args['query']}"]

        d.tools._executors["web_search"] = web_search
        await d.start()
        try:
            ref = WorkflowRef(SearchGen.name, ("q?", 3, 1, 8, 8, 8))
            h = await d.submit(d.new_query("search_gen", ref))
            await llm.judging.wait()
            if passes != "none":
                await d.until(lambda: bool(queries))
            early = list(queries)  # module chain: nothing searched while the judge writes
            llm.hold.set()
            r = await h.done
            assert r.status == "completed", r.reason
            return early, queries
        finally:
            await d.shutdown()
    return run(body())


def test_a_streamed_line_is_searched_before_the_judge_ends() -> None:
    early, every = _searches("prune,pipeline")
    assert early == ["volcano eruptions"]
    assert sorted(every) == ["bread yeast", "orbits", "volcano eruptions"]
    early, every = _searches("none")
    assert early == [] and sorted(every) == ["bread yeast", "orbits", "volcano eruptions"]
