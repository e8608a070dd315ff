"""`queue_depth`: each instance's waiting queue against the others' (llm-d/GIE's
queue-scorer).

    score_i = (max − q_i) / (max − min)        ∈ [0, 1]; 1 for all when every queue is as long

q_i: the calls waiting in i's queue (not yet released to its engine); min and max over
the candidates.
"""

from __future__ import annotations

from flowserve.policies.scoring.plugin import Decision, Scorer


def queue_score(queue: int, min_queue: int, max_queue: int) -> float:
    """llm-d/GIE queue-scorer: (max − q) / (max − min), 1 when every queue is equally long."""
    if max_queue == min_queue:
        return 1.0
    return (max_queue - queue) / (max_queue - min_queue)


class QueueDepth(Scorer):
    name = "queue_depth"

    def score(self, d: Decision) -> list[float]:
        queues = [len(i.queue) for i in d.candidates]
        lo, hi = min(queues), max(queues)
        return [queue_score(q, lo, hi) for q in queues]
