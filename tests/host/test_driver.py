"""The live driver over the scheduler core, with simulated and scripted engines."""

from __future__ import annotations

import asyncio

import pytest
from live_support import MODEL, ScriptedBackend, ext_spec, run, scripted_driver, sim_spec, single

from flowserve.apps.single import SingleCall
from flowserve.engines.backend import EngineError
from flowserve.engines.simbackend import placeholder_text
from flowserve.host.backends import live_profile
from flowserve.host.driver import LiveDriver
from flowserve.host.query import Rejected
from flowserve.host.root import compose_driver
from flowserve.host.settings import GatewaySettings
from flowserve.types.work import WorkflowRef


def test_sim_instances_answer_single_calls_through_the_core() -> None:
    async def body() -> None:
        d = compose_driver([sim_spec("a"), sim_spec("b")], GatewaySettings(time_scale=100.0))
        await d.start()
        try:
            results = await asyncio.gather(*[d.run("completion", single(range(100 + i), max_tokens=5))
                                             for i in range(6)])
        finally:
            await d.shutdown()
        assert [r.status for r in results] == ["completed"] * 6
        for r in results:
            (call,) = r.calls
            assert call.output_tokens == 5
            assert len(call.text.split()) == 5 and set(call.text.split()) <= set(placeholder_text(0, 8).split())
            assert r.latency_s > 0
        # round robin (the default) alternates between the two instances
        assert sorted(r.calls[0].instance for r in results) == ["a"] * 3 + ["b"] * 3
        assert d.core.decisions == 6

    run(body())


def is_up(d: LiveDriver, name: str) -> bool:
    return next(s for s in d.core.instance_status() if s.name == name).up


def test_sim_engine_latency_follows_the_cost_model_scaled_in_time() -> None:
    """A 2000-token prompt with 50 output tokens: the driver's latency is at least the
    modelled time divided by the time scale (the engine cannot be faster than its model)."""
    async def body() -> None:
        d = compose_driver([sim_spec("a")], GatewaySettings(time_scale=20.0))
        await d.start()
        try:
            r = await d.run("completion", single(range(2000), max_tokens=50))
        finally:
            await d.shutdown()
        modelled = live_profile(sim_spec("a"), 20.0).cost.call_time(2000, 50)  # the core's model, scaled
        assert r.status == "completed"
        assert r.latency_s >= 0.95 * modelled

    run(body())


def test_prefix_affinity_keeps_a_shared_prefix_on_the_instance_that_caches_it() -> None:
    """Sequential calls sharing a 1000-token prefix: under prefix_affinity all land on one
    instance and hit its cache (the simulated engine reports real cached tokens); under
    round robin they alternate and each instance computes the prefix once."""
    async def served(policy: str) -> list[tuple[str, int]]:
        d = compose_driver([sim_spec("a"), sim_spec("b")], GatewaySettings(time_scale=200.0, dispatch=policy))
        await d.start()
        out = []
        try:
            for i in range(6):
                r = await d.run("completion", single([*range(1000), 50_000 + i], max_tokens=2))
                out.append((r.calls[0].instance, r.calls[0].cached_tokens))
        finally:
            await d.shutdown()
        return out

    affinity = run(served("prefix_affinity"))
    robin = run(served("round_robin"))
    assert len({inst for inst, _ in affinity}) == 1
    assert [c for _, c in affinity[1:]] == [1000] * 5
    assert {inst for inst, _ in robin} == {"a", "b"}
    assert sum(c for _, c in robin) < sum(c for _, c in affinity)


def test_retryable_errors_are_retried_on_the_same_instance() -> None:
    async def body() -> None:
        a = ScriptedBackend(ext_spec("a"))
        a.errors = [EngineError("engine error 503: busy", retryable=True, status=503)] * 2
        d = scripted_driver({"a": a}, retries=2, retry_backoff_s=0.0, breaker_failures=5)
        await d.start()
        try:
            r = await d.run("completion", single(range(10)))
        finally:
            await d.shutdown()
        assert r.status == "completed"
        assert a.started == 3
        assert d.metrics.retries.labels("a")._value.get() == 2

    run(body())


def test_failing_instance_trips_its_circuit_and_the_core_redispatches() -> None:
    async def body() -> None:
        a, b = ScriptedBackend(ext_spec("a")), ScriptedBackend(ext_spec("b"))
        a.always_fail = EngineError("connection refused", retryable=True)
        d = scripted_driver({"a": a, "b": b}, retries=1, retry_backoff_s=0.0, breaker_failures=2,
                            breaker_cooldown_s=0.01, breaker_max_cooldown_s=0.02)
        await d.start()  # a answers the first probe, then fails its calls
        a.healthy = False
        try:
            results = await asyncio.gather(*[d.run("completion", single(range(10 + i))) for i in range(4)])
            assert [r.status for r in results] == ["completed"] * 4
            assert {r.calls[0].instance for r in results} == {"b"}
            assert d.circuit_state("a") in ("open", "half_open")
            assert not is_up(d, "a")
            # the engine recovers: a half-open probe brings the instance back
            a.always_fail, a.healthy = None, True
            await d.until(lambda: is_up(d, "a"))
            assert d.circuit_state("a") == "closed"
            again = await asyncio.gather(*[d.run("completion", single(range(10 + i))) for i in range(4)])
            assert {r.calls[0].instance for r in again} == {"a", "b"}
        finally:
            await d.shutdown()
        assert d.metrics.trips.labels("a")._value.get() == 1

    run(body())


def test_non_retryable_error_fails_the_query_with_the_engines_reason() -> None:
    async def body() -> None:
        a = ScriptedBackend(ext_spec("a"))
        a.errors = [EngineError("engine error 400: bad grammar", retryable=False, status=400)]
        d = scripted_driver({"a": a})
        await d.start()
        try:
            r = await d.run("completion", single(range(10)))
        finally:
            await d.shutdown()
        assert r.status == "failed"
        assert "bad grammar" in (r.reason or "")
        assert a.started == 1

    run(body())


def test_every_instance_failing_ends_the_query_failed_not_lost() -> None:
    async def body() -> None:
        a, b = ScriptedBackend(ext_spec("a")), ScriptedBackend(ext_spec("b"))
        for x in (a, b):
            x.always_fail = EngineError("engine error 500: boom", retryable=True, status=500)
        d = scripted_driver({"a": a, "b": b}, retries=0, breaker_failures=100, redispatch_limit=3)
        await d.start()  # both answer the first probe, then fail every call
        try:
            r = await d.run("completion", single(range(10)))
        finally:
            await d.shutdown()
        assert r.status == "failed"
        assert "boom" in (r.reason or "") and "4 attempt" in (r.reason or "")

    run(body())


def test_admission_control_rejects_when_predicted_queueing_exceeds_the_bound() -> None:
    async def body() -> None:
        a = ScriptedBackend(ext_spec("a", max_inflight=1))
        a.gate = asyncio.Event()
        d = scripted_driver({"a": a}, max_queue_s=0.0)
        await d.start()
        try:
            first = await d.submit(d.new_query("completion", single(range(3000), max_tokens=64)))
            assert d.core.predicted_wait_s(MODEL) > 0  # the accepted call is outstanding work
            with pytest.raises(Rejected) as info:
                await d.submit(d.new_query("completion", single(range(10))))
            assert info.value.status == 429
            assert info.value.retry_after is not None and info.value.retry_after >= 1
            assert "exceeds the bound" in info.value.reason
            a.gate.set()
            assert (await first.done).status == "completed"
            # the queue drained: accepted again
            assert (await d.run("completion", single(range(10)))).status == "completed"
        finally:
            await d.shutdown()
        assert d.metrics.queries.labels("completion", "rejected")._value.get() == 1

    run(body())


def test_max_queries_bounds_the_open_queries() -> None:
    async def body() -> None:
        a = ScriptedBackend(ext_spec("a"))
        a.gate = asyncio.Event()
        d = scripted_driver({"a": a}, max_queries=2)
        await d.start()
        try:
            held = [await d.submit(d.new_query("completion", single(range(5)))) for _ in range(2)]
            with pytest.raises(Rejected) as info:
                await d.submit(d.new_query("completion", single(range(5))))
            assert info.value.status == 429
            a.gate.set()
            assert [(await h.done).status for h in held] == ["completed"] * 2
        finally:
            await d.shutdown()

    run(body())


def test_graceful_shutdown_drains_in_flight_queries_and_refuses_new_ones() -> None:
    async def body() -> None:
        a = ScriptedBackend(ext_spec("a"))
        a.gate = asyncio.Event()
        d = scripted_driver({"a": a})
        await d.start()
        held = [await d.submit(d.new_query("completion", single(range(5 + i)))) for i in range(3)]
        stopping = asyncio.create_task(d.shutdown(drain_timeout_s=30))
        await d.until(lambda: d.draining)
        with pytest.raises(Rejected) as info:
            await d.submit(d.new_query("completion", single(range(5))))
        assert info.value.status == 503
        assert not stopping.done()
        a.gate.set()
        await stopping
        assert [h.done.result().status for h in held] == ["completed"] * 3

    run(body())


def test_drain_timeout_fails_the_remaining_queries_with_a_reason() -> None:
    async def body() -> None:
        a = ScriptedBackend(ext_spec("a"))
        a.gate = asyncio.Event()  # never released
        d = scripted_driver({"a": a})
        await d.start()
        h = await d.submit(d.new_query("completion", single(range(5))))
        await d.shutdown(drain_timeout_s=0.05)
        r = h.done.result()
        assert r.status == "failed" and "drain timeout" in (r.reason or "")
        assert a.cancelled  # the engine request was aborted

    run(body())


def test_instances_added_and_removed_at_run_time() -> None:
    async def body() -> None:
        a, b = ScriptedBackend(ext_spec("a")), ScriptedBackend(ext_spec("b"))
        a.gate = asyncio.Event()
        backends = {"a": a}
        d = scripted_driver(backends)
        await d.start()
        try:
            held = await d.submit(d.new_query("completion", single(range(5))))
            await a.entered.wait()
            backends["b"] = b
            await d.add_instance(b.spec)
            await d.remove_instance("a")  # its running call moves to b
            r = await held.done
            assert r.status == "completed" and r.calls[0].instance == "b"
            assert a.cancelled == [a.calls[0].id]
            assert [i["name"] for i in d.instances()] == ["b"]
            with pytest.raises(KeyError):
                await d.remove_instance("a")
        finally:
            await d.shutdown()

    run(body())


def test_estimated_evictions_keep_the_prefix_index_bounded() -> None:
    """Real engines report no evictions: the driver's LRU estimate of each cache does, so
    the router's index holds about the cache size, not every prompt ever sent."""
    async def body() -> None:
        a = ScriptedBackend(ext_spec("a"))
        d = scripted_driver({"a": a}, dispatch="prefix_affinity", cache_tokens={"a": 1000})
        await d.start()
        try:
            for i in range(20):
                await d.run("completion", single([1_000_000 + i * 1000 + k for k in range(300)]))
            assert d.core.keeps_prefix_index
            await d.until(lambda: d.core.indexed_tokens <= 1000)
        finally:
            await d.shutdown()
        assert d.caches.estimates["a"].evicted_tokens >= 20 * 300 - 1000
        assert d.metrics.evicted.labels("a")._value.get() == d.caches.estimates["a"].evicted_tokens

    run(body())


def test_an_accepted_query_with_a_too_long_prompt_fails_with_the_reason() -> None:
    async def body() -> None:
        d = compose_driver([sim_spec("a")], GatewaySettings(time_scale=100.0))
        await d.start()
        try:
            r = await d.run("completion", single(range(200_000)))
        finally:
            await d.shutdown()
        assert r.status == "failed" and "exceeds the model's context" in (r.reason or "")

    run(body())


class _BrokenProgram(SingleCall):
    """A workflow with a bug: finishing its first call raises."""

    def __init__(self) -> None:
        super().__init__("completion", tuple(range(10)), 4, None)

    def on_done(self, g, key, result):
        raise RuntimeError("workflow bug")


def test_a_workflow_bug_fails_its_query_with_the_reason_and_serving_goes_on() -> None:
    async def body() -> None:
        d = compose_driver([sim_spec("a")], GatewaySettings(time_scale=100.0), workflows={"broken": _BrokenProgram})
        await d.start()
        try:
            broken = await d.run("completion", WorkflowRef("broken"))
            fine = await d.run("completion", single(range(10)))
        finally:
            await d.shutdown()
        assert broken.status == "failed" and "RuntimeError: workflow bug" in (broken.reason or "")
        assert fine.status == "completed"

    run(body())
