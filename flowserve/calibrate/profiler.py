"""Measure a real OpenAI-compatible engine and fit its cost model (`flowserve profile`).

    model, report = await profile_engine(EngineClient(url, model="m", engine="llamacpp"))
    model.save(Path("m.yaml"))      # a FittedCostModel the simulator accepts (`profile:`)

Three measurement families, every prompt made of fresh random token ids so nothing is
cached unless meant to be (llama-server also gets `cache_prompt: false`):

* prefill — time to first token of a streamed request (`max_tokens` 1) for prompt lengths
  up to the context; the sample's features sum the prefill chunks of `token_budget`.
* decode — `b` concurrent requests with `C`-token prompts generating `decode_tokens` each
  (`ignore_eos`); the step time is the median gap between streamed tokens while all `b`
  decode (after the last first token, before the first finish), at context ≈ C + N/2.
* cached prefill — a prompt whose first `P` tokens were just served (warm-up request),
  plus a fresh suffix; the engine-reported cached count gives the split, and the
  speed-up against the cold prefill of the same length is reported.
* mixed — time to first token of an `n`-token prompt sent while `d` requests decode:
  every iteration of its prefill also decodes their tokens (llama-server and vLLM batch
  both), the shape of calls that overlap another request, which neither pure family has.

Each configuration runs `repeats` times and contributes its median. With a time budget
(`settings.budget_s`) a probe first measures the engine's speed and the plan is cut to fit
(`profile_plan`); every measured point is reported through `progress` as it ends. The fit is
`fit_coefficients` (NNLS on relative error). Engine facts — slots, context, KV capacity —
come from llama-server's `/props` (KV capacity = per-slot context, right for
`--kv-unified`) or vLLM/SGLang's `/v1/models` (`max_model_len`), and can be overridden.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from flowserve.calibrate.profile_plan import EngineSpeed, ProfileSettings, fit_to_budget
from flowserve.engines.client import EngineClient
from flowserve.errors import FlowserveError
from flowserve.profiles.cost_model import prefill_attended
from flowserve.profiles.fitted import FittedCostModel, Sample, fit_coefficients, iteration_features, prefill_features
from flowserve.profiles.slot_config import SlotConfig

LLAMA_CPP_FA_TILE_Q = 64  # ggml-cpu: flash attention is tiled from this many query rows


@dataclass(frozen=True)
class EngineFacts:
    slots: int
    max_context: int
    kv_capacity_tokens: int
    vocab_size: int
    device: str


@dataclass
class ProfileReport:
    facts: EngineFacts
    samples: list[Sample] = field(default_factory=list)
    cache_speedups: dict[str, float] = field(default_factory=dict)  # "prefix+suffix" → cold / cached TTFT
    requests: list[tuple[int, int, int, float]] = field(default_factory=list)  # (input, output, cached, s)
    wall_s: float = 0.0

    def to_dict(self, model: FittedCostModel) -> dict[str, Any]:
        return {"profile": model.to_dict(), "cache_speedup": self.cache_speedups, "wall_s": self.wall_s,
                "requests": [{"input": n, "output": o, "cached": c, "seconds": t, "modelled": model.call_time(n, o, c)}
                             for n, o, c, t in self.requests],
                "samples": [{"kind": s.kind, "x": list(s.x), "seconds": s.seconds,
                             "predicted": float(np.dot(s.x, model.coefficients))} for s in self.samples]}


async def detect_engine(url: str) -> str:
    """"llamacpp" when the server answers llama-server's `/props`, else "openai"."""
    async with EngineClient(url, engine="llamacpp") as probe:
        try:
            props = await probe.props()
        except FlowserveError:
            return "openai"
    return "llamacpp" if isinstance(props, dict) and "total_slots" in props else "openai"


async def engine_facts(client: EngineClient, slots: int | None = None, max_context: int | None = None,
                       kv_capacity: int | None = None, vocab_size: int | None = None) -> EngineFacts:
    """What the engine says about itself; explicit arguments win."""
    meta: dict[str, Any] = {}
    models = await client.get_json("/v1/models")
    if models.get("data"):
        meta = models["data"][0].get("meta") or {}
        max_context = max_context or models["data"][0].get("max_model_len")
    device = client.engine
    if client.engine == "llamacpp":
        props = await client.props()
        slots = slots or int(props.get("total_slots", 1))
        max_context = max_context or int(props["default_generation_settings"]["n_ctx"])
        device = f"llama-server {props.get('build_info', '')}".strip()
    vocab_size = vocab_size or meta.get("n_vocab")
    if not (slots and max_context and vocab_size):
        missing = [n for n, v in (("slots", slots), ("max context", max_context), ("vocab size", vocab_size)) if not v]
        raise FlowserveError(f"the engine does not report its {', '.join(missing)}; pass them explicitly")
    return EngineFacts(int(slots), int(max_context), int(kv_capacity or max_context), int(vocab_size), device)


class _Prompts:
    def __init__(self, vocab: int, seed: int) -> None:
        self._rng = np.random.default_rng(seed)
        self._low = min(max(2, vocab // 10), vocab - 1)
        self._high = min(vocab, 32_000)

    def fresh(self, n: int) -> list[int]:
        return self._rng.integers(self._low, self._high, n).tolist()


async def _ttft(client: EngineClient, prompt: list[int], cache: bool) -> tuple[float, int | None]:
    res = await client.complete(prompt, 1, cache_prompt=cache)
    if res.ttft is None:
        raise FlowserveError("the engine streamed no token")
    return res.ttft, res.cached_tokens


async def _decode_step(client: EngineClient, prompts: Sequence[list[int]], tokens: int) -> float:
    """Decode step time at batch len(prompts), the median over requests of the mean gap
    between a request's streamed tokens while every request decodes (after the last first
    token, before the first finish: prefills of the others are excluded). A request with
    too few tokens in that window (a busy client reads chunks in bursts) counts its whole
    stream instead."""
    stamps: list[list[float]] = [[] for _ in prompts]

    def hook(i: int) -> Callable[[Any], None]:
        return lambda chunk: stamps[i].append(time.monotonic()) if chunk.get("choices") else None

    await asyncio.gather(*(client.complete(p, tokens, ignore_eos=True, cache_prompt=False, on_chunk=hook(i))
                           for i, p in enumerate(prompts)))
    start = max(s[0] for s in stamps)
    end = min(s[-1] for s in stamps)
    rates = []
    for s in stamps:
        inside = [t for t in s if start <= t <= end]
        span = inside if len(inside) >= max(3, tokens // 4) else s
        if len(span) >= 2 and span[-1] > span[0]:
            rates.append((span[-1] - span[0]) / (len(span) - 1))
    if not rates:
        raise FlowserveError(f"decode measurement at batch {len(prompts)} streamed no usable tokens")
    return statistics.median(rates)


async def _cached_prefill(client: EngineClient, prompts: _Prompts, prefix_len: int,
                          suffix: int) -> tuple[float, int, int]:
    """(TTFT, new tokens, cached tokens) of a prompt whose prefix was just served."""
    prefix = prompts.fresh(prefix_len)
    await client.complete(prefix + prompts.fresh(suffix), 1, cache_prompt=True)
    t, cached = await _ttft(client, prefix + prompts.fresh(suffix), True)
    cached = prefix_len if cached is None else cached
    return t, prefix_len + suffix - cached, cached


async def _whole_request(client: EngineClient, prompts: _Prompts, prefix_len: int, new: int,
                         out: int) -> tuple[int, int, int, float]:
    """(input, output, cached, seconds) of one request timed end to end by the caller."""
    prefix = prompts.fresh(prefix_len) if prefix_len > 0 else []
    if prefix:
        await client.complete(prefix + prompts.fresh(new), 1, cache_prompt=True)
    t0 = time.monotonic()
    res = await client.complete(prefix + prompts.fresh(new), out, ignore_eos=True, cache_prompt=True)
    seconds = time.monotonic() - t0
    cached = res.cached_tokens if res.cached_tokens is not None else prefix_len
    return prefix_len + new, out, cached, seconds


async def _mixed_prefill(client: EngineClient, prompts: _Prompts, decoders: int, context: int, new: int,
                         tokens: int) -> float:
    """TTFT of a fresh `new`-token prompt sent once `decoders` requests with `context`-token
    prompts all stream tokens; they are cancelled after it."""
    seen = [0] * decoders
    decoding = asyncio.Event()

    def hook(i: int) -> Callable[[Any], None]:
        def on_chunk(chunk: Any) -> None:
            if chunk.get("choices"):
                seen[i] += 1
                if min(seen) >= 2:
                    decoding.set()
        return on_chunk

    tasks = [asyncio.create_task(client.complete(prompts.fresh(context), tokens, ignore_eos=True, cache_prompt=False,
                                                 on_chunk=hook(i))) for i in range(decoders)]
    waiter = asyncio.create_task(decoding.wait())
    try:
        await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
        if not decoding.is_set():
            raise FlowserveError(f"mixed measurement: a decoder of {tokens} tokens ended before all "
                                 f"{decoders} were decoding")
        return (await _ttft(client, prompts.fresh(new), False))[0]
    finally:
        waiter.cancel()
        for task in tasks:
            task.cancel()
        await asyncio.gather(waiter, *tasks, return_exceptions=True)


def mixed_features(decoders: int, context: int, new: int, budget: int, narrow: int) -> np.ndarray:
    """Σ iteration features of a prefill whose every chunk also decodes `decoders` tokens
    at `context` each, plus half a decode step (the iteration in flight at arrival)."""
    total = 0.5 * iteration_features(0, 0.0, decoders, decoders * context)
    done = 0
    while done < new:
        n = min(budget, new - done)
        total = total + iteration_features(n, prefill_attended(n, done), decoders, decoders * context, narrow)
        done += n
    return total


async def probe_speed(client: EngineClient, facts: EngineFacts) -> EngineSpeed:
    """One cold 256-token prefill and 16 decode steps (after a discarded warm-up request):
    the speed the plan is sized with."""
    prompts = _Prompts(facts.vocab_size, seed=12345)
    await client.complete(prompts.fresh(8), 2, cache_prompt=False)  # warm-up, discarded
    n = min(256, facts.max_context - 32)
    ttft, _ = await _ttft(client, prompts.fresh(n), False)
    step = await _decode_step(client, [prompts.fresh(16)], 16)
    return EngineSpeed(ttft / n, step)


def request_overhead(model: FittedCostModel, requests: Sequence[tuple[int, int, int, float]]) -> float:
    """Median of (measured − modelled) whole-request latency, never negative: what each
    request costs its caller beyond the engine's iterations."""
    if not requests:
        return 0.0
    return max(0.0, statistics.median(s - model.call_time(n, out, cached) for n, out, cached, s in requests))


def narrow_prefill(client: EngineClient, settings: ProfileSettings) -> int:
    """Prefills narrower than this attend at the decode rate (see `flowserve.profiles.fitted`)."""
    if settings.narrow_prefill_tokens is not None:
        return settings.narrow_prefill_tokens
    return LLAMA_CPP_FA_TILE_Q if client.engine == "llamacpp" else 0


async def measure(client: EngineClient, facts: EngineFacts, settings: ProfileSettings,
                  progress: Callable[[str], None] = lambda _m: None) -> ProfileReport:
    """Every point once per round, `repeats` rounds: a burst of load on a shared machine
    then spoils one run of several points rather than every run of one point."""
    prompts = _Prompts(facts.vocab_size, settings.seed)
    budget, cap, n_out = settings.token_budget, facts.max_context - settings.decode_tokens - 2, settings.decode_tokens
    narrow = narrow_prefill(client, settings)
    lengths = sorted({min(n, cap) for n in settings.prefill_lengths})
    batches = [(b, c) for b in sorted({min(b, facts.slots) for b in settings.batch_sizes})
               for c in sorted({min(c, cap, facts.kv_capacity_tokens // b - n_out - 2)  # b sequences share the KV
                                for c in settings.decode_contexts})]
    prefixes = sorted({(min(p, cap - s), s) for p in settings.cached_prefixes for s in settings.cached_suffixes})
    cold: dict[int, list[float]] = {n: [] for n in lengths}
    steps: dict[tuple[int, int], list[float]] = {bc: [] for bc in batches}
    warm: dict[tuple[int, int], list[tuple[float, int, int]]] = {ps: [] for ps in prefixes}
    report_requests: list[tuple[int, int, int, float]] = []
    mixed = sorted({(min(d, facts.slots - 1), min(c, cap), min(n, cap)) for d, c, n in settings.mixed_shapes
                    if facts.slots > 1})
    mixed_t: dict[tuple[int, int, int], list[float]] = {m: [] for m in mixed}
    total = settings.repeats * (len(lengths) + len(batches) + len(prefixes) + len(mixed)
                                + len(settings.request_shapes))
    done = 0

    def point(what: str) -> None:
        nonlocal done
        done += 1
        progress(f"[{done}/{total}] {what}")

    for r in range(settings.repeats):
        rnd = f"round {r + 1}/{settings.repeats}"
        for n in lengths:
            cold[n].append((await _ttft(client, prompts.fresh(n), False))[0])
            point(f"{rnd}: prefill {n} tokens: {cold[n][-1]:.3f} s")
        for b, c in batches:
            steps[b, c].append(await _decode_step(client, [prompts.fresh(c) for _ in range(b)], n_out))
            point(f"{rnd}: decode, batch {b} at {c} tokens: {1e3 * steps[b, c][-1]:.1f} ms per step")
        for p, suffix in prefixes:
            warm[p, suffix].append(await _cached_prefill(client, prompts, p, suffix))
            point(f"{rnd}: {suffix} tokens after {p} cached: {warm[p, suffix][-1][0]:.3f} s")
        for d, c, n in mixed:
            mixed_t[d, c, n].append(await _mixed_prefill(client, prompts, d, c, n, 4 * n_out))
            point(f"{rnd}: prefill {n} tokens while {d} decode at {c}: {mixed_t[d, c, n][-1]:.3f} s")
        for p, new, out in settings.request_shapes:
            report_requests.append(await _whole_request(client, prompts, min(p, cap - new - out), new, out))
            point(f"{rnd}: whole request ({p} cached, {new} new, {out} out): {report_requests[-1][3]:.3f} s")

    report = ProfileReport(facts, requests=report_requests)
    cold_t = {n: statistics.median(ts) for n, ts in cold.items()}
    for n, t in cold_t.items():
        report.samples.append(Sample("prefill", tuple(prefill_features(n, 0, budget, narrow)), t))
    for (b, c), ts in steps.items():
        x = iteration_features(0, 0.0, b, b * (c + n_out / 2))
        report.samples.append(Sample("decode", tuple(x), statistics.median(ts)))
    for (d, c, n), ts in mixed_t.items():
        x = mixed_features(d, c + 4, n, budget, narrow)  # decoders are a few tokens in
        report.samples.append(Sample("mixed", tuple(x), statistics.median(ts)))
    for (p, suffix), runs in warm.items():
        t, new, cached = sorted(runs)[len(runs) // 2]  # the median run, with its own split
        report.samples.append(Sample("cached_prefill", tuple(prefill_features(new, cached, budget, narrow)), t))
        base = cold_t.get(p + suffix) or float(np.interp(p + suffix, lengths, [cold_t[n] for n in lengths]))
        report.cache_speedups[f"{p}+{suffix}"] = base / t
    return report


async def profile_engine(client: EngineClient, model: str | None = None, settings: ProfileSettings | None = None,
                         facts: EngineFacts | None = None,
                         progress: Callable[[str], None] = lambda _m: None,
                         slot_config: SlotConfig | None = None) -> tuple[FittedCostModel, ProfileReport]:
    """Measure, fit, and return the profile with its measurements. A llama-server profile
    carries its slot rules (`slot_config`, default: the server's defaults) so the
    simulator models its slot caches."""
    settings = settings or ProfileSettings()
    t0 = time.monotonic()
    facts = facts or await engine_facts(client)
    if settings.budget_s is None:
        await client.complete(_Prompts(facts.vocab_size, 1).fresh(8), 2, cache_prompt=False)  # warm-up, discarded
    else:
        speed = await probe_speed(client, facts)
        progress(f"probe: {1 / speed.prefill_s_per_token:.0f} prompt tokens/s, {1e3 * speed.decode_step_s:.1f} ms "
                 f"per decode step")
        settings, cut = fit_to_budget(settings, speed)
        if cut:
            progress(cut)
    report = replace(await measure(client, facts, settings, progress), wall_s=time.monotonic() - t0)
    coef, quality = fit_coefficients(report.samples)
    name = model or client.model or "model"
    fitted = FittedCostModel(name, coef, facts.max_context, facts.kv_capacity_tokens, facts.slots,
                             settings.token_budget, facts.device, quality, narrow_prefill(client, settings))
    slot_config = (slot_config or SlotConfig()) if client.engine == "llamacpp" else None
    fitted = replace(fitted, request_overhead_s=request_overhead(fitted, report.requests), slot_config=slot_config)
    return fitted, report
