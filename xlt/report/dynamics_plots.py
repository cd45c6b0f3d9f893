"""The figures of ``xlt report dynamics`` (matplotlib, Agg backend), one PNG per measure and language,
written atomically: the measure against pretraining step, every run overlaid in its own colour, its
random-encoder bound dashed in the same colour, and a star where the curve emerges.

A layered measure gets one panel per layer (shared y axis), not one line per layer in a single panel
nor a layer x step heat map: the question is run against run (Default against Sep Emb + L1-6) and
curve against its bound, and each layer has a bound of its own. In one panel that would be runs x
layers lines plus as many dashed bounds, and a heat map cannot overlay runs or show a bound at all;
panels side by side still show which layer leaves its bound first.
"""

from __future__ import annotations

import math
import os
import re
from typing import Optional

from xlt.report.dynamics_emergence import Emergence, RunDynamics, curve_name
from xlt.report.dynamics_records import Curve, curve_order
from xlt.utils.outputs import atomic_path

LOG_Y = ("dev_ppl",)   # perplexity falls over orders of magnitude; the other measures are bounded scores


def figure_name(measure: str, lang: Optional[str]) -> str:
    stem = f"dynamics-{measure}" + (f"-{lang}" if lang else "")
    return re.sub(r"[^A-Za-z0-9_.-]", "_", stem) + ".png"


def plot_all(dynamics: list[RunDynamics], output_dir: str) -> list[str]:
    """One PNG per (measure, lang) over all runs; returns their paths in the report's curve order."""
    figures: dict[tuple, list[tuple[int, Curve, Emergence]]] = {}
    keys: dict[tuple, Curve] = {}
    for index, d in enumerate(dynamics):
        for curve, found in zip(d.run.curves, d.emergences):
            key = (curve.measure, curve.lang)
            figures.setdefault(key, []).append((index, curve, found))
            keys.setdefault(key, curve)
    paths = []
    for key in sorted(figures, key=lambda k: curve_order(keys[k])):
        path = os.path.join(output_dir, figure_name(*key))
        _plot(figures[key], [d.run.label for d in dynamics], path, curve_name(keys[key], with_layer=False))
        paths.append(path)
    return paths


def step_ticks(steps: list[int]) -> list[int]:
    """0 (when a snapshot is there), the first positive step, then 1-2-5 multiples of powers of ten up to the
    last step: a log axis labelled in round numbers."""
    positive = sorted(s for s in steps if s > 0)
    first, last = positive[0], positive[-1]
    ticks = {first} | ({0} if 0 in steps else set())
    power = 1
    while power <= last:
        ticks |= {m * power for m in (1, 2, 5) if first < m * power <= last}
        power *= 10
    return sorted(ticks)


def _plot(entries: list[tuple[int, Curve, Emergence]], labels: list[str], path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    layers = sorted({c.layer for _, c, _ in entries}, key=lambda layer: (layer is not None, layer or 0))
    columns = math.ceil(math.sqrt(len(layers)))
    rows = math.ceil(len(layers) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(max(6.0, 3.6 * columns), 3.2 * rows), squeeze=False, sharey=True)
    steps = [p.step for _, c, _ in entries for p in c.points]
    # symlog: linear below the first positive step, so a step-0 snapshot (the initialisation) has a place.
    positive = [s for s in steps if s > 0]
    log_y = entries[0][1].measure in LOG_Y and all(p.value > 0 for _, c, _ in entries for p in c.points)
    for ax, layer in zip(axes.flat, layers):
        for index, curve, found in entries:
            if curve.layer != layer:
                continue
            colour = f"C{index % 10}"
            xs, ys = [p.step for p in curve.points], [p.value for p in curve.points]
            ax.plot(xs, ys, "-o", color=colour, markersize=2.5, linewidth=1.2,
                    label=f"{labels[index]}: {found.text() if found.emerged else found.status}")
            bounds = [(p.step, curve.bound_at(p)) for p in curve.points if curve.bound_at(p) is not None]
            if bounds:
                ax.plot(*zip(*bounds), "--", color=colour, linewidth=1.0, alpha=0.8)
            if found.emerged:
                ax.plot([found.step], [next(p.value for p in curve.points if p.step == found.step)], "*",
                        color=colour, markersize=9, markeredgecolor="black", markeredgewidth=0.5)
        if positive:
            ax.set_xscale("symlog", linthresh=min(positive), linscale=0.5)
            ax.xaxis.set_major_locator(FixedLocator(step_ticks(steps)))
            ax.xaxis.set_minor_locator(NullLocator())
            ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.0f}"))
        if log_y:
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:,.0f}"))
            ax.yaxis.set_minor_formatter(FuncFormatter(lambda y, _: f"{y:,.0f}" if f"{y:.0e}"[0] in "25" else ""))
        ax.set_title(title if layer is None else f"layer {layer}" + (" (embeddings)" if layer == 0 else ""),
                     fontsize=9)
        ax.set_xlabel("pretraining step", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(layers):]:
        ax.set_visible(False)
    axes[0][0].set_ylabel(title, fontsize=8)
    bound = "unigram perplexity" if entries[0][1].measure == "dev_ppl" else "random-encoder bound"
    fig.suptitle(f"{title} over pretraining (dashed: {bound}; star: emerges)", fontsize=10)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
