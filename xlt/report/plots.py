"""Per-layer line plots (matplotlib, Agg backend: no display needed), written atomically as PNG."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional, Sequence

from xlt.utils.outputs import atomic_path, make_directory


@dataclass
class Series:
    label: str
    layers: Sequence[int]
    values: Sequence[Optional[float]]
    color: int = 0           # matplotlib cycle colour: xlt's line and the paper's share one
    dashed: bool = False     # the paper's numbers are dashed, xlt's solid


@dataclass
class Panel:
    title: str
    series: list[Series] = field(default_factory=list)


def per_layer(panels: Sequence[Panel], path: str, ylabel: str, title: str,
              xlabel: str = "layer (0 = embeddings)") -> None:
    """One panel per language pair (or task), one line per series (gaps in a series are left out); the
    x axis is a series' ``layers`` (layers, or pretraining steps with ``xlabel`` saying so)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(3.6 * max(1, len(panels)), 3.2), squeeze=False,
                             sharey=True)
    for ax, panel in zip(axes[0], panels):
        for s in panel.series:
            points = [(x, y) for x, y in zip(s.layers, s.values) if y is not None]
            if points:
                xs, ys = zip(*points)
                ax.plot(xs, ys, linestyle="--" if s.dashed else "-", marker="o", markersize=3,
                        color=f"C{s.color % 10}", label=s.label)
        ax.set_title(panel.title, fontsize=9)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:   # a panel whose series are all gaps has nothing to name
            ax.legend(fontsize=6)
    axes[0][0].set_ylabel(ylabel, fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    make_directory(os.path.dirname(os.path.abspath(path)))
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)
