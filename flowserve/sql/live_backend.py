"""Statements on a live cluster in-process: the gateway's live driver runs in a thread of
its own (its asyncio loop); each batch is ONE query — an `LLMBatch` workflow of many
independent LLM steps in the core's late-binding pool. A batch the core fails as a whole
(a prompt past every instance's context, an engine down past its retries) is retried
call by call so only the rows at fault get their error."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from types import MappingProxyType
from typing import Any

from flowserve.host.root import compose_driver
from flowserve.host.settings import GatewaySettings
from flowserve.sql.backend import Answer, Progress, usage_report
from flowserve.sql.batch import LLMBatch
from flowserve.sql.output import OutputSpec
from flowserve.sql.planner import Request
from flowserve.types.specs import InstanceSpec
from flowserve.types.work import QueryClass, WorkflowRef


class LiveClusterBackend:
    def __init__(self, cluster: Sequence[InstanceSpec], settings: GatewaySettings | None = None,
                 prefix_caching: bool = True, query_class: QueryClass = "batch", chat: bool = False) -> None:
        self.model = cluster[0].model if cluster else None
        self.chat = chat
        self.cluster = tuple(cluster)
        self.query_class = query_class
        # off: every call asks the engine not to reuse cached KV (llama-server's `cache_prompt`)
        self.params: dict[str, Any] = {"temperature": 0.0} | ({} if prefix_caching else {"cache_prompt": False})
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="flowserve-sql-driver", daemon=True)
        self._thread.start()
        self.driver = compose_driver(list(cluster), settings or GatewaySettings(dispatch_params={"binding": "late"}),
                                     workflows={LLMBatch.name: LLMBatch})
        self._await(self.driver.start())
        self._t0: float | None = None
        self._t1 = 0.0
        self._calls = self._prompt = self._cached = 0

    def _await(self, coro: Any) -> Any:
        fut = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return fut.result()
        except KeyboardInterrupt:
            fut.cancel()
            raise

    def run(self, requests: Sequence[Request], stage: str, output: OutputSpec, progress: Progress) -> list[Answer]:
        if self._t0 is None:
            self._t0 = time.perf_counter()
        answers = self._await(self._batch(list(requests), stage))
        if any(a is None for a in answers):  # the batch failed as a whole: find the rows at fault
            answers = [self._await(self._batch([r], stage))[0] or Answer(None, "the call failed") for r in requests]
        for a in answers:
            self._calls += a.error is None
            self._prompt += a.prompt_tokens
            self._cached += a.cached_tokens
        progress(len(answers), sum(a.prompt_tokens for a in answers), sum(a.cached_tokens for a in answers))
        self._t1 = time.perf_counter()
        return answers

    async def _batch(self, requests: list[Request], stage: str) -> list[Answer | None]:
        after = [r.after for r in requests] if len(requests) > 1 else None
        ref = WorkflowRef(LLMBatch.name, (tuple(r.prompt for r in requests), tuple(r.max_tokens for r in requests),
                                          stage, self.model, MappingProxyType(self.params),
                                          None if after is None else tuple(after), self.chat))
        res = await self.driver.run("llm_sql", ref, model=self.model, cls=self.query_class)
        if not res.completed:
            if len(requests) == 1:
                return [Answer(None, res.reason or "the call failed")]
            return [None] * len(requests)
        out = []
        for a in res.output["answers"]:
            if a is None or a["error"]:
                out.append(Answer(None, (a or {}).get("error") or "no answer"))
            else:
                out.append(Answer(a["text"] or "", None, a["prompt_tokens"], a["cached_tokens"]))
        return out

    def begin_statement(self) -> None:
        self._t0, self._t1 = None, 0.0
        self._calls = self._prompt = self._cached = 0

    def report(self) -> dict[str, Any]:
        return usage_report(self._t0, self._t1, self._calls, self._prompt, self._cached)

    def close(self) -> None:
        if self._loop.is_running():
            self._await(self.driver.shutdown(drain_timeout_s=1.0))
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)
