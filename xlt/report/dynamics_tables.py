"""The tables of ``xlt report dynamics``: Markdown (what emerges when, then every value by step), CSV
(long format: one line per value; and one per curve's "emerges at") and JSON (everything), each
written atomically into the output directory."""

from __future__ import annotations

import csv
import io
import os
from typing import Optional

from xlt.report.dynamics_emergence import FIRST, Emergence, RunDynamics, curve_name, steps_text
from xlt.report.dynamics_records import Curve, EmergenceRule
from xlt.utils.outputs import json_text, written_together

JSON_FORMAT = "xlt-dynamics-report/1"
NAME = "dynamics"


def number(value: Optional[float]) -> str:
    """Few digits for a person: perplexities in the hundreds need one decimal, CKA or P@1 three."""
    if value is None:
        return ""
    size = abs(value)
    return f"{value:,.1f}" if size >= 100 else f"{value:.2f}" if size >= 10 else f"{value:.3f}"


def bound_text(curve: Curve) -> str:
    bounds = curve.bounds()
    if not bounds:
        return "—"
    low, high = min(bounds), max(bounds)
    return number(low) if number(low) == number(high) else f"{number(low)}–{number(high)}"


def rule_text(rule: EmergenceRule) -> str:
    return (f"A curve emerges at the first snapshot from which it stays beyond its random-encoder bound (below it "
            f"for dev_ppl and other lower-is-better measures) by a clear margin for {rule.persist} snapshot(s) in a "
            f"row. Clear: more than {rule.fraction:g} x the largest margin the curve reaches, "
            f"{rule.floor:g} x its largest |value| or |bound|, and the spread of its bound over the snapshots "
            "(whichever is largest). *unconfirmed*: clear only at the last snapshot(s), too few to tell a blip from "
            "a rise. See docs/dynamics.md.")


def _runs_lines(dynamics: list[RunDynamics]) -> list[str]:
    lines = []
    for d in dynamics:
        steps = sorted({p.step for c in d.run.curves for p in c.points})
        lines.append(f"- **{d.run.label}** (`{d.run.run}`): {len(steps)} snapshot(s), steps "
                     f"{steps_text(steps[0])}–{steps_text(steps[-1])}, {len(d.run.curves)} curve(s)")
    return lines


def emergence_markdown(dynamics: list[RunDynamics], rule: EmergenceRule) -> str:
    """Per run: the "emerges at" table and the ordering lines (what the command prints)."""
    lines = ["# Pretraining dynamics: when each measure emerges", ""] + _runs_lines(dynamics)
    lines += ["", rule_text(rule)]
    for d in dynamics:
        lines += ["", f"## {d.run.label}", "", "| measure | lang | layer | bound | emerges at | margin needed | "
                  "best margin |", "|---|---|---|---|---|---|---|"]
        for curve, found in zip(d.run.curves, d.emergences):
            lines.append(f"| {curve.measure} | {curve.lang or ''} | {'' if curve.layer is None else curve.layer} | "
                         f"{bound_text(curve)} | {found.text()} | {number(found.threshold)} | "
                         f"{number(found.best_margin)} |")
        lines += ["", f"- Order: {d.ordering()}"] + [f"- Layers of {line}" for line in d.layers()]
    return "\n".join(lines) + "\n"


def _groups(curves: list[Curve]) -> dict[tuple, list[Curve]]:
    """(measure, lang) -> its curves, one per layer, in the run's curve order."""
    groups: dict[tuple, list[Curve]] = {}
    for curve in curves:
        groups.setdefault((curve.measure, curve.lang), []).append(curve)
    return groups


def values_markdown(d: RunDynamics) -> list[str]:
    """Per measure (and language) of a run: a step x layer table; the emergence cell in bold."""
    found = {id(c): e for c, e in zip(d.run.curves, d.emergences)}
    lines = []
    for curves in _groups(d.run.curves).values():
        heads = ["value" if c.layer is None else f"L{c.layer}" for c in curves]
        lines += ["", f"### {d.run.label}: {curve_name(curves[0], with_layer=False)}", "",
                  "| step | " + " | ".join(heads) + " |", "|---|" + "---|" * len(heads),
                  "| bound | " + " | ".join(bound_text(c) for c in curves) + " |"]
        by_step = [{p.step: p.value for p in c.points} for c in curves]
        for step in sorted({s for values in by_step for s in values}):
            cells = []
            for curve, values in zip(curves, by_step):
                text = number(values.get(step))
                cells.append(f"**{text}**" if text and _emerges_here(found[id(curve)], step) else text)
            lines.append(f"| {steps_text(step)} | " + " | ".join(cells) + " |")
    return lines


def _emerges_here(found: Emergence, step: int) -> bool:
    return found.emerged and found.step == step


def markdown(dynamics: list[RunDynamics], rule: EmergenceRule, figures: list[str]) -> str:
    lines = [emergence_markdown(dynamics, rule).rstrip("\n"), "", "# Values by step",
             "", "Bold: the snapshot where the curve emerges. Bound: the random encoder's value (dev_ppl: the "
             "unigram perplexity)."]
    for d in dynamics:
        lines += values_markdown(d)
    if figures:
        lines += ["", "# Figures", ""] + [f"![{os.path.splitext(f)[0]}]({f})" for f in figures]
    return "\n".join(lines) + "\n"


def _layer(curve: Curve) -> str:
    return "" if curve.layer is None else str(curve.layer)


def values_csv(dynamics: list[RunDynamics]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["label", "run", "measure", "lang", "layer", "snapshot", "step", "value", "bound",
                     "higher_is_better"])
    for d in dynamics:
        for curve in d.run.curves:
            if curve.random is not None:
                writer.writerow([d.run.label, d.run.run, curve.measure, curve.lang or "", _layer(curve), "random",
                                 "", repr(curve.random), "", curve.higher_is_better])
            for p in curve.points:
                bound = curve.bound_at(p)
                writer.writerow([d.run.label, d.run.run, curve.measure, curve.lang or "", _layer(curve), p.snapshot,
                                 p.step, repr(p.value), "" if bound is None else repr(bound), curve.higher_is_better])
    return out.getvalue()


def emergence_csv(dynamics: list[RunDynamics]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["label", "run", "measure", "lang", "layer", "status", "step", "margin_needed", "best_margin"])
    for d in dynamics:
        for curve, found in zip(d.run.curves, d.emergences):
            writer.writerow([d.run.label, d.run.run, curve.measure, curve.lang or "", _layer(curve), found.status,
                             "" if found.step is None else found.step,
                             "" if found.threshold is None else repr(found.threshold),
                             "" if found.best_margin is None else repr(found.best_margin)])
    return out.getvalue()


def as_json(dynamics: list[RunDynamics], rule: EmergenceRule, figures: list[str]) -> dict:
    def curve_json(curve: Curve, found: Emergence) -> dict:
        return {"measure": curve.measure, "lang": curve.lang, "layer": curve.layer,
                "higher_is_better": curve.higher_is_better, "random": curve.random,
                "points": [{"snapshot": p.snapshot, "step": p.step, "value": p.value, "bound": curve.bound_at(p)}
                           for p in curve.points],
                "emerges": {"status": found.status, "step": found.step, "at_first_snapshot": found.status == FIRST,
                            "margin_needed": found.threshold, "best_margin": found.best_margin,
                            "text": found.text()}}

    return {"format": JSON_FORMAT,
            "rule": {"fraction": rule.fraction, "floor": rule.floor, "persist": rule.persist},
            "runs": [{"label": d.run.label, "run": d.run.run, "ordering": d.ordering(), "layers": d.layers(),
                      "curves": [curve_json(c, e) for c, e in zip(d.run.curves, d.emergences)]} for d in dynamics],
            "figures": figures}


def write_all(dynamics: list[RunDynamics], rule: EmergenceRule, figures: list[str], output_dir: str) -> dict[str, str]:
    """OUTPUT_DIR/dynamics.md, dynamics.csv, dynamics-emergence.csv and dynamics.json; returns kind -> path."""
    base = os.path.join(output_dir, NAME)
    paths = {"markdown": base + ".md", "csv": base + ".csv", "emergence": base + "-emergence.csv",
             "json": base + ".json"}
    texts = {"markdown": markdown(dynamics, rule, figures), "csv": values_csv(dynamics),
             "emergence": emergence_csv(dynamics),
             "json": json_text(as_json(dynamics, rule, figures))}
    with written_together({paths[kind]: text for kind, text in texts.items()}):   # the Markdown, make's target, last
        pass
    return paths
