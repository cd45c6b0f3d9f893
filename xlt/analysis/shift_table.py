"""The tables of ``xlt shift-decode``: one sweep on stdout, and Liu et al.'s Table 2 from several.

A result file is checked before it is read (:func:`check_result`): it is usually xlt's own output,
but a damaged or hand-edited one must be one error line naming it, not a KeyError.
"""

from __future__ import annotations

import os
from numbers import Real
from typing import Optional, Sequence

from xlt.utils.errors import PathLike, XltError, require_distinct
from xlt.utils.log import print_table
from xlt.utils.outputs import json_text, write_json, written_together
from xlt.utils.textio import read_json

RESULT_FORMAT = "xlt-shift-decode/1"  # what ``translate`` writes (here: no torch import for xlt report)


def check_result(result: dict, path: PathLike) -> dict:
    """``result`` (a ``translate`` output) if it has what the tables read, else XltError naming ``path``."""
    def fail(what: str) -> XltError:
        return XltError(f"malformed shift-decode result: {what}", path)

    if not isinstance(result.get("src"), str) or not isinstance(result.get("tgt"), str):
        raise fail("no 'src' and 'tgt' languages")
    grid, best = result.get("grid"), result.get("best")
    if not isinstance(grid, list) or not grid:
        raise fail("no 'grid' of results")
    for entry in [*grid, best]:
        if not isinstance(entry, dict) or not isinstance(entry.get("layer"), int) or \
                not all(isinstance(entry.get(k), Real) for k in ("alpha", "bleu1")):
            raise fail(f"a grid entry without layer, alpha and bleu1: {entry!r}"[:200])
    if not all(isinstance(r.get("convert_rate"), Real) for r in grid):
        raise fail("a grid entry without a convert_rate number")
    return result


def read_result(path: str) -> dict:
    return check_result(read_json(path, "xlt shift-decode translate output", format=RESULT_FORMAT), path)


def assemble_table2(paths: Sequence[str], layer: int, alpha: float, cr_layer: Optional[int] = None) -> dict:
    """Liu et al.'s Table 2 from ``translate`` results: one column per direction."""
    cr_layer = layer if cr_layer is None else cr_layer
    columns = []
    require_distinct(paths, "translate result")
    for path in paths:
        result = read_result(path)
        cell = {(r["layer"], float(r["alpha"])): r for r in result["grid"]}
        if (layer, float(alpha)) not in cell:
            raise XltError(f"no result at layer {layer}, alpha {alpha:g} in this sweep", path)
        if not any(lay == cr_layer for lay, _ in cell):
            raise XltError(f"no result at --cr-layer {cr_layer} in this sweep", path)
        values = {f"BLEU-1 (layer={layer}, alpha={alpha:g})": cell[(layer, float(alpha))]["bleu1"],
                  "best BLEU-1": result["best"]["bleu1"], "best layer": result["best"]["layer"],
                  "best alpha": result["best"]["alpha"]}
        for (lay, a), r in sorted(cell.items()):
            if lay == cr_layer:
                values[f"convert rate (layer={cr_layer}, alpha={a:g})"] = r["convert_rate"]
        columns.append({"direction": f"{result['src']}->{result['tgt']}", "values": values,
                        "source": os.path.abspath(path)})
    if not columns:
        raise XltError("no shift-decode result files given")
    rows = list(dict.fromkeys(k for c in columns for k in c["values"]))
    return {"format": "xlt-shift-table/1", "rows": rows, "columns": columns}


def write_translate(result: dict, output: str) -> None:
    """``OUT.json`` and a layer x alpha table of "BLEU-1 / convert rate" on stdout."""
    write_json(output, result)
    alphas = sorted({r["alpha"] for r in result["grid"]})
    cell = {(r["layer"], r["alpha"]): f"{r['bleu1']:.2f} / {r['convert_rate']:.3f}" for r in result["grid"]}
    layers = sorted({r["layer"] for r in result["grid"]})
    print_table(f"{result['src']}->{result['tgt']}: BLEU-1 / convert rate (n={result['n']})",
                ["layer"] + [f"alpha={a:g}" for a in alphas],
                [[str(layer)] + [cell.get((layer, a), "-") for a in alphas] for layer in layers])


def write_table2(table: dict, output: str) -> None:
    """``OUT.json``, ``OUT.tsv`` (Table 2 layout) and the table on stdout."""
    def fmt(v):
        return "-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)

    headers = [""] + [c["direction"] for c in table["columns"]]
    rows = [[row] + [fmt(c["values"].get(row)) for c in table["columns"]] for row in table["rows"]]
    tsv = "".join("\t".join(line) + "\n" for line in [headers] + rows)
    with written_together({output + ".json": json_text(table), output + ".tsv": tsv}):   # the JSON, make's, last
        pass
    print_table("Unsupervised token translation", headers, rows)
