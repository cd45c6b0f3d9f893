"""Grouped bar charts (matplotlib, Agg backend), laid out as Liu et al.'s figures: one panel per data
size (or part of speech table), languages on the x axis, one bar per model; written atomically as PNG."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional, Sequence

from xlt.utils.outputs import atomic_path, make_directory


@dataclass
class BarPanel:
    title: str
    groups: Sequence[str]                                  # x-axis groups (languages, POS classes)
    bars: dict[str, Sequence[Optional[float]]] = field(default_factory=dict)   # label -> one value per group
    ylabel: str = ""


def grouped_bars(panels: Sequence[BarPanel], path: str, title: str, columns: int = 2) -> None:
    """Panels in a grid of ``columns``; a missing value leaves its bar out (the gap shows)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = max(1, len(panels))
    cols = min(columns, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.2 * rows), squeeze=False)
    for ax, panel in zip(axes.flat, panels):
        k = max(1, len(panel.bars))
        width = 0.8 / k
        for j, (label, values) in enumerate(panel.bars.items()):
            xs = [i + (j - (k - 1) / 2) * width for i, v in enumerate(values) if v is not None]
            ys = [v for v in values if v is not None]
            ax.bar(xs, ys, width=width, label=label, color=f"C{j % 10}")
        ax.set_xticks(range(len(panel.groups)))
        ax.set_xticklabels(panel.groups, fontsize=8)
        ax.set_title(panel.title, fontsize=9)
        ax.set_ylabel(panel.ylabel, fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    # one legend for the figure, under the panels (inside a panel it hides bars)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 6), fontsize=7, frameon=False)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.07 if handles else 0, 1, 1))
    make_directory(os.path.dirname(os.path.abspath(path)))
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)
