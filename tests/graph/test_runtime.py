"""The workflow IR: the Graph builder, the per-query runtime, Out resolution, passes."""

from __future__ import annotations

import dataclasses

import pytest

from flowserve.errors import ConfigError, WorkflowError
from flowserve.graph.nodes import LLMNode, NodeResult, OpNode
from flowserve.graph.passes import PassContext, make_passes
from flowserve.graph.prompt import Lit, Out, Segment, Toks, as_prompt, output_segment_id, refs
from flowserve.graph.runtime import QueryRun, topological_order
from flowserve.graph.workflow import Graph, Workflow


class Search(Workflow):
    """plan → search(plan) → answer(question, hits); up to `rounds` self-checks."""

    def __init__(self, question: str, rounds: int = 2) -> None:
        self.question, self.rounds = question, rounds
        self.checks = 0

    def start(self, g: Graph) -> None:
        plan = g.llm("plan", ["Plan: ", self.question], max_tokens=8)
        hits = g.tool("search", "web_search", query=plan)
        g.llm("answer", ["Q: ", self.question, "\nHits: ", hits], max_tokens=16)

    def on_done(self, g: Graph, key: str, result: NodeResult) -> None:
        if key in ("answer", f"check{self.checks}") and self.checks < self.rounds:
            self.checks += 1
            g.llm(f"check{self.checks}", ["Check: ", Out(key)], max_tokens=4, stage="check")


def finish(run: QueryRun, node, **kw):
    return run.complete(node.key, NodeResult(**kw))


def test_dependencies_come_from_the_data_a_step_reads():
    run = QueryRun(Search("why?"), query_id=7)
    ready = run.start()
    assert [n.key for n in ready] == ["plan"]
    assert run.nodes["search"].deps == ("plan",) and run.nodes["answer"].deps == ("search",)
    [search] = finish(run, ready[0], output_tokens=3, text="find why")
    # Out(plan) in a tool argument resolves to the plan's text when the op is issued.
    assert isinstance(search, OpNode) and search.args == {"query": "find why"}
    [answer] = finish(run, search, value=["doc one", "doc two"])
    assert answer.prompt == (Lit("Q: "), Lit("why?"), Lit("\nHits: "), Lit("doc one\n\ndoc two"))


def test_the_graph_grows_at_run_time_until_the_workflow_stops():
    run = QueryRun(Search("q", rounds=2))
    node = run.start()[0]
    node = finish(run, node, output_tokens=2)[0]
    node = finish(run, node, value="hits")[0]
    seen = []
    while node is not None:
        seen.append(node.key)
        nxt = finish(run, node, output_tokens=5)
        node = nxt[0] if nxt else None
    assert seen == ["answer", "check1", "check2"] and run.finished and run.outstanding == 0


def test_simulated_outputs_resolve_to_a_segment_of_their_length():
    run = QueryRun(Search("q", rounds=1), query_id=3)
    plan = run.start()[0]
    search = finish(run, plan, output_tokens=12)[0]
    answer = finish(run, search, value=None)[0]
    check = finish(run, answer, output_tokens=40)[0]
    assert check.prompt[-1] == Segment(output_segment_id(3, "answer"), 40)
    # The same step of another query is a different segment (no false sharing).
    assert output_segment_id(4, "answer") != output_segment_id(3, "answer")


def test_explicit_dependencies_with_rshift():
    class Fan(Workflow):
        def start(self, g: Graph) -> None:
            a = g.llm("a", "x", max_tokens=1)
            b, c = g.llm("b", "y", max_tokens=1), g.llm("c", "z", max_tokens=1)
            a >> [b, c]
            [b, c] >> g.tool("join", "aggregate")

    run = QueryRun(Fan())
    assert [n.key for n in run.start()] == ["a"]
    assert set(run.nodes["join"].deps) == {"b", "c"}
    ready = finish(run, run.nodes["a"], output_tokens=1)
    assert sorted(n.key for n in ready) == ["b", "c"]
    assert finish(run, run.nodes["b"], output_tokens=1) == []
    assert [n.key for n in finish(run, run.nodes["c"], output_tokens=1)] == ["join"]


@pytest.mark.parametrize("build, match", [
    (lambda g: (g.llm("a", "x", max_tokens=1, after=["b"]), g.llm("b", "y", max_tokens=1, after=["a"])),
     "cycle"),
    (lambda g: g.llm("a", ["x", Out("ghost")], max_tokens=1), "unknown node 'ghost'"),
    (lambda g: (g.llm("a", "x", max_tokens=1), g.llm("a", "y", max_tokens=1)), "duplicate"),
    (lambda g: g.llm("a", "", max_tokens=1), "empty prompt"),
    (lambda g: g.llm("a", "x", max_tokens=0), "max_tokens"),
])
def test_bad_graphs_raise_a_workflow_error(build, match):
    class Bad(Workflow):
        def start(self, g: Graph) -> None:
            build(g)

    with pytest.raises(WorkflowError, match=match):
        QueryRun(Bad()).start()


def test_a_step_cannot_take_dependencies_after_its_batch():
    class Late(Workflow):
        def start(self, g: Graph) -> None:
            g.llm("a", "x", max_tokens=1)

        def on_done(self, g: Graph, key: str, result: NodeResult) -> None:
            g.depend("a", "b")

    run = QueryRun(Late())
    with pytest.raises(WorkflowError, match="earlier batch"):
        finish(run, run.start()[0], output_tokens=1)


def test_passes_run_on_every_batch_including_run_time_ones():
    seen: list[list[str]] = []

    def shorten(batch, ctx: PassContext):
        # A pass sees the graph so far read-only and returns the nodes to add instead.
        seen.append(sorted(n.key for n in batch))
        assert all(k not in ctx.nodes for k in (n.key for n in batch))
        return [dataclasses.replace(n, max_tokens=1) if isinstance(n, LLMNode) else n for n in batch]

    run = QueryRun(Search("q", rounds=1), passes=[shorten])
    plan = run.start()[0]
    assert plan.max_tokens == 1
    search = finish(run, plan, output_tokens=1)[0]
    answer = finish(run, search, value="h")[0]
    check = finish(run, answer, output_tokens=1)[0]
    assert check.max_tokens == 1
    assert seen == [["answer", "plan", "search"], ["check1"]]


def test_make_passes_names():
    assert make_passes("none") == () and make_passes(None) == ()
    with pytest.raises(ConfigError, match="unknown graph pass"):
        make_passes("no_such_pass")


def test_topological_order_puts_producers_first():
    a = LLMNode("a", "s", (Lit("x"),), 1)
    b = LLMNode("b", "s", (Out("a"),), 1, ("a",))
    c = OpNode("c", "agg", "aggregate", deps=("b", "z"))
    order = topological_order([c, b, a], known={"z"})
    assert [n.key for n in order] == ["a", "b", "c"]


def test_prompt_parts():
    p = as_prompt("Hi ", [Lit("a"), ["b", Toks((1, 2))]], Segment(5, 10), "")
    assert p == (Lit("Hi "), Lit("a"), Lit("b"), Toks((1, 2)), Segment(5, 10))
    assert refs((Lit("x"), Out("s1"), Out("s2"))) == ("s1", "s2")
    with pytest.raises(TypeError, match="float"):
        as_prompt(1.5)


# --------------------------------------------------------------------------- fewer parts than planned


class FanOut(Workflow):
    """A splittable `plan` of up to 3 queries, a search per query (embed → search: a step
    that needs a missing step is missing too), one answer joining the hits that exist."""

    def start(self, g: Graph) -> None:
        plan = g.llm("plan", ["queries for: ", "why?"], max_tokens=30, splittable=True)
        hits = []
        for i in range(3):
            part = g.tool(f"plan[{i}]", "part", source=plan, index=i, of=3)
            vec = g.tool(f"embed{i}", "embed", texts=part)
            hits.append(g.tool(f"search{i}", "vector_search", vector=vec, index="idx"))
        g.llm("answer", ["Hits: ", *(h.optional for h in hits)], max_tokens=8)
        g.tool("rerank", "rerank", **{f"docs{i}": h.optional for i, h in enumerate(hits)})


def _drive(run: QueryRun, values: dict[str, object]) -> list[str]:
    """Finish every issued node (LLM text / op value from `values`) until none is left;
    returns the keys issued to the driver."""
    issued: list[str] = []
    todo = run.start()
    while todo:
        n = todo.pop(0)
        issued.append(n.key)
        v = values.get(n.key)
        todo += run.complete(n.key, NodeResult(text=v) if isinstance(n, LLMNode) else NodeResult(value=v))
    return issued


@pytest.mark.parametrize("passes", ["none", "all"])
def test_an_output_with_fewer_parts_than_planned_shrinks_the_fan_out(passes):
    run = QueryRun(FanOut(), 0, make_passes(passes))
    issued = _drive(run, {"plan": "1. first query\n", "embed0": "v0", "search0": ["hit one"], "answer": "ok"})
    assert run.finished
    # one line: one embed and one search ran; the parts beyond and their steps are missing
    assert [k for k in issued if k[:-1] in ("embed", "search")] == ["embed0", "search0"]
    assert all(run.results[k].missing for k in ("plan[1]", "plan[2]", "embed1", "embed2", "search1", "search2"))
    assert not any(k.startswith("plan[") for k in issued)  # parts never go to a driver
    # the joins ran on what exists: an optional input of a missing step reads as nothing
    assert run.nodes["answer"].prompt == (Lit("Hits: "), Lit("hit one"))
    assert run.nodes["rerank"].args == {"docs0": ["hit one"], "docs1": None, "docs2": None}


def test_a_list_with_fewer_items_and_a_modelled_list_shrink_alike():
    class Top(Workflow):
        def start(self, g: Graph) -> None:
            hits = g.tool("search", "vector_search")
            drafts = [g.llm(f"draft{j}", ["Context: ", g.tool(f"search[{j}]", "part", source=hits, index=j, of=3)],
                            max_tokens=4) for j in range(3)]
            g.llm("answer", [d.optional for d in drafts], max_tokens=4)

    live = QueryRun(Top())
    assert [n.key for n in live.start()] == ["search"]
    ready = live.complete("search", NodeResult(value=["only chunk"]))
    assert [n.key for n in ready] == ["draft0"] and ready[0].prompt[-1] == Lit("only chunk")
    sim = QueryRun(Top())
    sim.start()  # the simulator's search returns its hits as segments: one here
    ready = sim.complete("search", NodeResult(value=(Segment(5, 256),), output_tokens=256))
    assert [n.key for n in ready] == ["draft0"] and ready[0].prompt[-1] == Segment(5, 256)
    for run in (live, sim):
        assert run.results["draft1"].missing and run.results["draft2"].missing
        [answer] = run.complete("draft0", NodeResult(text="a"))
        assert answer.prompt == (Lit("a"),)


def test_a_part_default_stands_in_when_the_output_has_no_part():
    class Expand(Workflow):
        def start(self, g: Graph) -> None:
            x = g.llm("x", ["rewrite"], max_tokens=8, splittable=True)
            first = g.tool("x[0]", "part", source=x, index=0, of=2, default="the question")
            g.tool("s0", "web_search", query=first)
            g.tool("s1", "web_search", query=g.tool("x[1]", "part", source=x, index=1, of=2))

    run = QueryRun(Expand())
    run.start()
    [search] = run.complete("x", NodeResult(text="\n\n"))
    assert search.key == "s0" and search.args == {"query": "the question"}
    assert run.results["s1"].missing


def test_a_part_of_a_literal_value_is_taken_by_the_runtime_too():
    class Literal(Workflow):
        def start(self, g: Graph) -> None:
            g.tool("p", "part", source="a\nb", index=1)

    run = QueryRun(Literal())
    assert run.start() == [] and run.results["p"].text == "b" and run.finished
