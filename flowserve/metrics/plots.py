"""Plots of experiment summaries: SLO attainment curves and latency CDFs (matplotlib, Agg)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

# a dash pattern per queue policy: a panel holds one dispatch policy with each queue policy
LINE_STYLES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)), (0, (8, 2, 1, 2)))
MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def series_styles(labels: Sequence[str]) -> dict[str, dict[str, Any]]:
    """A (colour, line style, marker) per series: colours run through tab10/tab20 over the
    whole figure, line styles through each panel's series (so no two lines of a panel share
    a dash pattern), markers through the figure (so series that share a colour in different
    panels still differ in the legend)."""
    cmap = plt.get_cmap("tab20" if len(labels) > 10 else "tab10")
    order = {label: j for members in panel_groups(labels).values() for j, label in enumerate(members)}
    return {label: {"color": cmap(i % cmap.N), "ls": LINE_STYLES[order[label] % len(LINE_STYLES)],
                    "marker": MARKERS[i % len(MARKERS)]} for i, label in enumerate(labels)}


def panel_groups(labels: Sequence[str]) -> dict[str, list[str]]:
    """Many `dispatch+queue` series: one panel per dispatch policy; few: one panel."""
    if len(labels) <= 6:
        return {"": list(labels)}
    groups: dict[str, list[str]] = {}
    for label in labels:
        groups.setdefault(label.split("+")[0], []).append(label)
    return groups


PANELS_PER_ROW = 5


def plot_attainment(summaries: Mapping[str, Mapping[str, Any]], path: Path, title: str,
                    latencies: Mapping[str, Sequence[float]] | None = None) -> Path:
    """SLO attainment vs scale (and, with `latencies`, latency CDFs below), one column of
    panels per dispatch policy when there are many series; one legend outside the axes."""
    styles = series_styles(list(summaries))
    groups = panel_groups(list(summaries))
    rows, n = (2 if latencies else 1), len(groups)
    cols = min(n, PANELS_PER_ROW)
    bands = -(-n // cols)  # panels wrap onto further rows, so the figure stays readable
    fig, axes = plt.subplots(rows * bands, cols, figsize=(max(6.4, 3.6 * cols), 3.8 * rows * bands),
                             squeeze=False, sharey="row")
    first_cdf = axes[1][0] if latencies else None  # every latency panel shares its x-axis, to compare them
    for extra in range(n, bands * cols):
        for r in range(rows):
            axes[(bands - 1) * rows + r][extra % cols].set_visible(False)
    for c, (group, labels) in enumerate(groups.items()):
        top, col = (c // cols) * rows, c % cols
        ax = axes[top][col]
        for label in labels:
            curve = summaries[label]["slo_attainment"]
            ax.plot([p["scale"] for p in curve], [p["attainment"] for p in curve], markersize=3,
                    lw=1.2, label=label, **styles[label])
        for level, ls in ((0.95, "--"), (0.99, ":")):
            ax.axhline(level, color="grey", lw=0.7, ls=ls)
            ax.text(0.01, level, f"{level:.0%}", transform=ax.get_yaxis_transform(), fontsize=7,
                    color="dimgrey", va="bottom")
        ax.set_xscale("log")
        ax.set_xlabel("SLO scale (× standalone latency)")
        ax.set_ylim(0, 1.02)
        ax.set_title(f"dispatch: {group}" if group else title, fontsize=9)
        if latencies:
            cdf = axes[top + 1][col]
            if cdf is not first_cdf:
                cdf.sharex(first_cdf)
            for label in labels:
                xs = sorted(latencies.get(label, ()))
                style = {k: v for k, v in styles[label].items() if k != "marker"}
                cdf.plot(xs, [(i + 1) / len(xs) for i in range(len(xs))], lw=1.2, label=label, **style)
            cdf.set_xlabel("query latency (s)")
            cdf.set_ylim(0, 1.02)
    for band in range(bands):
        axes[band * rows][0].set_ylabel("SLO attainment")
        if latencies:
            axes[band * rows + 1][0].set_ylabel("latency CDF")
    if n > 1:
        fig.suptitle(title)
    handles = [h for r in range(0, rows * bands, rows) for ax in axes[r] for h in ax.get_legend_handles_labels()[0]]
    fig.legend(handles, [str(h.get_label()) for h in handles], loc="center left", bbox_to_anchor=(1.0, 0.5),
               fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.45 / fig.get_figheight()) if n > 1 else None)  # room for the title
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path
