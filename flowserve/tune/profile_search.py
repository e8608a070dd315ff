"""`flowserve tune`: a scoring profile's weights and parameters searched in the simulator on a
user's own trace (or a workload), judged on the half of it the search never saw.

1. The trace is split by arrival time (`flowserve.tune.splits`): the first half's earlier
   part is simulated by the search, its later part validates the winner, the second half
   is held out.
2. Optuna's TPE sampler (seeded) draws the knobs of `flowserve.tune.space`; the first
   trial is the profile as given. `budget` simulations, `jobs` at a time in worker
   processes, each stopped early by the median pruner (`flowserve.tune.trials`). Trials
   run in rounds of `jobs` and are told in order, so one seed and one `jobs` give one
   result whatever the machine's timing.
3. The best trials of the search (`FINALISTS`) and the default run on the validation
   part; the best there is kept only if it beats the default by `min_gain`, else the
   default is kept and the report says so.
4. The default, the kept profile and any peers run on the held-out half: the report.
"""

from __future__ import annotations

import math
import multiprocessing as mp
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from flowserve.errors import ConfigError
from flowserve.policies.scoring.profile import ProfileSpec
from flowserve.sim.run import PolicySpec
from flowserve.tune.space import Knob, defaults, profile_with, search_space, suggest, with_scorers
from flowserve.tune.splits import split_by_arrival
from flowserve.tune.trials import Metric, Pruning, SearchJob, Task, TrialOutcome, prepare, run_task
from flowserve.types.specs import InstanceSpec
from flowserve.workloads.base import Workload

FINALISTS = 3  # the search's best trials validated against the default
MAX_BUDGET = 10_000


@dataclass(frozen=True)
class TuneRequest:
    workload: Workload
    cluster: tuple[InstanceSpec, ...]
    profile: ProfileSpec
    budget: int = 40
    seed: int = 0
    jobs: int = 2
    queue: str = "flowserve"
    metric: Metric = "mean"
    slo_scale: float | None = None
    scorers: tuple[str, ...] = ()  # scorers the search may add (at weight 0 in the default)
    knobs: tuple[str, ...] = ()  # the knobs to search (default: all of the profile's)
    min_gain: float = 0.01  # the tuned profile must beat the default on validation by this share
    peers: Mapping[str, PolicySpec] = field(default_factory=dict)  # run on the held-out half for comparison

    def check(self) -> None:
        if not 1 <= self.budget <= MAX_BUDGET:
            raise ConfigError(f"--budget: expected 1 to {MAX_BUDGET:,} simulations, got {self.budget}")
        if not 1 <= self.jobs <= 64:
            raise ConfigError(f"--jobs: expected 1 to 64 processes, got {self.jobs}")
        if self.slo_scale is not None and not (math.isfinite(self.slo_scale) and self.slo_scale > 0):
            raise ConfigError(f"--slo-scale: expected a positive number, got {self.slo_scale}")
        if not 0 <= self.min_gain < 1:
            raise ConfigError(f"--min-gain: expected a share in [0, 1), got {self.min_gain}")


@dataclass(frozen=True)
class TuneReport:
    profile: ProfileSpec  # what to serve: the tuned profile, or the default when the guard kept it
    tuned: bool  # the tuned profile passed the validation guard
    metric: Metric
    default_test: float  # the held-out half's metric, default profile
    tuned_test: float  # ... the profile kept
    default_validation: float
    best_validation: float  # the best finalist's
    values: dict[str, Any]  # the kept knob values
    trials: int
    pruned: int
    simulations: int
    splits: dict[str, int]  # queries per part
    peers_test: dict[str, float] = field(default_factory=dict)

    @property
    def gain(self) -> float:
        """default ÷ tuned metric on the held-out half (> 1: the tuned profile is better)."""
        return self.default_test / self.tuned_test if self.tuned_test > 0 else 1.0

    def describe(self) -> dict[str, Any]:
        return {"profile": self.profile.describe(), "tuned": self.tuned, "metric": self.metric,
                "default_test": self.default_test, "tuned_test": self.tuned_test, "gain": self.gain,
                "default_validation": self.default_validation, "best_validation": self.best_validation,
                "values": self.values, "trials": self.trials, "pruned": self.pruned,
                "simulations": self.simulations, "splits": self.splits, "peers_test": self.peers_test}


_JOB: SearchJob | None = None  # a worker's job, inherited when it forks


def _work(task: Task) -> TrialOutcome:
    assert _JOB is not None
    return run_task(_JOB, task)


class Runner:
    """Runs tasks in order, in `jobs` forked processes (in this one when jobs is 1)."""

    def __init__(self, job: SearchJob, jobs: int) -> None:
        global _JOB
        _JOB = job
        self.job = job
        self.simulations = 0
        self._pool = (ProcessPoolExecutor(jobs, mp_context=mp.get_context("fork")) if jobs > 1 else None)

    def run(self, tasks: Sequence[Task]) -> list[TrialOutcome]:
        self.simulations += len(tasks)
        if self._pool is None:
            return [run_task(self.job, t) for t in tasks]
        return list(self._pool.map(_work, tasks))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)


def _dispatch(spec: ProfileSpec, queue: str) -> PolicySpec:
    return PolicySpec(spec.describe(), queue)


def search(req: TuneRequest, runner: Runner, spec: ProfileSpec, knobs: Sequence[Knob],
           progress: Callable[[str], None]) -> tuple[list[tuple[float, dict[str, Any]]], int]:
    """The study: (fit metric, knob values) of every trial that ran, and how many were pruned."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    pruning = Pruning()
    study = optuna.create_study(
        direction="minimize", sampler=optuna.samplers.TPESampler(seed=req.seed, n_startup_trials=min(10, req.budget)),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=pruning.startup_trials,
                                           n_warmup_steps=pruning.warmup_steps))
    study.enqueue_trial(defaults(knobs))
    ran: list[tuple[float, dict[str, Any]]] = []
    pruned = asked = 0
    best = math.inf
    while asked < req.budget:
        history = tuple(t for t in study.get_trials(deepcopy=False) if t.state.is_finished())
        batch = []
        for _ in range(min(req.jobs, req.budget - asked)):
            trial = study.ask()
            values = suggest(trial, knobs)
            asked += 1
            try:
                policy = _dispatch(profile_with(spec, values), req.queue)
            except ConfigError as e:  # a value a part refuses: this trial fails alone
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
                progress(f"trial {asked}/{req.budget}: refused ({e})")
                continue
            batch.append((trial, values, Task("fit", policy, Pruning(history))))
        for (trial, values, _), out in zip(batch, runner.run([t for _, _, t in batch]), strict=True):
            for step, value in out.reports:
                trial.report(value, step)
            n = trial.number + 1
            if out.error is not None:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
                progress(f"trial {n}/{req.budget}: refused ({out.error})")
            elif out.pruned:
                pruned += 1
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                progress(f"trial {n}/{req.budget}: pruned at {len(out.reports)}0% of the queries "
                         f"({req.metric} {out.value:.3f} s so far)")
            else:
                study.tell(trial, out.value)
                ran.append((out.value, values))
                best = min(best, out.value)
                progress(f"trial {n}/{req.budget}: {req.metric} {out.value:.3f} s (best {best:.3f} s)"
                         + (" — the profile as given" if trial.number == 0 else ""))
    return ran, pruned


def chosen(knobs: Sequence[Knob], names: Sequence[str]) -> list[Knob]:
    """The knobs named (all when none is), ConfigError naming an unknown one and the known."""
    if not names:
        return list(knobs)
    by_key = {k.key: k for k in knobs}
    unknown = [n for n in names if n not in by_key]
    if unknown:
        raise ConfigError(f"--knob: the profile has no knob {unknown[0]!r}; its knobs: {', '.join(by_key)}")
    return [by_key[n] for n in dict.fromkeys(names)]


def tune_profile(req: TuneRequest, progress: Callable[[str], None] = lambda _: None) -> TuneReport:
    req.check()
    spec = with_scorers(req.profile, req.scorers)
    knobs = chosen(search_space(spec), req.knobs)
    splits = split_by_arrival(req.workload)
    job = SearchJob(req.cluster, prepare(splits, req.cluster, req.slo_scale), req.metric)
    counts = {name: len(part.workload.queries) for name, part in job.parts.items()}
    progress(f"{req.workload.name}: {counts['fit']} queries to search on, {counts['validation']} to validate on, "
             f"{counts['test']} held out; {len(knobs)} knobs, {req.budget} simulations, {req.jobs} at a time")
    runner = Runner(job, req.jobs)
    try:
        ran, pruned = search(req, runner, spec, knobs, progress)
        default_values = defaults(knobs)
        finalists = [v for _, v in sorted(ran, key=lambda r: r[0]) if v != default_values][:FINALISTS]
        val = runner.run([Task("validation", _dispatch(req.profile, req.queue)),
                          *(Task("validation", _dispatch(profile_with(spec, v), req.queue)) for v in finalists)])
        default_val = val[0].value
        best_k = min(range(len(finalists)), key=lambda k: val[k + 1].value, default=None)
        best_val = val[best_k + 1].value if best_k is not None else math.inf
        tuned = best_k is not None and best_val < default_val * (1 - req.min_gain)
        values = finalists[best_k] if tuned and best_k is not None else default_values
        kept = profile_with(spec, values, f"{req.profile.name}-tuned") if tuned else req.profile
        progress(f"validation: default {default_val:.3f} s, best tuned {best_val:.3f} s → "
                 + ("the tuned profile" if tuned else "the default is kept (the tuned profile does not beat it by "
                                                      f"{req.min_gain:.0%})"))
        policies = {"default": _dispatch(req.profile, req.queue)}
        if tuned:
            policies["tuned"] = _dispatch(kept, req.queue)
        policies.update(req.peers)
        test = dict(zip(policies, runner.run([Task("test", p) for p in policies.values()]), strict=True))
    finally:
        runner.close()
    default_test = test["default"].value
    return TuneReport(kept, tuned, req.metric, default_test, test["tuned"].value if tuned else default_test,
                      default_val, best_val, values, req.budget, pruned, runner.simulations, counts,
                      {k: test[k].value for k in req.peers})

