"""`affinity`: the instance that ran the query's (session's, program's) previous call
(llm-d's session-affinity-scorer; Autellix's data locality).

    score_i = 1 if i ran the query's last call, else 0

A program's or a chat's growing context is cached where its last call ran; this scores
that instance without asking the prefix index.
"""

from __future__ import annotations

from flowserve.policies.scoring.plugin import Decision, Scorer


class SessionAffinity(Scorer):
    name = "affinity"

    def score(self, d: Decision) -> list[float]:
        last = d.call.query.last_instance
        return [1.0 if i.name == last else 0.0 for i in d.candidates]
