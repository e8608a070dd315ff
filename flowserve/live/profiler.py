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

Each configuration runs `repeats` times and contributes its median. The fit is
`fit_coefficients` (NNLS on relative error). Engine facts — slots, context, KV capacity —
come from llama-server's `/props` (KV capacity = per-slot context, right for
`--kv-unified`) or vLLM/SGLang's `/v1/models` (`max_model_len`), and can be overridden.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from flowserve.errors import FlowserveError
from flowserve.live.client import EngineClient
from flowserve.profiles.fitted import FittedCostModel, Sample, fit_coefficients, iteration_features, prefill_features


@dataclass(frozen=True)
class ProfileSettings:
    prefill_lengths: tuple[int, ...] = (16, 64, 256, 512, 1024, 2048, 3072)
    batch_sizes: tuple[int, ...] = (1, 2, 4)
    decode_contexts: tuple[int, ...] = (32, 1024, 2048)
    decode_tokens: int = 64
    cached_prefixes: tuple[int, ...] = (512, 2048)
    cached_suffix: int = 32
    repeats: int = 3
    token_budget: int = 2048  # llama-server's -b (n_batch); vLLM's max_num_batched_tokens
    seed: int = 0

    @classmethod
    def quick(cls, **overrides: Any) -> ProfileSettings:
        """A few seconds: enough points to fit, too few for a trustworthy profile."""
        return cls(**({"prefill_lengths": (16, 128, 512), "batch_sizes": (1, 2), "decode_contexts": (16, 256),
                        "decode_tokens": 24, "cached_prefixes": (256,), "repeats": 1} | overrides))


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
    cache_speedups: dict[int, float] = field(default_factory=dict)  # prefix length → cold / cached TTFT
    wall_s: float = 0.0

    def to_dict(self, model: FittedCostModel) -> dict[str, Any]:
        return {"profile": model.to_dict(), "cache_speedup": self.cache_speedups, "wall_s": self.wall_s,
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


async def _decode_step(client: EngineClient, prompts: Sequence[list[int]], tokens: int) -> float | None:
    """Decode step time at batch len(prompts): per request, the mean gap between its tokens
    streamed while every request decodes (after the last first token, before the first
    finish); the median over requests. Means over a window, not single gaps, because a
    busy client reads several chunks at once."""
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
        if len(inside) >= max(3, tokens // 4):
            rates.append((inside[-1] - inside[0]) / (len(inside) - 1))
    return statistics.median(rates) if rates else None


async def measure(client: EngineClient, facts: EngineFacts, settings: ProfileSettings,
                  progress: Callable[[str], None] = lambda _m: None) -> ProfileReport:
    report = ProfileReport(facts)
    prompts = _Prompts(facts.vocab_size, settings.seed)
    budget, cap = settings.token_budget, facts.max_context - settings.decode_tokens - 2
    await client.complete(prompts.fresh(8), 2, cache_prompt=False)  # warm-up, discarded
    cold: dict[int, float] = {}
    for n in sorted({min(n, cap) for n in settings.prefill_lengths}):
        progress(f"prefill {n} tokens")
        t = statistics.median([(await _ttft(client, prompts.fresh(n), False))[0] for _ in range(settings.repeats)])
        cold[n] = t
        report.samples.append(Sample("prefill", tuple(prefill_features(n, 0, budget)), t))
    for b in sorted({min(b, facts.slots) for b in settings.batch_sizes}):
        c_cap = min(cap, facts.kv_capacity_tokens // b - settings.decode_tokens - 2)  # b sequences share the KV
        for c in sorted({min(c, c_cap) for c in settings.decode_contexts}):
            progress(f"decode batch {b} context {c}")
            steps = [await _decode_step(client, [prompts.fresh(c) for _ in range(b)], settings.decode_tokens)
                     for _ in range(settings.repeats)]
            steps = [s for s in steps if s is not None]
            if steps:
                ctx = b * (c + settings.decode_tokens / 2)
                report.samples.append(Sample("decode", tuple(iteration_features(0, 0.0, b, ctx)),
                                             statistics.median(steps)))
    for p in sorted({min(p, cap - settings.cached_suffix) for p in settings.cached_prefixes}):
        progress(f"cached prefix {p} tokens")
        times, news, cached_ns = [], [], []
        for _ in range(settings.repeats):
            prefix = prompts.fresh(p)
            await client.complete(prefix + prompts.fresh(settings.cached_suffix), 1, cache_prompt=True)
            t, cached = await _ttft(client, prefix + prompts.fresh(settings.cached_suffix), True)
            cached = p if cached is None else cached
            times.append(t)
            cached_ns.append(cached)
            news.append(p + settings.cached_suffix - cached)
        i = int(np.argsort(times)[len(times) // 2])
        report.samples.append(Sample("cached_prefill", tuple(prefill_features(news[i], cached_ns[i], budget)),
                                     times[i]))
        total = p + settings.cached_suffix
        cold_t = cold.get(total) or float(np.interp(total, sorted(cold), [cold[k] for k in sorted(cold)]))
        report.cache_speedups[p] = cold_t / times[i]
    return report


async def profile_engine(client: EngineClient, model: str | None = None, settings: ProfileSettings | None = None,
                         facts: EngineFacts | None = None,
                         progress: Callable[[str], None] = lambda _m: None) -> tuple[FittedCostModel, ProfileReport]:
    """Measure, fit, and return the profile with its measurements."""
    settings = settings or ProfileSettings()
    t0 = time.monotonic()
    facts = facts or await engine_facts(client)
    report = await measure(client, facts, settings, progress)
    report.wall_s = time.monotonic() - t0
    coef, quality = fit_coefficients(report.samples)
    name = model or client.model or "model"
    fitted = FittedCostModel(name, coef, facts.max_context, facts.kv_capacity_tokens, facts.slots,
                             settings.token_budget, facts.device, quality)
    return fitted, report
