"""Preble's five workloads (§3, Table 1) as segment-level prompt generators, and `mixed`.

Prompts are segment lists (`flowserve.graph.plan.Segment`): equal ids are equal tokens,
so the sharing structure Preble measured is explicit. Lengths are drawn log-normally
around Table 1's means and standard deviations:

| kind | prompt | output | shared | key portion | structure |
|---|---|---|---|---|---|
| tool_use | 1835 ± 742 | 43 ± 16 | 85% | 76% (tool instructions) | system → tool (Zipf) → question |
| embodied_agent | 2285 ± 471 | 16 ± 13 | 97% | 76% (task-type demos) | demos → task → step 1 → … (chain) |
| programming | 3871 ± 1656 | 190 ± 343 | 97% | 78% (examples) | examples → problem, 8 parallel samples |
| video_qa | 9865 ± 5976 | 4 ± 1.5 | 88% | 99% (video) | video → question, 8.6 questions a video |
| long_doc_qa | 23474 ± 6105 | 16 ± 9.9 | 91% | 99% (document) | document → question, ~11 a document |

"Shared" is the fraction of a prompt's tokens that prefix-match an earlier prompt (the
hit rate of an unbounded cache, per prompt, averaged); `sharing_stats` measures it.
Questions about videos and documents arrive interleaved over `active` open videos or
documents at a time, each replaced when its questions are used up (users keep asking
about what they are looking at). `max_prompt` truncates the long unique prefixes to fit
a model's context (Llama-3-70B: 8k).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from flowserve.cache.radix import RadixTree
from flowserve.graph.plan import CallStep, Materializer, QueryPlan, Segment
from flowserve.workloads.arrivals import arrival_times
from flowserve.workloads.base import QuerySpec, SegmentIds, Workload

KINDS = ("tool_use", "embodied_agent", "programming", "video_qa", "long_doc_qa")
# Table 1 targets, used by the tests and `sharing_stats` reports.
TARGETS: dict[str, dict[str, float]] = {
    "tool_use": {"prompt": 1835, "output": 43, "shared": 0.85, "key": 0.76},
    "embodied_agent": {"prompt": 2285, "output": 16, "shared": 0.97, "key": 0.76},
    "programming": {"prompt": 3871, "output": 190, "shared": 0.97, "key": 0.78},
    "video_qa": {"prompt": 9865, "output": 4, "shared": 0.88, "key": 0.99},
    "long_doc_qa": {"prompt": 23474, "output": 16, "shared": 0.91, "key": 0.99},
}


def lognormal(rng: np.random.Generator, mean: float, sd: float, low: int = 1,
              high: int | None = None) -> int:
    """A log-normal integer with the given mean and standard deviation, clipped."""
    s2 = math.log(1 + (sd / mean) ** 2)
    x = round(float(rng.lognormal(math.log(mean) - s2 / 2, math.sqrt(s2))))
    return max(low, x if high is None else min(high, x))


@dataclass(frozen=True)
class Shape:
    """Knobs shared by the generators (the Table 1 shape of each kind is its defaults)."""

    max_prompt: int | None = None  # truncate unique prefixes to fit the model's context
    active: int = 8  # open videos / documents questions are drawn from


Plan = Callable[[np.random.Generator, SegmentIds, Shape], Sequence[QueryPlan]]


def _fit(length: int, rest: int, shape: Shape) -> int:
    """Shorten a long segment so that segment + rest fits `max_prompt`."""
    if shape.max_prompt is None:
        return length
    return max(1, min(length, shape.max_prompt - rest))


# --------------------------------------------------------------------------- generators


def tool_use(rng: np.random.Generator, ids: SegmentIds, shape: Shape, n: int, tools: int = 100,
             zipf: float = 1.1) -> list[QueryPlan]:
    """ToolBench-like: system prompt, then the instructions of one tool (Zipf popularity),
    then the user's question."""
    system = Segment(ids.shared("tool/system"), 165)
    weights = 1.0 / np.arange(1, tools + 1) ** zipf
    weights /= weights.sum()
    raw = np.array([lognormal(rng, 1420, 800, low=100) for _ in range(tools)], dtype=float)
    # a few popular tools carry most requests: scale so the request-weighted mean is Table 1's
    lengths = [max(100, round(x)) for x in raw * 1420 / float(weights @ raw)]
    picks = rng.choice(tools, size=n, p=weights)
    plans = []
    for k in picks:
        question = lognormal(rng, 250, 100, low=20)
        tool = Segment(ids.shared(f"tool/{k}"), _fit(lengths[k], system.length + question, shape))
        prompt = (system, tool, Segment(ids.unique(), question))
        plans.append(QueryPlan("tool_use", ((CallStep("tool_call", prompt, lognormal(rng, 43, 16)),),),
                               {"tool": int(k)}))
    return plans


def embodied_agent(rng: np.random.Generator, ids: SegmentIds, shape: Shape, n: int,
                   task_types: int = 6) -> list[QueryPlan]:
    """ALFWorld-like episodes: each step's prompt is the previous one plus the last action
    and observation (chained growth), after demonstrations shared per task type."""
    demos = [Segment(ids.shared(f"agent/demo{t}"), lognormal(rng, 1700, 150)) for t in range(task_types)]
    plans = []
    for _ in range(n):
        t = int(rng.integers(task_types))
        prompt: tuple[Segment, ...] = (demos[t], Segment(ids.unique(), lognormal(rng, 60, 20, low=10)))
        steps = []
        for _ in range(int(rng.integers(8, 31))):
            step = Segment(ids.unique(), lognormal(rng, 45, 20, low=5))
            if shape.max_prompt is not None and sum(s.length for s in prompt) + step.length > shape.max_prompt:
                break
            prompt = (*prompt, step)
            steps.append((CallStep("act", prompt, lognormal(rng, 16, 13)),))
        plans.append(QueryPlan("embodied_agent", tuple(steps), {"task_type": t}))
    return plans


def programming(rng: np.random.Generator, ids: SegmentIds, shape: Shape, n: int,
                samples: int = 8) -> list[QueryPlan]:
    """APPS-like: shared code examples, then the problem; `samples` parallel samples."""
    system = Segment(ids.shared("code/examples"), 2600)
    plans = []
    for _ in range(n):
        problem = Segment(ids.unique(), _fit(lognormal(rng, 1270, 1656, low=50), system.length, shape))
        prompt = (system, problem)
        step = tuple(CallStep("sample", prompt, lognormal(rng, 190, 343)) for _ in range(samples))
        plans.append(QueryPlan("programming", (step,)))
    return plans


def _questions(rng: np.random.Generator, ids: SegmentIds, shape: Shape, n: int, workflow: str,
               prefix_mean: float, prefix_sd: float, per_prefix: float, question: tuple[float, float],
               output: tuple[float, float]) -> list[QueryPlan]:
    """Questions about long unique prefixes (videos, documents), `active` open at a time."""

    def new_prefix() -> list[Any]:
        q_len = [lognormal(rng, *question, low=5) for _ in range(1 + int(rng.poisson(per_prefix - 1)))]
        length = _fit(lognormal(rng, prefix_mean, prefix_sd, low=500), max(q_len), shape)
        return [Segment(ids.unique(), length), q_len]

    open_ = [new_prefix() for _ in range(shape.active)]
    plans = []
    for _ in range(n):
        slot = int(rng.integers(len(open_)))
        prefix, q_len = open_[slot]
        prompt = (prefix, Segment(ids.unique(), q_len.pop()))
        plans.append(QueryPlan(workflow, ((CallStep("answer", prompt, lognormal(rng, *output)),),),
                               {"prefix": prefix.id}))
        if not q_len:
            open_[slot] = new_prefix()
    return plans


def video_qa(rng: np.random.Generator, ids: SegmentIds, shape: Shape, n: int) -> list[QueryPlan]:
    """NExT-QA-like: a long tokenised video, several short multiple-choice questions."""
    return _questions(rng, ids, shape, n, "video_qa", 9865, 5976, 8.6, (70, 25), (4, 1.5))


def long_doc_qa(rng: np.random.Generator, ids: SegmentIds, shape: Shape, n: int) -> list[QueryPlan]:
    """LooGLE-like: a long document, many questions about it."""
    return _questions(rng, ids, shape, n, "long_doc_qa", 23474, 6105, 11, (90, 40), (16, 9.9))


GENERATORS: dict[str, Callable[..., list[QueryPlan]]] = {
    "tool_use": tool_use, "embodied_agent": embodied_agent, "programming": programming,
    "video_qa": video_qa, "long_doc_qa": long_doc_qa,
}


def bursty_times(rng: np.random.Generator, n: int, rate: float, burst_factor: float = 4.0,
                 burst_share: float = 0.2, cycle_s: float = 60.0) -> np.ndarray:
    """Azure-like bursty arrivals (Preble §3.6, Fig. 5 shows the Azure LLM trace's
    bursts): a two-state Markov-modulated Poisson process whose burst state, a
    `burst_share` of the time (mean sojourn burst_share·cycle_s), runs at `burst_factor`×
    the calm rate, with the overall mean `rate`."""
    calm = rate / (1 - burst_share + burst_share * burst_factor)
    stay = (cycle_s * (1 - burst_share), cycle_s * burst_share)
    times, t, state = [], 0.0, 0
    end = t + rng.exponential(stay[state])
    while len(times) < n:
        r = calm * (burst_factor if state else 1.0)
        t += rng.exponential(1.0 / r)
        if t > end:  # memoryless: restart the gap at the switch
            t, state = end, 1 - state
            end = t + rng.exponential(stay[state])
            continue
        times.append(t)
    return np.asarray(times)


def build(kind: str, n: int, rate: float, seed: int, arrival: str = "poisson", cv: float | None = None,
          shape: Shape | None = None, ids: SegmentIds | None = None, **params: Any) -> Workload:
    rng = np.random.default_rng(seed)
    plans = GENERATORS[kind](rng, ids or SegmentIds(), shape or Shape(), n, **params)
    times = (bursty_times(rng, n, rate) if arrival == "azure"
             else arrival_times(rng, n, rate, arrival, cv))
    queries = tuple(QuerySpec(i, float(t), p) for i, (t, p) in enumerate(zip(times, plans, strict=True)))
    return Workload(kind, queries, output_priors=_priors(kind))


def _priors(kind: str) -> dict[tuple[str, str], float]:
    stage = {"tool_use": "tool_call", "embodied_agent": "act", "programming": "sample",
             "video_qa": "answer", "long_doc_qa": "answer"}[kind]
    return {(kind, stage): TARGETS[kind]["output"]}


def mix(name: str, parts: Sequence[Workload]) -> Workload:
    """Interleave workloads by arrival time (their segment ids must not collide)."""
    merged = sorted((q for w in parts for q in w.queries), key=lambda q: q.arrival)
    queries = tuple(QuerySpec(i, q.arrival, q.plan, q.tenant, q.priority) for i, q in enumerate(merged))
    priors: dict[tuple[str, str], float] = {}
    for w in parts:
        priors.update(w.output_priors)
    return Workload(name, queries, output_priors=priors)


# --------------------------------------------------------------------------- statistics


def sharing_stats(workload: Workload) -> dict[str, float]:
    """Table 1's columns measured on a workload: mean/sd prompt and output tokens, the
    mean shared fraction (prefix matched by an earlier prompt) and key-portion fraction
    (the deepest node of the prompt's path in the tree of all prompts whose tokens exceed
    all its ancestors'), and prompt:output."""
    mat = Materializer()
    calls = [(mat.prompt(c.prompt), c.output_tokens)
             for q in sorted(workload.queries, key=lambda q: q.arrival) for c in q.plan.calls()]
    seen = RadixTree()
    shared = []
    for tokens, _ in calls:
        shared.append(seen.match_length(tokens) / len(tokens))
        seen.insert(tokens, 0.0)
    key = []
    for tokens, _ in calls:
        node = seen.match(tokens, 0.0)
        lengths = []
        while node is not seen.root:
            lengths.append(len(node.key))
            node = node.parent
        lengths.reverse()
        best, before = 0, 0
        for n in lengths:
            if n > before:
                best = n
            before += n
        key.append(best / len(tokens))
    prompts = np.array([len(t) for t, _ in calls], dtype=float)
    outputs = np.array([o for _, o in calls], dtype=float)
    return {"requests": len(calls), "prompt_mean": float(prompts.mean()), "prompt_sd": float(prompts.std()),
            "output_mean": float(outputs.mean()), "output_sd": float(outputs.std()),
            "shared": float(np.mean(shared)), "key_portion": float(np.mean(key)),
            "prompt_output_ratio": float(prompts.mean() / outputs.mean())}
