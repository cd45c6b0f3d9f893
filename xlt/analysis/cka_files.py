"""The files of ``xlt cka``: one column per comparison (``xlt cka compare``), a table of columns (``xlt cka table``).

* column ``OUT.json`` (format ``xlt-cka/1``): ``label``, ``column``, ``estimator``, ``pooling``, ``n``,
  ``layers`` [L], ``cka`` [L], ``average``, ``matrix`` [L, L] or null, the two sides, ``retrieval``;
* table ``OUT.json`` (format ``xlt-cka-table/1``): ``rows`` (L0..Ln, AVER) and one entry per column
  with its ``values`` [L+1]; ``OUT.tsv`` the same in Figure 7's layout (two header lines).

The command then draws ``OUT.png`` and prints the table (:mod:`xlt.report.cka_plots`, a layer above
this one). Every file goes through a temporary name. Shapes: L layers.
"""

from __future__ import annotations

import os
from numbers import Real
from typing import Callable, Sequence

import numpy as np

from xlt.utils.errors import PathLike, XltError, require_distinct
from xlt.utils.outputs import json_text, written_together
from xlt.utils.shapes import ListOf, matches
from xlt.utils.textio import read_json

COLUMN_FORMAT = "xlt-cka/1"
TABLE_FORMAT = "xlt-cka-table/1"


def check_column(col: dict, path: PathLike) -> dict:
    """``col`` (an ``xlt cka compare`` output) if it has what the tables read, else XltError naming ``path``
    (a damaged or hand-edited file is one error line, not a KeyError)."""
    layers, values = col.get("layers"), col.get("cka")
    if not all(isinstance(col.get(k), str) for k in ("label", "column")):
        raise XltError("malformed CKA column: no 'label' and 'column' names", path)
    if not isinstance(layers, list) or not isinstance(values, list) or len(layers) != len(values) or not values \
            or not all(isinstance(v, Real) for v in [*values, col.get("average")]):
        raise XltError("malformed CKA column: 'layers', 'cka' and 'average' must be one number per layer "
                       "and their mean", path)
    if not matches(layers, ListOf(int)) or not matches(col.get("n"), (int, None)):
        raise XltError("malformed CKA column: 'layers' must be layer numbers and 'n' a count", path)
    retrieval = col.get("retrieval")
    if retrieval is not None and not (isinstance(retrieval, dict) and matches(retrieval.get("pearson"), (float, None))):
        raise XltError("malformed CKA column: 'retrieval' must be null or an object with a 'pearson' number", path)
    return col


def assemble_table(paths: Sequence[str]) -> dict:
    """Figure 7 layout from column files: rows L0..Ln and AVER, one column per file."""
    columns, layers, method = [], None, None
    require_distinct(paths, "CKA column file")
    for path in paths:
        col = check_column(read_json(path, "xlt cka compare output", format=COLUMN_FORMAT), path)
        if layers is None:
            layers = col["layers"]
        elif col["layers"] != layers:
            raise XltError(f"layers {col['layers']} differ from the first column's {layers}", path)
        # side by side, columns must be the same measure: a debiased estimate, or </s> pooled in, moves it
        this = {"estimator": col.get("estimator"), "pooling": col.get("pooling")}
        if method is None:
            method = this
        elif this != method:
            key = next(k for k in this if this[k] != method[k])
            raise XltError(f"{key} {this[key]!r} differs from the first column's {method[key]!r}", path)
        columns.append({"label": col["label"], "column": col["column"], "estimator": col.get("estimator"),
                        "pooling": col.get("pooling"), "n": col.get("n"), "values": col["cka"] + [col["average"]], "source": os.path.abspath(path),
                        "pearson_retrieval": (col.get("retrieval") or {}).get("pearson")})
    if not columns:
        raise XltError("no CKA column files given")
    return {"format": TABLE_FORMAT, "rows": [f"L{layer}" for layer in layers] + ["AVER"], "columns": columns}


def write_column(result: dict, output: str, draw: Callable[[dict, str], None]) -> None:
    """``OUT.json`` and ``draw(result, OUT.png)``; the JSON (make's target) lands last."""
    with written_together({output + ".json": json_text(result)}):
        draw(result, output + ".png")


def write_table(table: dict, output: str, draw: Callable[[dict, str], None]) -> None:
    """``OUT.json``, ``OUT.tsv`` (Figure 7 layout) and ``draw(table, OUT.png)``; the JSON lands last."""
    values = np.array([c["values"] for c in table["columns"]]).T  # [L+1, columns]
    lines = ["\t" + "\t".join(c["label"] for c in table["columns"]),
             "\t" + "\t".join(c["column"] for c in table["columns"])]
    lines += [row + "\t" + "\t".join(f"{v:.4f}" for v in line) for row, line in zip(table["rows"], values)]
    with written_together({output + ".json": json_text(table), output + ".tsv": "\n".join(lines) + "\n"}):
        draw(table, output + ".png")
