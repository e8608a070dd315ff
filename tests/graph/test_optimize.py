"""Each Teola pass on a small graph (flowserve.graph.optimize)."""

from __future__ import annotations

from flowserve.graph.nodes import LLMNode, NodeResult, OpNode
from flowserve.graph.passes import PassContext, make_passes
from flowserve.graph.prompt import Lit, Out, Segment
from flowserve.graph.runtime import QueryRun, topological_order
from flowserve.graph.topology import depths
from flowserve.graph.workflow import Graph, Workflow

CTX = PassContext({}, {})


def build(fn) -> list:
    g = Graph({})
    fn(g)
    return g.take()


def by_key(nodes) -> dict:
    return {n.key: n for n in nodes}


def test_prune_drops_order_only_edges_and_keeps_data_and_after_edges():
    def wf(g: Graph) -> None:
        a = g.tool("a", "sql")
        b = g.tool("b", "sql", chain=[a])  # module order only
        c = g.tool("c", "sql", chain=[a], x=b)  # reads b
        g.tool("d", "sql", after=[c], chain=[c, b])  # needs c; b only by order

    nodes = build(wf)
    assert by_key(nodes)["b"].deps == ("a",) and by_key(nodes)["b"].chain == ("a",)
    pruned = by_key(make_passes("prune")[0](nodes, CTX))
    assert pruned["b"].deps == ()
    assert pruned["c"].deps == ("b",)
    assert pruned["d"].deps == ("c",) and pruned["d"].chain == ()


def test_decompose_splits_and_pipelines_micro_batches_with_an_aggregate():
    def wf(g: Graph) -> None:
        e = g.tool("emb", "embed", batchable=True, texts=["x"], units=300)
        i = g.tool("ing", "vector_ingest", batchable=True, vectors=e, units=300)
        g.tool("use", "sql", x=i)

    ctx = PassContext({}, {}, {"embed": 128, "vector_ingest": 128})
    out = make_passes("decompose")[0](build(wf), ctx)
    nodes = by_key(out)
    assert [nodes[f"emb#{j}"].args["units"] for j in range(3)] == [128, 128, 44]
    # micro-batch j of the successor waits only for micro-batch j
    assert nodes["ing#1"].deps == ("emb#1",) and nodes["ing#1"].args["vectors"] == Out("emb#1")
    assert nodes["ing"].op == "aggregate" and nodes["ing"].deps == ("ing#0", "ing#1", "ing#2")
    assert nodes["use"].deps == ("ing",)
    topological_order(out, set())  # still a DAG
    # sizes come from the component's profile: a larger efficient batch splits less
    big = by_key(make_passes("decompose")[0](build(wf), PassContext({}, {}, {"embed": 200, "vector_ingest": 200})))
    assert "emb#1" in big and "emb#2" not in big
    assert make_passes("decompose")[0](build(wf), CTX) == build(wf)  # no profile: never split

    def optional(g: Graph) -> None:  # a reader that runs without its input keeps doing so per micro-batch
        e = g.tool("emb", "embed", batchable=True, texts=["x"], units=300)
        g.tool("ing", "vector_ingest", batchable=True, vectors=e.optional, units=300)

    split = by_key(make_passes("decompose")[0](build(optional), ctx))
    assert split["ing#2"].args["vectors"] == Out("emb#2", optional=True)


def test_prefill_split_prefills_the_ready_prefix_once_per_shared_prefix():
    instr = "You answer questions from the context. " * 8

    def wf(g: Graph) -> None:
        s = g.tool("search", "web_search", q="x")
        g.llm("a1", [instr, Segment(7, 30), "\nContext:", s], max_tokens=10)
        g.llm("a2", [instr, Segment(7, 30), "\nMore:", s], max_tokens=10)
        g.llm("ready", [instr], max_tokens=5)  # nothing to wait for: untouched

    out = by_key(make_passes("prefill_split")[0](build(wf), CTX))
    pre = out["a1.prefill"]
    assert pre.kind == "prefill" and pre.max_tokens == 1 and pre.deps == ()
    assert pre.prompt == (Lit(instr), Segment(7, 30), Lit("\nContext:"))
    assert "a2.prefill" in out  # a different prefix ("More:")
    assert out["a1"].deps == ("search", "a1.prefill")
    assert "ready.prefill" not in out and out["ready"].deps == ()
    # the full prompt starts with the prefilled parts: the prefix cache serves them
    assert out["a1"].prompt[: len(pre.prompt)] == pre.prompt


def test_prefill_split_stages_a_prefill_up_to_the_last_input_when_the_earlier_come_first():
    instr = "Refine the existing answer with the new context below. " * 4

    def wf(g: Graph) -> None:
        ranked = g.tool("rerank", "rerank")
        ctx = [g.tool(f"rerank[{j}]", "part", source=ranked, index=j, of=2) for j in range(2)]
        a0 = g.llm("a0", [instr, "\nContext: ", ctx[0]], max_tokens=10)
        g.llm("a1", [instr, "\nContext: ", ctx[1], "\nExisting answer: ", a0, "\nRefined:"], max_tokens=10)
        d0 = g.llm("d0", [instr, ctx[0]], max_tokens=10)
        g.llm("join", [instr, "\nDrafts: ", d0, ctx[1], a0], max_tokens=10)  # reads siblings: not staged

    out = by_key(make_passes("prefill_split")[0](build(wf), CTX))
    staged = out["a1.prefill2"]
    # rerank[1] is a part of rerank, upstream of a0: the chunk is prefilled while a0 decodes
    assert staged.kind == "prefill" and staged.max_tokens == 1
    assert staged.prompt == (Lit(instr), Lit("\nContext: "), Out("rerank[1]"), Lit("\nExisting answer: "))
    assert staged.deps == ("rerank[1]", "a0.prefill")  # after the shared instruction's prefill
    assert out["a1"].deps == ("rerank[1]", "a0", "a0.prefill", "a1.prefill2")
    assert "a0.prefill2" not in out  # one input: nothing to stage
    assert "join.prefill2" not in out  # d0 is not upstream of a0
    topological_order(list(out.values()), set())


def test_pipeline_streams_parts_of_a_splittable_output():
    class W(Workflow):
        def start(self, g: Graph) -> None:
            x = g.llm("x", ["list three queries"], max_tokens=60, splittable=True)
            for i in range(3):
                p = g.tool(f"x[{i}]", "part", source=x, index=i, of=3)
                g.tool(f"s{i}", "web_search", q=p)

    out = by_key(make_passes("pipeline")[0](build(W().start), CTX))
    assert all(out[f"x[{i}]"].args["stream"] for i in range(3))
    run = QueryRun(W(), 0, make_passes("pipeline"))
    assert [n.key for n in run.start()] == ["x"]
    # part 0 completes mid-decode: its reader is issued at once, before x finishes
    assert [n.key for n in run.progress("x", 0, NodeResult(output_tokens=20))] == ["s0"]
    assert [n.key for n in run.progress("x", 1, NodeResult(output_tokens=25))] == ["s1"]
    # x ends having reported two parts: the third does not exist, its search is skipped
    assert run.complete("x", NodeResult(output_tokens=60)) == []
    assert run.results["x[2]"].missing and run.results["s2"].missing and run.outstanding == 2  # s0, s1 run
    # without the pass the parts are taken from the whole output when x ends (an even
    # share of a modelled output that reported no parts); no part goes to a driver
    plain = QueryRun(W(), 0)
    plain.start()
    assert sorted(n.key for n in plain.complete("x", NodeResult(output_tokens=60))) == ["s0", "s1", "s2"]
    assert [plain.results[f"x[{i}]"].output_tokens for i in range(3)] == [20, 20, 20]


def test_depths_are_longest_paths_to_an_output():
    nodes = {n.key: n for n in [
        LLMNode("a", "a", (Lit("q"),), 1), OpNode("b", "b", "sql", ("a",)),
        OpNode("c", "c", "sql", ("b",)), OpNode("d", "d", "sql", ("a",)), OpNode("e", "e", "sql", ("c", "d"))]}
    assert depths(nodes) == {"a": 4, "b": 3, "c": 2, "d": 2, "e": 1}
