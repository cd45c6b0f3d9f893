"""Wu et al. (2020) Figure 7: linear CKA per layer between English and each language, for a
bilingual model, two monolingual models, and a random encoder, beside the paper's numbers.

Reads every ``xlt cka compare`` output (``format: xlt-cka/1``) in the results directory, keyed by
its ``label`` (``en-fr``) and ``column`` (``Bilingual``, ``Monolingual``, ``Random``), so file names
do not matter; a column that is not there is a gap. Rows L0..Ln and AVER (the mean over layers).
"""

from __future__ import annotations

import os
from typing import Callable, Optional, Sequence

from xlt.analysis.cka_files import COLUMN_FORMAT as CKA_FORMAT, check_column
from xlt.report import paper as paper_numbers
from xlt.report.findings import Inconclusive, Verdict, check, decide, require
from xlt.report.plots import Panel, Series, per_layer
from xlt.report.render import Cell, ReportTable
from xlt.report.sources import results_of_format
from xlt.utils import log
from xlt.utils.errors import XltError

COLUMNS = ("Bilingual", "Monolingual", "Random")
# columns[(pair, column)] = {"layers": [0..n], "values": [...], "average": float}
Columns = dict[tuple[str, str], dict]


def collect(results_dir: str) -> Columns:
    """Every CKA column in ``results_dir``; they must be one measure (estimator, pooling) over the same
    layers, or the AVER row would compare means over different layers, or different measures."""
    columns: Columns = {}
    first: Optional[tuple[str, dict]] = None
    for path, data in results_of_format([os.path.join(results_dir, "*.json")], CKA_FORMAT, check_column):
        key = (data["label"], data["column"])
        if key in columns:
            log.info(f"xlt report: {path}: a second {key[0]} {key[1]} column; this one is used")
        measure = {"layers": data["layers"], "estimator": data.get("estimator", "linear"),
                   "pooling": data.get("pooling")}
        if first is None:
            first = (path, measure)
        for name, value in measure.items():
            if value != first[1][name]:
                raise XltError(f"{name} {value} differ{'' if name == 'layers' else 's'} from {first[0]}'s {first[1][name]}: one table compares "
                               "one measure over the same layers", path)
        columns[key] = {"values": data["cka"], "average": data["average"], "n": data.get("n"), "path": path,
                        **measure}
    return columns


def paper_columns(data: dict) -> Columns:
    pairs = data["wu2020_figure7"]["pairs"]
    return {(pair, column): {"layers": list(range(len(v["layers"]))), "values": v["layers"], "average": v["average"]}
            for pair, cols in pairs.items() for column, v in cols.items()}


def build(results_dir: str, languages: Sequence[str], numbers: Optional[dict] = None
          ) -> tuple[ReportTable, Callable[[str], None]]:
    data = numbers or paper_numbers.load()
    ours, theirs = collect(results_dir), paper_columns(data)
    pairs = [f"en-{lang}" for lang in languages]
    layers = next((c["layers"] for c in ours.values()), None) or list(range(9))
    table = ReportTable(name="figure7", title="Wu et al. (2020) Figure 7: CKA of mean-pooled parallel sentences",
                        stub="Layer", groups=[(pair, list(COLUMNS)) for pair in pairs], digits=2,
                        source=paper_numbers.describe(data["wu2020_figure7"]["source"]))
    for i, layer in enumerate([*layers, "AVER"]):
        cells = []
        for pair in pairs:
            for column in COLUMNS:
                mine, paper = ours.get((pair, column)), theirs.get((pair, column))
                cells.append(Cell(value=_at(mine, i, layers), paper=_at(paper, i, layers),
                                  gap=None if mine else f"no `xlt cka compare` output for {pair} {column}"))
        table.add_row(f"L{layer}" if layer != "AVER" else "AVER", cells)
    n = sorted({c["n"] for c in ours.values() if c.get("n")})
    left_out = [p for p in data["wu2020_figure7"]["pairs"] if p not in pairs]
    measure = next(iter(ours.values()), {"estimator": "linear", "pooling": None})
    table.remarks = [f"{str(measure['estimator']).capitalize()} CKA of sentences pooled by "
                     f"{measure['pooling'] or 'mean over subwords, specials excluded'}; "
                     f"n = {', '.join(map(str, n)) or '?'} parallel sentences. "
                     "Random: the non-English side through a randomly initialised encoder."]
    if left_out:
        table.remarks.append(f"The paper's {', '.join(left_out)} "
                             f"{'column is' if len(left_out) == 1 else 'columns are'} not part of this table"
                             + (" (en-en' compares English with its back-translation, which needs a translation "
                                "system outside this pipeline)." if "en-en'" in left_out else "."))
    mine_avg = {k: v["average"] for k, v in ours.items()}
    paper_avg = {k: v["average"] for k, v in theirs.items()}
    table.findings = [
        check("CKA orders Bilingual > Monolingual > Random (AVER row) for every pair.",
              lambda avg: ordered(avg, pairs), mine_avg, paper_avg),
        check("The Bilingual - Monolingual gap shrinks as languages get more distant: fr > ru > zh.",
              shrinking_gap, mine_avg, paper_avg),
    ]

    def plot(output_dir: str) -> None:
        panels = []
        for pair in pairs:
            panel = Panel(pair)
            for color, column in enumerate(COLUMNS):
                for source, dashed, name in ((ours, False, "xlt"), (theirs, True, "paper")):
                    col = source.get((pair, column))
                    if col:
                        panel.series.append(Series(f"{column} ({name})", col["layers"], col["values"], color, dashed))
            panels.append(panel)
        per_layer(panels, os.path.join(output_dir, "figure7.png"), "linear CKA", table.title)

    return table, plot


def _at(column: Optional[dict], i: int, layers: Sequence[int]) -> Optional[float]:
    """Row ``i`` of a column (the last row is the average); None when its layers differ from the table's."""
    if not column:
        return None
    if i == len(layers):
        return column["average"]
    return column["values"][i] if list(column["layers"]) == list(layers) else None


def ordered(avg: dict, pairs: Sequence[str]) -> Verdict:
    broken, seen = [], []
    for pair in pairs:
        values = [require(avg.get((pair, c)), f"{pair} {c}") for c in COLUMNS]
        seen.append(f"{pair} " + ", ".join(f"{c} {v:.2f}" for c, v in zip(COLUMNS, values)))
        if not values[0] > values[1] > values[2]:
            broken.append(pair)
    return decide(not broken, "; ".join(seen) + (f" (fails for {', '.join(broken)})" if broken else ""))


def shrinking_gap(avg: dict) -> Verdict:
    gaps = {}
    for lang in ("fr", "ru", "zh"):
        pair = f"en-{lang}"
        if (pair, "Bilingual") not in avg or (pair, "Monolingual") not in avg:
            raise Inconclusive(f"needs the Bilingual and Monolingual columns of en-fr, en-ru and en-zh ({pair} missing)")
        gaps[lang] = avg[pair, "Bilingual"] - avg[pair, "Monolingual"]
    detail = ", ".join(f"{lang} {g:+.2f}" for lang, g in gaps.items())
    return decide(gaps["fr"] > gaps["ru"] > gaps["zh"], f"Bilingual - Monolingual: {detail}")
