"""``xlt report steps``: one pair's zero-shot and English scores against pretraining steps.

Where Table 1's Default does not reach a target at a scale's steps (Fake-English's parsing and XNLI
at the demo scale), the question is whether more pretraining would, and at what cost; where a row
transfers next to nothing (the separated rows), whether more pretraining brings it back. make/steps.mk
pretrains the row once more, for longer, with a weight-only snapshot every few thousand steps (the
same seed and arguments: on the same CPU kind its first steps are Table 1's model), and fine-tunes
every snapshot as a Table 1 cell::

    RESULTS_DIR/step-<N>/en-<L>/<task>/results.json     (xlt finetune --checkpoint step-<N>)

This table reads them beside Table 1's No pretraining control and best trivial baselines
(TABLE1_DIR/control/en-<L>, TABLE1_DIR/baselines/en-<L>): per snapshot its dev perplexity, and per
task the zero-shot score, the English score and the relative transfer (as Fake-English's Table 1);
under it, per task, the first snapshot that meets the targets below, or how far the last one is.
"""

from __future__ import annotations

import glob
import os
import re
from typing import Callable, Optional

from xlt.report.findings import Inconclusive, require
from xlt.report.plots import Panel, Series, per_layer
from xlt.report.render import Cell, ReportTable
from xlt.report.sources import unigram_fit
from xlt.report.table1_cells import SOURCE, Row, collect, model_dirs, relative_cell, value_cell
from xlt.report.table1_scores import BASELINES, CONTROL, TASKS, Values, relative_transfer

# Issue 28's targets for Default: a relative transfer of at least a half, and a zero-shot margin over
# the No pretraining control that a seed's noise does not make (NER 10 F1, LAS 10, XNLI 5 points).
TARGET_RELATIVE = 0.5
TARGET_MARGIN = {"xnli": 5.0, "ner": 10.0, "parse": 10.0}
COLUMNS = ["zero-shot", "English", "relative"]


def snapshot_steps(results_dir: str, lang: str) -> list[int]:
    """The steps N of RESULTS_DIR/step-<N>/en-<lang>, in order."""
    pattern = os.path.join(glob.escape(results_dir), "step-*", f"en-{lang}")
    found = (re.fullmatch(r"step-(\d+)", os.path.basename(os.path.dirname(path))) for path in glob.glob(pattern))
    return sorted(int(m.group(1)) for m in found if m)


def row_key(step: int) -> str:
    return f"step-{step}"


def target_line(values: Values, english: Values, steps: list[int], task: str, title: str, lang: str) -> str:
    """The first snapshot that meets ``task``'s targets (relative transfer and margin over No pretraining),
    or the last one's numbers and the best relative transfer seen."""
    wanted = f"relative ≥ {TARGET_RELATIVE:g} and ≥ {TARGET_MARGIN[task]:g} over No pretraining"
    seen: list[tuple[Optional[float], int]] = []
    numbers = ""
    for step in steps:
        row, relative = row_key(step), None
        try:
            relative = relative_transfer(values, english, row, task, lang)   # checks the row's zero-shot score
            control = require(values.get(CONTROL, {}).get(task, {}).get(lang), f"No pretraining's zero-shot {task} score")
            margin = values[row][task][lang] - control
            numbers = f"relative {relative:.2f}, {margin:+.1f} over No pretraining"
            if relative >= TARGET_RELATIVE and margin >= TARGET_MARGIN[task]:
                return f"{title}: the targets ({wanted}) are met from {step:,} steps ({numbers})."
        except Inconclusive as reason:
            numbers = f"undecided: {reason}"
        seen.append((relative, step))
    if not seen:
        return f"{title}: no snapshot was fine-tuned."
    scored = [(r, s) for r, s in seen if r is not None]
    best = f"; best relative {max(scored)[0]:.2f} at {max(scored)[1]:,} steps" if scored else ""
    return f"{title}: the targets ({wanted}) are not met by {steps[-1]:,} steps (there: {numbers}{best})."


def dev_cells(readings: dict, row: str, step: int, lang: str) -> list[Cell]:
    """The snapshot's English and ``lang`` dev perplexity, from the run directory its cells name."""
    runs = {path for (r, _, _), reading in readings.items() if r == row for path in model_dirs(reading)}
    for run in sorted(runs):
        fits = [unigram_fit(run, language, step) for language in (SOURCE, lang)]
        if all(fits):
            return [Cell(value=fit[0], digits=0) for fit in fits]
    return [Cell(gap=f"no dev perplexity recorded at step {step:,} in {', '.join(sorted(runs)) or 'no run'}")] * 2


def build(results_dir: str, table1_dir: str, lang: str, row: str = "default",
          label: str = "Default") -> tuple[ReportTable, Callable[[str], None]]:
    """The table and a function that draws its figure into an output directory: Table 1's ``row``
    (shown as ``label``) against steps; its name is steps-<lang>, or steps-<lang>-<row> for another row."""
    steps = snapshot_steps(results_dir, lang)
    rows = [Row(row_key(step), f"{step:,} steps") for step in steps]
    references = [Row(CONTROL, "No pretraining"), Row(BASELINES, "Best trivial baseline", baseline=True)]
    values, readings, english, english_readings = collect(results_dir, rows, [lang])
    for part, more in zip((values, readings, english, english_readings), collect(table1_dir, references, [lang])):
        part.update(more)
    name = f"steps-{lang}" + (f"-{row}" if row != "default" else "")
    table = ReportTable(name=name, title=f"{label} en-{lang} against pretraining steps: zero-shot, English "
                        "and relative transfer of each snapshot", stub="Snapshot",
                        groups=[("dev perplexity", [SOURCE, lang])] + [(title, COLUMNS) for _, title in TASKS])
    for row, step in list(zip(rows, steps)) + [(r, None) for r in references]:
        cells = dev_cells(readings, row.key, step, lang) if step is not None else [Cell(), Cell()]
        for task, _ in TASKS:
            target, source = readings[row.key, task, lang], english_readings[row.key, task, lang]
            cells += [value_cell(target), value_cell(source), relative_cell(values, english, row, task, target.gap, lang)]
        table.add_row(row.label, cells)
    table.remarks = [
        f"Each snapshot (`xlt finetune --checkpoint step-N`) fine-tuned as a Table 1 cell; No pretraining and the "
        f"best trivial baselines are Table 1's ({table1_dir}). relative = (zero-shot - best trivial baseline) / "
        "(English - best trivial baseline), each baseline on its own test set."]
    table.remarks += [target_line(values, english, steps, task, title, lang) for task, title in TASKS]

    def plot(output_dir: str) -> None:
        panels = []
        for task, title in TASKS:
            panel = Panel(title)
            for label, numbers, color in (("zero-shot", values, 0), ("English", english, 1)):
                panel.series.append(Series(label, steps, [numbers[row_key(s)][task].get(lang) for s in steps], color))
            for label, numbers, row, color in (("No pretraining, zero-shot", values, CONTROL, 0),
                                               ("best trivial baseline, zero-shot", values, BASELINES, 2)):
                level = numbers.get(row, {}).get(task, {}).get(lang)
                panel.series.append(Series(label, steps, [level] * len(steps), color, dashed=True))
            panels.append(panel)
        per_layer(panels, os.path.join(output_dir, f"{table.name}.png"), "score", table.title,
                  xlabel="pretraining step")
    return table, plot

