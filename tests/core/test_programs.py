"""Programs in the core: an open-ended query that grows by inputs, answers step by step,
keeps going past a failed or cancelled call, and finishes when closed."""

from helpers import ScriptedDriver, ScriptProgram, live_spec, llm, make_core, query

from flowserve.core import CallStatus
from flowserve.errors import FailureKind
from flowserve.graph.program import Program, ProgramCall
from flowserve.graph.prompt import Toks
from flowserve.types.commands import CancelCall, QueryDone, QueryFailed, StepDone
from flowserve.types.events import CallCancelled, CallFailed, CallFinished, QueryClosed, QueryInput
from flowserve.types.work import Query, WorkflowRef


def pcall(key: str, n: int = 50, stage: str = "step", thread: str = "main") -> ProgramCall:
    return ProgramCall(key, (Toks(tuple(range(1, n + 1))),), 8, stage, thread)


def program_query(qid: int, t: float = 0.0, deadline: float | None = None) -> Query:
    return Query(qid, t, "program", WorkflowRef(Program.name, (f"p{qid}",)), deadline)


def steps(cmds) -> list[StepDone]:
    return [c for c in cmds if isinstance(c, StepDone)]


def test_a_program_grows_by_inputs_answers_each_call_and_ends_when_closed():
    d = ScriptedDriver(make_core([live_spec("a")]))
    q = program_query(1, deadline=5.0)
    assert d.arrive(q) == []  # nothing to do until a call comes
    d.feed(QueryInput(0.5, 1, pcall("c1")))
    [sent] = d.sent
    assert sent.call.node == "c1" and sent.call.stage == "step"
    d.t = 1.0
    [done] = steps(d.finish(sent.call.id))
    assert done.key == "c1" and done.result.error is None and done.result.output_tokens == 8
    assert 1 not in d.ended  # still open: more calls may come
    d.feed(QueryInput(3.0, 1, pcall("c2", 80)))
    d.t = 3.5
    d.finish(d.sent[-1].call.id)
    d.feed(QueryClosed(9.0, 1))  # closed long after its last call
    end = d.ended[1]
    assert isinstance(end, QueryDone)
    assert end.time == 9.0 and end.latency == 4.5  # it ended with its last call, at 4.5
    assert end.deadline_met is True
    assert end.output["calls"] == 2 and end.output["prompt_tokens"] == 130


def test_a_failed_call_ends_alone_and_the_program_goes_on():
    d = ScriptedDriver(make_core([live_spec("a")], max_retries=0))
    d.arrive(program_query(2))
    d.feed(QueryInput(0.0, 2, pcall("c1")))
    sent = d.sent[-1]
    d.inflight.pop(sent.call.id)
    [step] = steps(d.feed(CallFailed(1.0, sent.call.id, "a", "engine error 500", retryable=False)))
    assert step.key == "c1" and "engine error 500" in step.result.error
    assert step.result.error_kind is FailureKind.ENGINE_ERROR
    assert 2 not in d.ended
    d.feed(QueryInput(2.0, 2, pcall("c2")))
    d.finish(d.sent[-1].call.id)
    d.feed(QueryClosed(4.0, 2))
    assert isinstance(d.ended[2], QueryDone) and d.ended[2].output["failed_calls"] == 1


def test_cancel_ends_one_call_of_a_program_but_fails_an_ordinary_query():
    core = make_core([live_spec("a")])
    d = ScriptedDriver(core)
    d.arrive(program_query(3))
    d.feed(QueryInput(0.0, 3, pcall("c1")))
    d.feed(QueryInput(0.0, 3, pcall("c2", thread="t2")))
    first = d.sent[0].call.id
    cmds = d.feed(CallCancelled(0.5, 3, "c1"))
    assert CancelCall(first, "a") in cmds
    [step] = steps(cmds)
    assert step.key == "c1" and "cancelled" in step.result.error
    assert step.result.error_kind is FailureKind.CANCELLED
    assert core.call_status(first) is None and 3 not in d.ended
    assert core.calls_of(3) == {d.sent[1].call.id: CallStatus.RELEASED}
    d.finish(d.sent[1].call.id)
    d.feed(QueryClosed(2.0, 3))
    assert isinstance(d.ended[3], QueryDone)
    assert d.feed(CallCancelled(3.0, 3, "c2")) == []  # ended meanwhile: nothing to do

    ordinary = query(ScriptProgram([llm("A")]))
    d.arrive(ordinary)
    d.feed(CallCancelled(4.0, ordinary.id, "A", "the client went away"))
    assert isinstance(d.ended[ordinary.id], QueryFailed) and d.ended[ordinary.id].reason == "the client went away"
    assert d.ended[ordinary.id].kind is FailureKind.CANCELLED


def test_input_to_an_ended_query_is_ignored_and_a_closed_one_refuses_input():
    d = ScriptedDriver(make_core([live_spec("a")]))
    d.arrive(program_query(4))
    d.feed(QueryClosed(0.0, 4))
    assert isinstance(d.ended[4], QueryDone) and d.ended[4].output["calls"] == 0
    assert d.feed(QueryInput(1.0, 4, pcall("late"))) == []
    # closed with a call still running: more input is a driver bug, and says so
    d.arrive(program_query(5))
    d.feed(QueryInput(0.0, 5, pcall("c1")))
    d.feed(QueryClosed(0.1, 5))
    d.feed(QueryInput(0.2, 5, pcall("c2")))
    assert isinstance(d.ended[5], QueryFailed) and "closed" in d.ended[5].reason
    # an ordinary workflow takes no input
    ordinary = query(ScriptProgram([llm("A")]))
    d.arrive(ordinary)
    d.feed(QueryInput(0.3, ordinary.id, pcall("x")))
    assert "takes no input" in d.ended[ordinary.id].reason


def test_attained_service_in_all_and_along_each_threads_critical_path():
    core = make_core([live_spec("a", 8)])
    d = ScriptedDriver(core)
    d.arrive(program_query(6))
    qs = core._queries[6]  # what policies read (the view's queries)

    def run(key: str, thread: str, start: float, end: float) -> None:
        d.feed(QueryInput(start, 6, pcall(key, thread=thread)))
        sc = d.sent[-1]
        d.inflight.pop(sc.call.id)
        d.feed(CallFinished(end, sc.call.id, "a", 4, started=start))

    run("m1", "main", 0.0, 2.0)          # main: 2 s
    run("a1", "a", 2.0, 3.0)             # fork a from m1: path 2 + 1
    run("b1", "b", 2.0, 6.0)             # fork b from a1 (the latest finished): path 3 + 4
    run("a2", "a", 6.0, 6.5)             # a follows a1 and joins b1 (finished after a1): 7 + 0.5
    assert qs.service_s == 2 + 1 + 4 + 0.5
    assert qs.path_service(["m1"]) == 2.0
    assert qs.path_service(["a1"]) == 3.0
    assert qs.path_service(["b1"]) == 7.0
    assert qs.path_service(["a2", "m1"]) == 7.5
    assert qs.run.nodes["a2"].deps == ("a1", "b1")
    assert qs.last_instance == "a"


def test_stage_priors_learned_from_finished_programs_give_mean_residual_calls():
    core = make_core([live_spec("a", 8)])
    d = ScriptedDriver(core)
    qid = 10
    for n in (1, 2, 6):  # programs of 1, 2 and 6 "think" calls
        d.arrive(program_query(qid))
        for i in range(n):
            d.feed(QueryInput(d.t, qid, pcall(f"c{i}", n=100)))
            d.finish(d.sent[-1].call.id)
        d.feed(QueryClosed(d.t, qid))
        qid += 1
    d.arrive(program_query(qid))
    qs = core._queries[qid]
    [est] = qs.expected_remaining()
    assert (est.stage, est.input_tokens) == ("step", 100)
    assert est.count == (1 + 2 + 6) / 3  # E[N − 0 | N ≥ 0]
    d.feed(QueryInput(d.t, qid, pcall("c0")))
    d.feed(QueryInput(d.t, qid, pcall("c1")))
    [est] = qs.expected_remaining()
    assert est.count == ((2 - 2) + (6 - 2)) / 2  # E[N − 2 | N ≥ 2]


def test_a_programs_calls_stay_with_its_context_unless_load_says_otherwise():
    from flowserve.types.specs import InstanceSpec

    specs = [InstanceSpec(n, "A100-80G", "llama-3.1-8b", 1, max_inflight=2, backend="openai") for n in "ab"]
    core = make_core(specs, "flowserve", "flowserve", prefill_sharing=None)  # no waiting for another's prefill
    d = ScriptedDriver(core)
    context = tuple(range(1, 6001))  # a long, growing context

    def call(key: str, extra: int, own: int = 1) -> ProgramCall:  # the context, then `extra` tokens of its own
        return ProgramCall(key, (Toks(context + tuple(range(own * 10**6, own * 10**6 + extra))),), 8, "step")

    d.arrive(program_query(20))
    d.feed(QueryInput(0.0, 20, call("c1", 10)))
    home = d.sent[-1].instance
    d.finish(d.sent[-1].call.id)
    d.feed(QueryInput(d.t, 20, call("c2", 50)))
    assert d.sent[-1].instance == home  # its context is cached there
    d.finish(d.sent[-1].call.id)
    # many programs now want the same context at once, each with a long prompt of its own:
    # the prefills queued at home soon cost more than recomputing the context elsewhere
    for qid in range(21, 33):
        d.arrive(program_query(qid, t=d.t))
        d.feed(QueryInput(d.t, qid, call(f"p{qid}", 3000, own=qid)))
    assert d.sent[2].instance == home  # the first stays with the context
    held = {s.name: s.queued + s.running for s in core.instance_status()}
    away = next(n for n in held if n != home)
    assert held[home] > held[away] > 0  # most stay; the load sends some away
