"""What fine-tuning on English leaves of a joint model's cross-lingual alignment, per layer.

Reads ``RESULTS_DIR/<row>/en-<lang>/<stage>.json``: ``xlt align sentence --map none`` outputs, the
XNLI test hypotheses retrieved among their translations (Fake-English: their twins) in one joint
model with no learned map (each language normalized on its own), for Table 1's pretrained model
(``pretrained``) and the same model after each task's fine-tuning (``xnli``, ``ner``, ``parse``:
``--finetuned`` the cell's first run). A table per pair
and row: P@1 per layer in percent (target -> source), and the mean over the layers above the
embeddings; the plot has a panel per pair and row, a line per stage. A stage measured on another
model or other sentences than its row's pretrained column is a gap (a stale file), not a number.

Why it is worth a table: zero-shot transfer needs the source-trained classifier to read the target's
states as it reads the source's, and a classifier can only read what fine-tuning left aligned
(docs/notes/2026-11-28-fake-english-xnli.md).
"""

from __future__ import annotations

import os
from typing import Callable, Optional, Sequence

from xlt.report.plots import Panel, Series, per_layer
from xlt.report.render import Cell, ReportTable
from xlt.report.sources import load_json
from xlt.utils.shapes import ListOf, matches

STAGES = (("pretrained", "pretrained"), ("xnli", "after XNLI"), ("ner", "after NER"), ("parse", "after parsing"))
AVERAGE = "mean 1-L"


# What every stage of one row must share to be compared: the model read, the test sentences.
def _measured_on(data: dict) -> tuple:
    source, test = data.get("source"), data.get("test")
    return (source.get("run") if isinstance(source, dict) else None,
            (test.get("source"), test.get("target")) if isinstance(test, dict) else None,
            str(data.get("test_columns")))


def _read(path: str) -> tuple[Optional[dict], Optional[str]]:
    """An align-sentence result measured without a map, or the reason there is none."""
    data, reason = load_json(path)
    if data is None:
        return None, reason
    layers, p_at_1 = data.get("layers"), data.get("p_at_1")
    if data.get("command") != "align sentence" or not matches(layers, ListOf(int)) \
            or not matches(p_at_1, ListOf(float)) or len(layers) != len(p_at_1):
        return None, f"{path} is not an `xlt align sentence` result"
    if data.get("map") != "none":
        return None, f"{path} was measured through a learned map, not in the joint model (--map none)"
    return data, None


def _percent_by_layer(data: dict) -> dict[int, float]:
    return {int(layer): 100.0 * float(p) for layer, p in zip(data["layers"], data["p_at_1"])}


def _mean_above_embeddings(values: dict[int, float]) -> Optional[float]:
    above = [v for layer, v in values.items() if layer > 0]
    return sum(above) / len(above) if above else None


def rows_present(results_dir: str, pair: str) -> list[str]:
    """The model rows measured for a pair, in name order (``default`` first)."""
    if not os.path.isdir(results_dir):
        return []
    rows = [r for r in sorted(os.listdir(results_dir)) if os.path.isdir(os.path.join(results_dir, r, pair))]
    return sorted(rows, key=lambda r: (r != "default", r))


def build(results_dir: str, languages: Sequence[str], rows: Optional[Sequence[str]] = None
          ) -> tuple[ReportTable, Callable[[str], None]]:
    """``rows``: the model rows to show (default: every row measured)."""
    pairs = [f"en-{lang}" for lang in languages]
    measured: dict[tuple[str, str], dict[str, dict[int, float]]] = {}
    gaps: dict[tuple[str, str], dict[str, str]] = {}
    for pair in pairs:
        for row in rows or rows_present(results_dir, pair) or ["default"]:
            results = {stage: _read(os.path.join(results_dir, row, pair, f"{stage}.json")) for stage, _ in STAGES}
            pretrained = results["pretrained"][0]
            for stage, (data, reason) in results.items():
                if data is not None and pretrained is not None and _measured_on(data) != _measured_on(pretrained):
                    data, reason = None, ("measured on another model or other test sentences than the pretrained "
                                          "column (stale: make it again)")
                if data is None:
                    gaps.setdefault((pair, row), {})[stage] = reason or "missing"
                else:
                    measured.setdefault((pair, row), {})[stage] = _percent_by_layer(data)
    keys = list(dict.fromkeys([*measured, *gaps]))
    # with nothing measured, the demo's 8 layers and the embeddings, so the table still shows its gaps
    layers = sorted({layer for stages in measured.values() for values in stages.values() for layer in values}) \
        or list(range(9))
    table = ReportTable(name="kept-alignment",
                        title="Alignment kept by fine-tuning: P@1 of a sentence's translation in one joint model",
                        stub="Layer", groups=[(f"{row} {pair}", [label for _, label in STAGES]) for pair, row in keys])
    for layer in [*layers, AVERAGE]:
        cells = []
        for key in keys:
            for stage, _ in STAGES:
                values = measured.get(key, {}).get(stage)
                if values is None:
                    cells.append(Cell(gap=gaps.get(key, {}).get(stage, "missing")))
                else:
                    cells.append(Cell(value=_mean_above_embeddings(values) if layer == AVERAGE else values.get(layer)))
        table.add_row(f"L{layer}" if layer != AVERAGE else AVERAGE, cells)
    table.remarks = [
        "Each XNLI test hypothesis of the target language retrieves its source sentence among all source "
        "hypotheses by cosine of mean-pooled states (specials excluded), each language centred on its own "
        "(`xlt align sentence --map none`); chance is 1 / pairs. After a task: the first fine-tuning run of "
        "Table 1's cell (`--finetuned`), frozen parts the pretrained model's.",
        f"{AVERAGE}: the mean over the layers above the embeddings (L0).",
    ]

    def plot(output_dir: str) -> None:
        panels = []
        for pair, row in keys:
            panel = Panel(f"{row} {pair}")
            for color, (stage, label) in enumerate(STAGES):
                values = measured.get((pair, row), {}).get(stage)
                if values:
                    panel.series.append(Series(label, layers, [values.get(layer) for layer in layers], color))
            panels.append(panel)
        per_layer(panels, os.path.join(output_dir, "kept-alignment.png"), "P@1 (%)", table.title)

    return table, plot
