"""Show an app's workflow graph before and after graph passes (text and a PNG)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from flowserve.config import load_cluster
from flowserve.errors import ConfigError
from flowserve.graph.nodes import LLMNode, Node
from flowserve.graph.passes import PassContext, make_passes
from flowserve.graph.primitives import ops_of
from flowserve.graph.runtime import topological_order
from flowserve.graph.workflow import Graph
from flowserve.profiles.ops import op_profile
from flowserve.workloads import load_workload
from flowserve.workloads.base import AppQuery

APPS = ("search_gen", "naive_rag", "advanced_rag")


def app_graph(app: str, passes: str, cluster: str = "teola") -> tuple[list[Node], list[Node]]:
    """The first query of the app's built-in workload: its graph before and after `passes`
    (micro-batches sized from the cluster's component profiles)."""
    if app not in APPS:
        raise ConfigError(f"unknown app {app!r}; known: {', '.join(APPS)}")
    plan = load_workload(app, {"queries": 1}).queries[0].plan
    assert isinstance(plan, AppQuery)
    g = Graph({})
    plan.make().start(g)
    before = g.take()
    sizes: dict[str, int] = {}
    for spec in load_cluster(cluster):
        if spec.kind != "llm":
            prof = spec.op_profile or op_profile(spec.kind)
            for op in ops_of(spec.kind):
                sizes[op] = min(sizes.get(op, 1 << 30), prof.efficient_batch(op))
    after = list(before)
    ctx = PassContext({}, {}, sizes)
    for p in make_passes(passes):
        after = list(p(after, ctx))
    return topological_order(before, set()), topological_order(after, set())


def describe(n: Node) -> str:
    if isinstance(n, LLMNode):
        what = f"llm:{n.kind}" + (" splittable" if n.splittable else "") + f" max_tokens={n.max_tokens}"
    else:
        extra = "".join(f" {k}={n.args[k]}" for k in ("units", "index") if isinstance(n.args.get(k), int))
        what = f"op:{n.op}" + (" batchable" if n.batchable else "") + (" stream" if n.args.get("stream") else "") \
            + extra
    deps = ", ".join(f"{d}(chain)" if d in n.chain else d for d in n.deps) or "-"
    return f"{n.key:<18} {what:<44} ← {deps}"


def draw(nodes: Sequence[Node], title: str, ax) -> None:  # type: ignore[no-untyped-def]
    level: dict[str, int] = {}
    for n in nodes:  # topological order
        level[n.key] = 1 + max((level[d] for d in n.deps if d in level), default=-1)
    rows: dict[int, list[str]] = {}
    for k, lv in level.items():
        rows.setdefault(lv, []).append(k)
    pos = {k: (i - (len(ks) - 1) / 2, -lv) for lv, ks in rows.items() for i, k in enumerate(ks)}
    for n in nodes:
        for d in n.deps:
            (x0, y0), (x1, y1) = pos[d], pos[n.key]
            ax.annotate("", (x1, y1 + 0.15), (x0, y0 - 0.15),
                        arrowprops={"arrowstyle": "->", "color": "grey" if d in n.chain else "black", "lw": 0.8,
                                    "ls": "--" if d in n.chain else "-"})
    for n in nodes:
        x, y = pos[n.key]
        color = "#f4c27a" if isinstance(n, LLMNode) else "#9cc3e6"
        ax.text(x, y, n.key, ha="center", va="center", fontsize=7, bbox={"boxstyle": "round", "fc": color})
    ax.set_title(title, fontsize=9)
    ax.set_xlim(min(p[0] for p in pos.values()) - 1, max(p[0] for p in pos.values()) + 1)
    ax.set_ylim(min(p[1] for p in pos.values()) - 1, 1)
    ax.axis("off")


def write_png(before: Sequence[Node], after: Sequence[Node], app: str, passes: str, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(16, 9))
    draw(before, f"{app}: module chain (dashed: order-only edges)", axes[0])
    draw(after, f"{app}: after passes {passes}", axes[1])
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
