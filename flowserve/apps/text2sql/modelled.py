"""The agent in the simulator: the same `ChessAgent` workflow, with an oracle that models
what only a live run knows — each stage's output length, which SQL executions fail, how
long tools take (`graph/oracle.py`).

Output lengths are log-normal around per-stage means: by default this agent's own
prompts' (short answers: SQL only, not CHESS's chain of thought), or the means of a
recorded live run (`ModelledRun.from_trace`), which is how a live run calibrates its
simulation. Draws are keyed by (seed, query, node key), so a run is reproducible and
independent of event order.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from flowserve.apps.text2sql.agent import CAND, CTX, ENT, EVAL, EXEC, GUT, KW, REVISE, SEL, AgentConfig, ChessAgent
from flowserve.apps.text2sql.catalog import Catalog
from flowserve.graph.oracle import ToolOutcome
from flowserve.sim.simulator import SimResult
from flowserve.types.specs import InstanceSpec
from flowserve.workloads.agent_trace import output_means, read_agent_trace
from flowserve.workloads.arrivals import arrival_times
from flowserve.workloads.base import AppQuery, QuerySpec, Workload

# Assumed output means (tokens) of this agent's stages with a capable model: keyword
# lists, table lists, bare SQL, numbered tests, one verdict line per candidate.
DEFAULT_OUTPUTS = {KW: 30.0, SEL: 12.0, CAND: 90.0, REVISE: 90.0, GUT: 60.0, EVAL: 16.0}


def stage_of_key(key: str) -> str:
    """The stage of a `ChessAgent` node key."""
    if key == "keywords":
        return KW
    if key in ("entities", "context"):
        return ENT if key == "entities" else CTX
    if key == "schema":
        return SEL
    if key == "unit_tests":
        return GUT
    if key.startswith("eval"):
        return EVAL
    if key.endswith(".exec"):
        return EXEC
    return REVISE if ".rev" in key else CAND


@dataclass(frozen=True)
class ModelledRun:
    outputs: Mapping[str, float] = field(default_factory=lambda: dict(DEFAULT_OUTPUTS))
    output_sd_log: float = 0.4
    exec_error_prob: float = 0.3  # an execution fails (then the candidate is revised)
    exec_s: float = 0.05
    retrieval_s: float = 0.02
    tool_tokens: Mapping[str, int] = field(default_factory=lambda: {ENT: 40, CTX: 120, EXEC: 40})

    def __post_init__(self) -> None:
        assert 0.0 <= self.exec_error_prob <= 1.0 and self.exec_s >= 0 and self.retrieval_s >= 0, self
        assert all(v > 0 for v in self.outputs.values()), self.outputs

    @classmethod
    def from_trace(cls, file: str, **kw: object) -> ModelledRun:
        """Per-stage output means of a recorded run (stages it lacks keep the defaults)."""
        means = output_means(read_agent_trace(file))
        return cls(outputs={**DEFAULT_OUTPUTS, **{s: max(m, 1.0) for s, m in means.items()}}, **kw)  # type: ignore[arg-type]


class AgentOracle:
    def __init__(self, run: ModelledRun, seed: int, query_id: int) -> None:
        self.run, self.seed, self.query_id = run, seed, query_id

    def _rng(self, key: str) -> np.random.Generator:
        return np.random.default_rng([self.seed, self.query_id, zlib.crc32(key.encode())])

    def output_tokens(self, key: str) -> int | None:
        mean = self.run.outputs.get(stage_of_key(key))
        if mean is None:
            return None
        sd = self.run.output_sd_log
        return max(1, round(float(self._rng(key).lognormal(math.log(mean) - sd * sd / 2, sd))))

    def marks(self, key: str) -> tuple[int, ...]:
        return ()  # the agent's outputs are not split

    def tool(self, key: str) -> ToolOutcome | None:
        stage = stage_of_key(key)
        tokens = self.run.tool_tokens.get(stage, 0)
        if stage == EXEC:
            fails = bool(self._rng(key).random() < self.run.exec_error_prob)
            return ToolOutcome(self.run.exec_s, "modelled SQL error" if fails else None, output_tokens=tokens)
        if stage in (ENT, CTX):
            return ToolOutcome(self.run.retrieval_s, output_tokens=tokens)
        return None


def agent_workload(questions: Sequence[str], database: str, catalog: Catalog, config: AgentConfig,
                   run: ModelledRun, rate: float, seed: int = 0, model: str | None = None) -> Workload:
    """One simulated query per question, Poisson arrivals at `rate`: each an `AppQuery`
    (a fresh `ChessAgent` per run, its own oracle)."""
    assert questions, "no questions"
    times = arrival_times(np.random.default_rng(seed), len(questions), rate)

    def make(q: str) -> Callable[[], ChessAgent]:
        return lambda: ChessAgent(q, database, catalog, config, model)

    specs = tuple(QuerySpec(i, float(t), AppQuery(ChessAgent.name, make(q), AgentOracle(run, seed, i),
                                                  expected_calls=4 + 2 * config.candidates))
                  for i, (q, t) in enumerate(zip(questions, times, strict=True)))
    priors = {(ChessAgent.name, s): m for s, m in run.outputs.items()}
    return Workload(f"text2sql-agent:{database}", specs, output_priors=priors)


def simulate_agent(cluster: Sequence[InstanceSpec], workload: Workload, dispatch: str = "round_robin",
                   queue: str = "fcfs") -> SimResult:
    from flowserve.sim.run import PolicySpec, simulate

    return simulate(cluster, workload, PolicySpec(dispatch, queue))
