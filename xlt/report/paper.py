"""The papers' own numbers (``paper_numbers.json`` beside this module), with their sources.

The file holds one section per reproduced table or figure; each names its source (citation, table
or figure, and the lines of the text conversion in the project's shared papers folder). Reports
print the source under every table. :func:`load` checks the parts the reports rely on, so a broken
file is one error line naming it, not a KeyError in the middle of a report.
"""

from __future__ import annotations

import os
from typing import Any, Optional

from xlt.utils.errors import XltError
from xlt.utils.shapes import ListOf, MapOf, matches, require_fields
from xlt.utils.textio import read_json

PAPER_NUMBERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "paper_numbers.json")
FORMAT = "xlt-paper-numbers/1"
SECTIONS = ("wu2020_table1", "wu2020_figure7", "wu2020_alignment", "liu2020_table2", "liu2020_table4")
TABLE1_TASKS = ("xnli", "ner", "parse")
LIU_ALPHAS = ("1", "2", "3")   # Table 2's convert rates, by shifting weight α
LIU_TABLE4_ROWS = ("finetune_all_layers", "finetune_last_6_layers", "finetune_last_6_layers_mds")


def load(path: Optional[str] = None) -> dict[str, Any]:
    """The numbers file (default: the one shipped with xlt), checked; XltError naming it otherwise."""
    path = path or PAPER_NUMBERS
    data = read_json(path, "paper numbers file", format=FORMAT)
    for section in SECTIONS:
        if not isinstance(data.get(section), dict) or "source" not in data[section]:
            raise XltError(f"section {section!r} with a 'source' is missing", path)
        source = require_fields(data[section]["source"], {"citation": str, "where": str}, path, f"{section}'s source",
                                optional={"file": (str, None), "lines": (ListOf(int), None)})
        if source.get("lines") is not None and len(source["lines"]) != 2:
            raise XltError(f"{section}'s source: 'lines' needs two numbers, the first and the last line", path)
    figure7 = MapOf(MapOf(dict))   # pair -> column -> {"layers": [...], "average": ...}
    require_fields(data["wu2020_figure7"], {"pairs": figure7}, path, "wu2020_figure7")
    for pair, columns in data["wu2020_figure7"]["pairs"].items():
        for column, values in columns.items():
            require_fields(values, {"layers": ListOf(float), "average": float}, path, f"Figure 7's {pair} {column}")
    _check_table1(data, path)
    _check_liu(data, path)
    return data


def _check_table1(data: dict[str, Any], path: str) -> None:
    """Table 1: every row named, with a number per language and the average for each task."""
    table = require_fields(data["wu2020_table1"], {"languages": ListOf(str), "rows": ListOf(dict)}, path,
                           "wu2020_table1")
    languages = table["languages"]
    for row in table["rows"]:
        require_fields(row, {"row": str}, path, "a Table 1 row")
        for task in TABLE1_TASKS:
            cells = row.get(task)
            if not isinstance(cells, dict) or any(not matches(cells.get(k), float) for k in [*languages, "avg"]):
                raise XltError(f"Table 1 row {row['row']!r}: {task} needs a number for each of "
                               f"{', '.join(languages)} and avg", path)


def _check_liu(data: dict[str, Any], path: str) -> None:
    """Liu et al.'s Table 2 (per direction) and Table 4 (per fine-tuning row) as the reports read them."""
    table2 = data["liu2020_table2"]
    require_fields(table2, {"directions": MapOf(dict)}, path, "liu2020_table2")
    for direction, numbers in table2["directions"].items():
        require_fields(numbers, {"bleu1_layer11_alpha3": float, "convert_rate_layer10": MapOf(float)}, path,
                       f"Liu Table 2's {direction}", optional={"best_bleu1": float, "best_layer": int,
                                                                "best_alpha": float})
        if sorted(numbers["convert_rate_layer10"]) != list(LIU_ALPHAS):
            raise XltError(f"Liu Table 2's {direction}: convert_rate_layer10 needs exactly the α "
                           f"{', '.join(LIU_ALPHAS)}", path)
    table4 = data["liu2020_table4"]
    require_fields(table4, {"rows": MapOf(MapOf((float, None))), "shifting_weight": MapOf(float)}, path,
                   "liu2020_table4")
    missing = [row for row in LIU_TABLE4_ROWS if row not in table4["rows"]]
    if missing:
        raise XltError(f"liu2020_table4 needs the rows {', '.join(LIU_TABLE4_ROWS)}; missing: {', '.join(missing)}",
                       path)


def describe(source: dict[str, Any]) -> str:
    """One line: citation, where in the paper, and which lines of which text file."""
    text = f"{source['citation']}, {source['where']}"
    if source.get("file"):
        lines = source.get("lines")
        text += f" (text: {source['file']}" + (f", lines {lines[0]}-{lines[1]})" if lines else ")")
    return text


def table1_rows(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Row key (default, wiki-cc, ...) -> the paper's row, in the paper's order."""
    return {row["row"]: row for row in data["wu2020_table1"]["rows"]}
