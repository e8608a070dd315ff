"""A research agent written with the plain `openai` client, served by flowserve as one program.

It plans, researches three aspects of the question in parallel threads (each looks its
aspect up in a small local corpus, then summarises it), then refines its draft in a short
act-observe loop and answers. Nothing in it knows about flowserve except the one
`program(...)` line in `main`: the gateway sees every call of one run as one program —
its deadline, its stages and threads, its growing context — and schedules it as such.

    flowserve serve --config examples/serve-sim.yaml --port 8000 &
    python examples/agents/openai_agent.py --url http://127.0.0.1:8000 --api-key sk-local-1 "Why do caches help agents?"

Any OpenAI-compatible endpoint works too (`--no-program`): then each call is on its own.
Without `--model` it runs on the first model the endpoint lists (`GET /v1/models`): the
simulated gateway's `llama-3.1-8b`, or `smollm2` on the real-engine quick start.
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import openai

from flowserve.client import program, stage

CORPUS = {
    "cache": "A prefix cache keeps the KV state of a prompt's first tokens, so a later prompt that starts "
             "the same way skips recomputing them.",
    "agent": "An agent calls the model many times; each call repeats the conversation so far, so its "
             "prompts share a long, growing prefix.",
    "schedule": "A scheduler that knows a program's deadline and remaining calls can order calls so whole "
                "programs finish sooner, not just single calls.",
}
SYSTEM = "You are a careful research assistant. Answer briefly and cite the notes you were given."


def lookup(topic: str) -> str:
    """The agent's tool: a local corpus lookup (a search API or a database in real agents)."""
    return CORPUS.get(topic, "no notes found")


def ask(client: Any, model: str, messages: list[dict[str, str]], max_tokens: int) -> tuple[str, Any]:
    r = client.chat.completions.create(model=model, messages=messages, max_tokens=max_tokens)
    return r.choices[0].message.content or "", r.usage


def served_model(url: str, api_key: str | None) -> str:
    """The first model the endpoint serves (`GET /v1/models`)."""
    models = openai.OpenAI(base_url=f"{url}/v1", api_key=api_key or "none").models.list().data
    if not models:
        raise SystemExit(f"{url} serves no model")
    return models[0].id


def run_agent(client: Any, model: str, question: str, rounds: int = 2) -> dict[str, Any]:
    """The agent's loop; returns its answer and what it sent (calls, tokens per usage)."""
    usages = []
    history = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": question}]
    plan, use = ask(client.with_options(default_headers=stage("plan")), model,
                    [*history, {"role": "user", "content": "Plan the research in three steps."}], 48)
    usages.append(use)
    history.append({"role": "assistant", "content": plan})

    def research(topic: str, i: int) -> str:
        notes = lookup(topic)
        worker = client.with_options(default_headers=stage("research", thread=f"aspect-{i}"))
        summary, use = ask(worker, model, [*history, {"role": "user", "content": f"Notes on {topic}: {notes}\n"
                                                      "Summarise what they say about the question."}], 32)
        usages.append(use)
        return f"{topic}: {summary}"

    with ThreadPoolExecutor(len(CORPUS)) as pool:  # the aspects in parallel: threads of one program
        findings = list(pool.map(research, CORPUS, range(len(CORPUS))))
    history.append({"role": "user", "content": "Findings:\n" + "\n".join(findings)})
    for r in range(rounds):  # act, observe: each round extends the context the next call sees
        draft, use = ask(client.with_options(default_headers=stage("refine")), model,
                         [*history, {"role": "user", "content": f"Draft the answer (round {r + 1})."}], 32)
        usages.append(use)
        history += [{"role": "assistant", "content": draft},
                    {"role": "user", "content": f"Observation: {lookup('schedule')}"}]
    answer, use = ask(client.with_options(default_headers=stage("answer")), model, history, 64)
    usages.append(use)
    return {"answer": answer, "calls": len(usages), "prompt_tokens": sum(u.prompt_tokens for u in usages),
            "output_tokens": sum(u.completion_tokens for u in usages)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("question")
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--model", default=None, help="default: the first model the endpoint serves")
    ap.add_argument("--api-key", default=None)
    ap.add_argument("--slo-ms", type=float, default=60_000, help="the whole run's deadline")
    ap.add_argument("--no-program", action="store_true", help="plain OpenAI calls, each on its own")
    args = ap.parse_args()
    args.model = args.model or served_model(args.url, args.api_key)
    if args.no_program:
        client = openai.OpenAI(base_url=f"{args.url}/v1", api_key=args.api_key or "none")
        print(json.dumps(run_agent(client, args.model, args.question), indent=2))
        return
    run = program(args.url, api_key=args.api_key, slo_ms=args.slo_ms)
    with run as client:  # the one flowserve line: every call below is one program
        result = run_agent(client, args.model, args.question)
    print(json.dumps({**result, "program": run.summary}, indent=2))


if __name__ == "__main__":
    main()
