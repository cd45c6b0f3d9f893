"""The figures and printed tables of ``xlt cka`` (matplotlib, Agg backend): a CKA column or a Figure 7 table
as an annotated heatmap, and the same numbers as a table on stdout.

The files themselves (JSON, TSV) are :mod:`xlt.analysis.cka_files`; this module only draws and prints.
Shapes: L layers, C columns.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from xlt.utils import log
from xlt.utils.outputs import atomic_path


def heatmap(values: np.ndarray, row_labels: Sequence[str], column_labels: Sequence[str], path: str,
            title: str = "") -> None:
    """Annotated heatmap [rows, columns] written as a PNG (Agg backend), atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    values = np.asarray(values, dtype=float)
    fig, ax = plt.subplots(figsize=(1.0 + 0.9 * values.shape[1], 1.0 + 0.45 * values.shape[0]))
    image = ax.imshow(values, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(values.shape[1]), labels=list(column_labels), fontsize=8)
    ax.set_yticks(range(values.shape[0]), labels=list(row_labels), fontsize=8)
    for (i, j), v in np.ndenumerate(values):
        ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="white" if v < 0.6 else "black")
    fig.colorbar(image, ax=ax, fraction=0.05)
    if title:
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)


def print_table(rows: Sequence[str], headers: Sequence[str], columns: Sequence[Sequence[float]], title: str) -> None:
    """A rich table on stdout: one row per layer (and the average), one column per comparison."""
    log.print_table(title, ["layer", *headers], [[row, *(f"{col[i]:.3f}" for col in columns)]
                                                  for i, row in enumerate(rows)])


def show_column(result: dict, png: str) -> None:
    """An ``xlt cka compare`` column: its heatmap (the layer x layer matrix if computed, else the column
    [L+1, 1] with AVER) written to ``png``, and its table printed."""
    rows = [f"L{layer}" for layer in result["layers"]]
    header = f"{result['label']} {result['column']}".strip()
    if result["matrix"] is not None:
        heatmap(result["matrix"], rows, rows, png, f"{header}: layer of A (rows) x layer of B")
    else:
        heatmap(np.array(result["cka"] + [result["average"]])[:, None], rows + ["AVER"], [header], png,
                f"CKA ({result['estimator']})")
    print_table(rows + ["AVER"], [header], [result["cka"] + [result["average"]]],
                f"CKA ({result['estimator']}, n={result['n']})")


def show_table(table: dict, png: str) -> None:
    """A Figure 7 table: heatmap [L+1, C] written to ``png``, and the table printed."""
    headers = [f"{c['label']}\n{c['column']}" for c in table["columns"]]
    values = np.array([c["values"] for c in table["columns"]]).T
    heatmap(values, table["rows"], headers, png, "CKA of mean-pooled parallel sentences")
    print_table(table["rows"], [h.replace("\n", " ") for h in headers], values.T, "CKA")
