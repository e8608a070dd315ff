"""What the `flowserve` queue knows of programs: how many calls they make, learned online,
and the order that follows from it.

A program (a workflow that `learns_remaining`: its client decides each next call) has
a number of calls N nobody knows in advance. The queue learns N's distribution from the
programs it serves: those that ended give N exactly, those still running only that N is
at least the calls they issued — censored observations, which the Kaplan–Meier estimator
uses without the bias of counting only the finished ones (early on, only the short ones
have finished; `km_survival`).

From the survival S(k) = P(N > k), a program that issued k calls gets the Gittins index
of its next call (Gittins, "Bandit processes and dynamic allocation indices", JRSS B 1979;
for M/G/1 scheduling without job sizes: Scully, Harchol-Balter & Scheller-Wolf, SOAP,
2018): the best ratio, over horizons of m calls, of the chance to finish within them to
the calls expected to be spent (`gittins_index`). Serving the highest index first
minimises mean response time among the orders that do not know the sizes; it serves
programs near their likely end first when that end is near (an increasing hazard) and
new ones first under a heavy tail (a decreasing one). The queue divides it by the call's
predicted service to compare calls of different costs (a rate, per second).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from flowserve.core.state import QueryState

WINDOW = 1000  # ended programs remembered per workflow (as the stage priors: the estimate follows drift)


def km_survival(ended: Sequence[int], running: Sequence[int]) -> list[float]:
    """Kaplan–Meier S(k) = P(N > k) for k = 0..max observed, from programs that ended after
    N calls (events) and programs still running that issued k calls (censored: N ≥ k, so
    they count at risk of ending at 1..k−1, not at k, which is not decided yet)."""
    top = max(max(ended, default=0), max(running, default=0))
    events = [0] * (top + 2)
    for n in ended:
        events[n] += 1
    # at risk at j: ended with N ≥ j, running with k − 1 ≥ j
    leaving = [0] * (top + 2)  # leave the risk set after j
    for n in ended:
        leaving[n] += 1
    for k in running:
        if k >= 2:
            leaving[k - 1] += 1
    at_risk = len(ended) + sum(1 for k in running if k >= 2)
    s, out = 1.0, [1.0]
    for j in range(1, top + 1):
        if at_risk > 0:
            s *= 1.0 - events[j] / at_risk
        out.append(s)
        at_risk -= leaving[j]
    return out


def gittins_index(survival: Sequence[float], issued: int) -> float:
    """The Gittins index of a program that issued `issued` calls (its last one waits): with
    a = issued − 1 calls done, max over m ≥ 1 of P(N ≤ a + m | N > a) / E[min(N − a, m) | N > a]
    = (S(a) − S(a + m)) / Σ_{j<m} S(a + j) — the sup over Δ of J(a, Δ) in Aalto, Ayesta &
    Righter, "On the Gittins index in the M/G/1 queue" (Queueing Systems, 2009), counted in
    calls instead of seconds. Past what was observed S stays flat, so a
    program longer than any seen gets 0 (it goes last)."""
    a = issued - 1
    last = len(survival) - 1
    if a < 0 or a >= last or survival[a] <= 0.0:
        return 0.0
    best, spent = 0.0, 0.0
    for m in range(1, last - a + 1):
        spent += survival[a + m - 1]
        best = max(best, (survival[a] - survival[a + m]) / spent)
    return best


def issued_calls(qs: QueryState) -> int:
    return sum(qs.run.calls_by_stage.values())


class ProgramBook:
    """The programs a queue has served, per workflow: the learned survival of their call
    counts and the Gittins index it gives. Rebuilt when asked after `refresh_s` of time
    (ended programs are found then)."""

    __slots__ = ("_built", "_ended", "_index", "_live", "refresh_s")

    def __init__(self, refresh_s: float = 1.0) -> None:
        self.refresh_s = refresh_s
        self._live: dict[int, QueryState] = {}  # programs with a call here, not ended
        self._ended: dict[str, deque[int]] = {}  # workflow → call counts of the last ended programs
        self._index: dict[str, list[float]] = {}  # workflow → Gittins index by calls issued
        self._built = -float("inf")

    def saw(self, qs: QueryState) -> None:
        self._live[qs.id] = qs

    def index(self, qs: QueryState, now: float) -> float:
        """The Gittins index of the program's next call (0 until one of its workflow ended)."""
        if now - self._built >= self.refresh_s:
            self._rebuild(now)
        table = self._index.get(qs.query.workflow)
        issued = issued_calls(qs)
        return table[issued] if table is not None and issued < len(table) else 0.0

    def _rebuild(self, now: float) -> None:
        self._built = now
        running: dict[str, list[int]] = {}
        changed = False
        for qid, qs in list(self._live.items()):
            workflow = qs.query.workflow
            if qs.ended:
                del self._live[qid]
                n = issued_calls(qs)
                if not qs.failed:
                    self._ended.setdefault(workflow, deque(maxlen=WINDOW)).append(n)
                changed = True
            else:
                running.setdefault(workflow, []).append(issued_calls(qs))
        if not changed and self._index:
            return
        for workflow, ended in self._ended.items():
            s = km_survival(ended, running.get(workflow, ()))
            self._index[workflow] = [gittins_index(s, k) for k in range(len(s) + 1)]
