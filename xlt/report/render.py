"""A report table and its four renderings: Markdown, CSV, LaTeX and JSON.

A :class:`ReportTable` holds rows of :class:`Cell` under groups of columns (Table 1: XNLI / NER /
Parsing, each with fr, ru, zh and the average). A cell carries xlt's number, the paper's number
where the paper prints one, and, instead of a number, the reason it is missing (a *gap*). Gaps and
remarks become numbered notes under the table, so a cell stays short: ``— [1]``.

* Markdown: ``xlt (paper)`` in each cell (``mean ± std (n=3)`` where several seeds ran), then the notes
  and the findings.
* CSV: long format, one line per cell (row, group, column, xlt, paper, gap, note, std, n): easy to load.
* LaTeX: a ``tabular`` with the groups as ``\\multicolumn`` headers (no package needed).
* JSON: everything, for other tools (``format: xlt-report/1``).

A report may hold further tables in the same files (``sections``: Table 1's English test scores
beside its zero-shot ones); the CSV then says which table each line belongs to in a first column.
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional

from xlt.report.findings import Finding
from xlt.utils.outputs import check_output_paths, directory_for_outputs, json_text, written_together

REPORT_FORMAT = "xlt-report/1"


@dataclass
class Cell:
    """One number of a table: xlt's, the paper's beside it, or the reason xlt's is missing."""

    value: Optional[float] = None   # None without a gap: not applicable, left blank
    paper: Optional[float] = None
    gap: Optional[str] = None    # why there is no value (shown as a note)
    note: Optional[str] = None   # a remark on a value that is there (e.g. an average over fewer languages)
    digits: Optional[int] = None  # decimals of this cell (default: the table's)
    std: Optional[float] = None   # the sample std over the seeds behind the value (None: one seed, or none)
    n: Optional[int] = None       # how many seeds (fine-tuning runs) the value is the mean of
    models: Optional[int] = None  # several pretraining seeds: the value is their models' mean, std over them

    def spread(self, digits: int, plus_minus: str = "±") -> str:
        """' ± 3.0 (n=3)' where the value is a mean over several seeds ('(2 models, n=6)' over several
        pretraining seeds), else ''."""
        if self.value is None or self.std is None or not self.n or (self.n < 2 and not self.models):
            return ""
        return f" {plus_minus} {number(self.std, digits)} ({f'{self.models} models, ' if self.models else ''}n={self.n})"


@dataclass
class ReportTable:
    """Rows of cells under column groups: ``groups[i] = (title, [column titles])``."""

    name: str                     # file stem: table1 -> table1.md, table1.csv, ...
    title: str
    stub: str                     # header of the row-label column
    groups: list[tuple[str, list[str]]]
    rows: list[tuple[str, list[Cell]]] = field(default_factory=list)
    digits: int = 1
    source: str = ""              # where the paper's numbers come from
    remarks: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    sections: list["ReportTable"] = field(default_factory=list)   # further tables in the same files
    part: str = ""                # this table's value in the CSV's first column when a report has sections
    part_column: str = "table"    # that column's header

    @property
    def columns(self) -> list[tuple[str, str]]:
        return [(group, column) for group, columns in self.groups for column in columns]

    def add_row(self, label: str, cells: list[Cell]) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"row {label!r} has {len(cells)} cells for {len(self.columns)} columns")
        self.rows.append((label, cells))

    def notes(self) -> dict[str, int]:
        """Every distinct gap reason and remark, numbered in reading order."""
        numbers: dict[str, int] = {}
        for _, cells in self.rows:
            for cell in cells:
                for text in (cell.gap, cell.note):
                    if text and text not in numbers:
                        numbers[text] = len(numbers) + 1
        return numbers


def number(value: Optional[float], digits: int) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def _markdown_cell(cell: Cell, digits: int, notes: dict[str, int]) -> str:
    digits = digits if cell.digits is None else cell.digits
    if cell.value is None and cell.gap is None and cell.paper is None:
        return ""  # not applicable (e.g. word-level alignment has no layers above the embeddings)
    if cell.value is None:
        text = "—" + (f" [{notes[cell.gap]}]" if cell.gap else "")
    else:
        text = number(cell.value, digits) + cell.spread(digits) + (f" [{notes[cell.note]}]" if cell.note else "")
    if cell.paper is not None:
        text += f" ({number(cell.paper, digits)})"
    return text


def _markdown_table(table: ReportTable) -> list[str]:
    """The table, its numbered notes (numbered per table), remarks and source."""
    notes = table.notes()
    header = [table.stub] + [f"{g} {c}".strip() for g, c in table.columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for label, cells in table.rows:
        lines.append("| " + " | ".join([label] + [_markdown_cell(c, table.digits, notes) for c in cells]) + " |")
    lines.append("")
    if notes:
        lines += [f"[{n}] {text}" for text, n in notes.items()] + [""]
    lines += [f"- {remark}" for remark in table.remarks]
    if table.source:
        lines.append(f"- Paper numbers: {table.source}")
    return lines


def markdown(table: ReportTable) -> str:
    seeds = any(cell.spread(1) for part in (table, *table.sections) for _, cells in part.rows for cell in cells)
    lines = [f"# {table.title}", "", "Cells: xlt's number" + (" (mean ± sample std over n fine-tuning seeds where n > 1; "
                                                              "over the models where a row has several pretraining "
                                                              "seeds)" if seeds else "")
             + ", the paper's in parentheses where it prints one; — marks a gap, [n] a note.", ""] + _markdown_table(table)
    for section in table.sections:
        lines += ["", f"## {section.title}", ""] + _markdown_table(section)
    if table.findings:
        lines += ["", "## Findings at this scale", ""]
        lines += [f"- **{f.verdict.upper()}**: {f.claim} xlt: {f.detail}. Paper: {f.paper_verdict}"
                  + (f" ({f.paper_detail})" if f.paper_detail else "") + "." for f in table.findings]
    return "\n".join(lines).rstrip() + "\n"


def csv_text(table: ReportTable) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    tagged = bool(table.sections)   # several tables in one long file: say which each line is from
    writer.writerow([table.part_column] * tagged + [table.stub.lower() or "row", "group", "column", "xlt", "paper",
                                                    "gap", "note", "std", "n", "models"])
    for part in (table, *table.sections):
        for label, cells in part.rows:
            for (group, column), cell in zip(part.columns, cells):
                writer.writerow([part.part] * tagged + [label, group, column, number(cell.value, 4),
                                                        number(cell.paper, 4), cell.gap or "", cell.note or "",
                                                        number(cell.std, 4), cell.n or "", cell.models or ""])
    return out.getvalue()


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                  "Δ": r"$\Delta$", "α": r"$\alpha$", "→": r"$\rightarrow$", "—": "--"}


def latex_escape(text: str) -> str:
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def latex(table: ReportTable) -> str:
    return "\\par\\medskip\n".join(_latex_table(part) for part in (table, *table.sections))


def _latex_table(table: ReportTable) -> str:
    notes = table.notes()
    n = len(table.columns)
    lines = [f"% {table.title} (xlt report; cells: xlt (paper))", r"\begin{tabular}{l" + "r" * n + "}", r"\hline"]
    if any(g for g, _ in table.groups):
        heads = [r"\multicolumn{%d}{c}{%s}" % (len(cols), latex_escape(g)) for g, cols in table.groups]
        lines.append(" & " + " & ".join(heads) + r" \\")
    lines.append(latex_escape(table.stub) + " & " + " & ".join(latex_escape(c) for _, c in table.columns) + r" \\")
    lines.append(r"\hline")
    for label, cells in table.rows:
        texts = [_latex_cell(c, table.digits, notes) for c in cells]
        lines.append(latex_escape(label) + " & " + " & ".join(texts) + r" \\")
    lines += [r"\hline", r"\end{tabular}"]
    lines += [r"\par{\footnotesize\textsuperscript{%d} %s}" % (k, latex_escape(text)) for text, k in notes.items()]
    return "\n".join(lines) + "\n"


def _latex_cell(cell: Cell, digits: int, notes: dict[str, int]) -> str:
    digits = digits if cell.digits is None else cell.digits
    if cell.value is None and cell.gap is None and cell.paper is None:
        return ""
    reason = cell.gap if cell.value is None else cell.note
    text = "--" if cell.value is None else number(cell.value, digits) + cell.spread(digits, r"$\pm$")
    if reason:
        text += r"\textsuperscript{%d}" % notes[reason]
    if cell.paper is not None:
        text += f" ({number(cell.paper, digits)})"
    return text


def _json_table(table: ReportTable) -> dict:
    return {"name": table.name, "title": table.title, "source": table.source, "part": table.part,
            "groups": [{"title": g, "columns": cols} for g, cols in table.groups],
            "rows": [{"label": label, "cells": [{"group": g, "column": c, **asdict(cell)}
                                                 for (g, c), cell in zip(table.columns, cells)]}
                     for label, cells in table.rows],
            "remarks": table.remarks}


def as_json(table: ReportTable) -> dict:
    return {"format": REPORT_FORMAT, **_json_table(table), "findings": [asdict(f) for f in table.findings],
            "sections": [_json_table(section) for section in table.sections]}


def write_report(table: ReportTable, output_dir: str, plot: Optional[Callable[[str], object]] = None) -> dict[str, str]:
    """``OUTPUT_DIR/<name>.{md,csv,tex,json}`` and ``plot(OUTPUT_DIR)``'s figure, all or none; returns kind -> path.

    Every file goes to its temporary first and the Markdown, which make targets, is renamed last: a
    disk that fills on the way leaves no Markdown claiming a report whose other files are missing.
    An output directory made here and left empty by a failure is removed again."""
    base = os.path.join(output_dir, table.name)
    paths = {"markdown": base + ".md", "csv": base + ".csv", "latex": base + ".tex", "json": base + ".json"}
    texts = {"markdown": markdown(table), "csv": csv_text(table), "latex": latex(table),
             "json": json_text(as_json(table))}
    with directory_for_outputs(output_dir):
        check_output_paths(*paths.values(), base + ".png")   # all or none: a directory in the way stops it first
        with written_together({paths[kind]: text for kind, text in texts.items()}):
            if plot is not None:
                plot(output_dir)
    return paths
