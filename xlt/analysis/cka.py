"""Linear centered kernel alignment (Kornblith et al. 2019), as Wu et al. (2020, §5.2) use it.

Two implementations of the same quantity, which the tests hold to agree:

* feature space (what :func:`cka` uses, cheap for n >> d)::

      CKA(X, Y) = ||YᵀX||²_F / (||XᵀX||_F ||YᵀY||_F)      X, Y centred over the n rows

* Gram-matrix form: HSIC between the centred linear kernels K = XXᵀ, L = YYᵀ
  (:func:`cka_from_grams`, O(n²) memory, the definition the estimator is derived from).

``debiased=True`` replaces HSIC by the unbiased estimator of Song et al. (2012), as Nguyen et al.
(2021) recommend when d is not small next to n: diagonals of K and L are zeroed and
HSIC₁ = [tr(K̃L̃) + 1ᵀK̃1·1ᵀL̃1/((n-1)(n-2)) - 2/(n-2)·1ᵀK̃L̃1] / (n(n-3)).
Both forms follow the arithmetic of Kornblith et al.'s reference notebook (google-research
``representation_similarity``), in float64.

Shapes: n rows (parallel sentences), d / d' features; L layers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from numbers import Real
from typing import Optional, Sequence

import numpy as np

from xlt.utils import log
from xlt.utils.errors import PathLike, XltError, require_file
from xlt.utils.textio import atomic_output, atomic_path, read_json, read_lines, write_json


def _as_float64(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"expected a matrix [n, d], got shape {X.shape}")
    return X


def _check_rows(X: np.ndarray, Y: np.ndarray, debiased: bool) -> int:
    n = X.shape[0]
    if Y.shape[0] != n:
        raise XltError(f"CKA needs the same number of rows on both sides, got {n} and {Y.shape[0]}")
    if n < (4 if debiased else 2):
        raise XltError(f"CKA needs at least {4 if debiased else 2} rows, got {n}")
    return n


class FeatureStats:
    """A centred representation [n, d] with what every CKA against it reuses.

    Attributes: ``centred`` float64 [n, d]; ``row_sq`` squared row norms [n] (= diag of the Gram
    matrix); ``self_similarity`` ||XᵀX||²_F, or its debiased counterpart.
    """

    def __init__(self, X: np.ndarray, debiased: bool = False):
        self.centred = _as_float64(X) - np.mean(X, axis=0, dtype=np.float64)
        self.debiased = debiased
        self.row_sq = np.einsum("ij,ij->i", self.centred, self.centred)
        gram_frobenius_sq = float(np.linalg.norm(self.centred.T @ self.centred) ** 2)
        self.self_similarity = self._adjust(gram_frobenius_sq, self) if debiased else gram_frobenius_sq

    def _adjust(self, cross: float, other: "FeatureStats") -> float:
        """Turn ||YᵀX||²_F of centred features into n(n-3)·HSIC₁ (the unbiased estimator, scaled).

        With centred features 1ᵀK1 = 0, so tr(K̃L̃), 1ᵀK̃1 and 1ᵀK̃L̃1 reduce to the row-norm terms below.
        """
        n = self.centred.shape[0]
        return (cross - n / (n - 2.0) * float(self.row_sq @ other.row_sq)
                + float(self.row_sq.sum()) * float(other.row_sq.sum()) / ((n - 1.0) * (n - 2.0)))

    def similarity(self, other: "FeatureStats") -> float:
        """CKA between this representation and ``other`` (same n, same estimator)."""
        _check_rows(self.centred, other.centred, self.debiased)
        cross = float(np.linalg.norm(other.centred.T @ self.centred) ** 2)
        if self.debiased:
            cross = self._adjust(cross, other)
        denominator = np.sqrt(self.self_similarity * other.self_similarity)
        if denominator == 0.0:
            raise XltError("CKA is undefined: one representation is constant over all rows")
        return float(cross / denominator)


def cka(X: np.ndarray, Y: np.ndarray, debiased: bool = False) -> float:
    """Linear CKA between X [n, d] and Y [n, d'] (feature-space form)."""
    _check_rows(np.asarray(X), np.asarray(Y), debiased)
    return FeatureStats(X, debiased).similarity(FeatureStats(Y, debiased))


def center_gram(K: np.ndarray, debiased: bool = False) -> np.ndarray:
    """Centre a Gram matrix [n, n]: HKH, or the U-centring of the unbiased estimator (zero diagonal)."""
    K = np.array(K, dtype=np.float64)  # a copy: centring works in place
    n = K.shape[0]
    if debiased:
        np.fill_diagonal(K, 0.0)
        means = K.sum(axis=0) / (n - 2.0)
        means -= means.sum() / (2.0 * (n - 1.0))
        K -= means[:, None]
        K -= means[None, :]
        np.fill_diagonal(K, 0.0)
    else:
        means = K.mean(axis=0)
        means -= means.mean() / 2.0
        K -= means[:, None]
        K -= means[None, :]
    return K


def cka_from_grams(K: np.ndarray, L: np.ndarray, debiased: bool = False) -> float:
    """CKA from two Gram matrices [n, n] (any kernel; XXᵀ and YYᵀ give linear CKA)."""
    _check_rows(K, L, debiased)
    Kc, Lc = center_gram(K, debiased), center_gram(L, debiased)
    return float(Kc.ravel() @ Lc.ravel() / (np.linalg.norm(Kc) * np.linalg.norm(Lc)))


def cka_gram_form(X: np.ndarray, Y: np.ndarray, debiased: bool = False) -> float:
    """Linear CKA through the Gram matrices XXᵀ and YYᵀ (O(n²) memory; a cross-check of :func:`cka`)."""
    X, Y = _as_float64(X), _as_float64(Y)
    return cka_from_grams(X @ X.T, Y @ Y.T, debiased)


def per_layer_cka(A: np.ndarray, B: np.ndarray, debiased: bool = False, matrix: bool = False) -> np.ndarray:
    """CKA of two stacks of layer representations A [L, n, d], B [L', n, d'].

    Returns [L] (layer i of A against layer i of B; needs L == L') or, with ``matrix``, [L, L']
    (every layer of A against every layer of B).
    """
    if A.shape[1] != B.shape[1]:
        raise XltError(f"CKA needs the same sentences on both sides, got {A.shape[1]} and {B.shape[1]}")
    if not matrix and A.shape[0] != B.shape[0]:
        raise XltError(f"per-layer CKA needs as many layers on both sides, got {A.shape[0]} and {B.shape[0]}")
    if not matrix:  # one layer pair in memory at a time
        return np.array([FeatureStats(A[i], debiased).similarity(FeatureStats(B[i], debiased))
                         for i in range(A.shape[0])])
    stats_a = [FeatureStats(A[i], debiased) for i in range(A.shape[0])]  # float64 copies: L x n x d x 8 B
    out = np.empty((A.shape[0], B.shape[0]))
    for j in range(B.shape[0]):
        stats_b = FeatureStats(B[j], debiased)
        out[:, j] = [s.similarity(stats_b) for s in stats_a]
    return out


def pearson(x: Sequence[float], y: Sequence[float]) -> float:
    """Pearson correlation of two equally long sequences (at least 3 values, neither constant)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.shape != y.shape or x.size < 3:
        raise XltError(f"a correlation needs two sequences of at least 3 values, got {x.size} and {y.size}")
    if np.std(x) == 0 or np.std(y) == 0:
        raise XltError("a correlation with a constant sequence is undefined")
    return float(np.corrcoef(x, y)[0, 1])


# ---- Figure 7: one column per comparison, then a table of columns ------------------------------

COLUMN_FORMAT = "xlt-cka/1"
TABLE_FORMAT = "xlt-cka-table/1"


@dataclass
class Side:
    """One side of a comparison: sentences of one language through one model.

    Either ``reps`` (an ``xlt extract`` sentence-level output prefix) or ``run`` + ``lang`` + ``text``;
    ``run`` is any ``--model``: an xlt run, a transformers directory or ``hf:NAME``.
    ``random_seed``: use a randomly initialised model of the run's architecture (the lower bound).
    """

    run: Optional[str] = None
    lang: Optional[str] = None
    text: Optional[str] = None
    random_seed: Optional[int] = None
    reps: Optional[str] = None

    @property
    def source(self) -> str:
        return self.reps or self.text

    def describe(self) -> dict:
        if self.reps:
            return {"reps": os.path.abspath(self.reps)}
        from xlt.model.protocol import model_source

        return {"run": model_source(self.run), "lang": self.lang, "text": os.path.abspath(self.text),
                "model": "pretrained" if self.random_seed is None else f"random:{self.random_seed}"}


@dataclass
class CompareSettings:
    layers: Optional[list[int]] = None
    debiased: bool = False
    matrix: bool = False
    n_sentences: Optional[int] = None
    include_specials: bool = False
    checkpoint: str = "best"
    batch_size: int = 32
    device: str = "cpu"

    def __post_init__(self) -> None:
        # A negative count would slice off the last rows instead of keeping the first ones.
        if self.n_sentences is not None and self.n_sentences < 1:
            raise XltError(f"--n-sentences must be at least 1, got {self.n_sentences}")


def _length(side: Side) -> int:
    """Sentences of a side: lines of its text, or rows of its extraction."""
    if side.reps:
        return _reps_header(side.reps)[1]["count"]
    require_file(side.text, "text file")
    return sum(1 for _ in read_lines(side.text))


def _reps_header(prefix: str) -> tuple[str, dict]:
    """The prefix (without ``.npy``) and header of an ``xlt extract`` sentence-level output."""
    prefix = prefix[:-4] if prefix.endswith(".npy") else prefix
    header_path = prefix + ".json"
    header = read_json(header_path, "extract header")
    if header.get("level") != "sentence":
        raise XltError(f"CKA compares sentence-level representations, this is {header.get('level')!r}", header_path)
    return prefix, header


def _load_reps(prefix: str, layers: Optional[list[int]], n: int) -> tuple[np.ndarray, list[int], dict]:
    """An ``xlt extract`` sentence-level output -> (its first ``n`` rows [L, n, D], layers, header)."""
    prefix, header = _reps_header(prefix)
    stored = header["layers"]
    wanted = stored if layers is None else layers
    missing = [layer for layer in wanted if layer not in stored]
    if missing:
        raise XltError(f"layer {missing[0]} is not in this extraction (layers {stored})", prefix + ".json")
    vectors = np.load(require_file(prefix + ".npy", "representations"), mmap_mode="r")
    return np.stack([vectors[stored.index(layer), :n] for layer in wanted]), wanted, header


def _compute_side(side: Side, settings: CompareSettings, n: int, runs: dict) -> tuple[np.ndarray, list[int]]:
    from xlt.analysis.extract import load_model, resolve_layers, sentence_vectors
    from xlt.model.protocol import load_text_model

    if side.reps:
        reps, layers, _ = _load_reps(side.reps, settings.layers, n)
        return reps, layers
    if side.run not in runs:
        runs[side.run] = load_text_model(side.run, settings.checkpoint, settings.device)
    run = runs[side.run]
    run.check_language(side.lang)
    layers = resolve_layers(run.n_layers, settings.layers)
    lines = [line for _, line in zip(range(n), read_lines(side.text))]
    reps = sentence_vectors(run, side.lang, lines, layers, settings.batch_size, settings.device,
                            settings.include_specials, load_model(run, side.random_seed), source=side.text)
    return reps, layers


def retrieval_correlation(path: str, layers: list[int], values: Sequence[float]) -> dict:
    """Pearson r between per-layer CKA and a sentence-retrieval file ``{"layers": [...], "p_at_1": [...]}``."""
    result = read_json(path, "retrieval result")
    try:
        by_layer = dict(zip((int(x) for x in result["layers"]), (float(x) for x in result["p_at_1"])))
        if len(result["layers"]) != len(result["p_at_1"]):
            raise ValueError("layers and p_at_1 differ in length")
    except (ValueError, KeyError, TypeError) as e:
        raise XltError(f'expected {{"layers": [...], "p_at_1": [...]}} ({e})', path) from None
    common = [i for i, layer in enumerate(layers) if layer in by_layer]
    if len(common) < 3:
        raise XltError(f"needs at least 3 layers in common with the CKA layers {layers}", path)
    p_at_1 = [by_layer[layers[i]] for i in common]
    return {"file": os.path.abspath(path), "layers": [layers[i] for i in common], "p_at_1": p_at_1,
            "pearson": pearson([values[i] for i in common], p_at_1)}


def compare(a: Side, b: Side, settings: CompareSettings, label: str, column: str,
            retrieval: Optional[str] = None) -> dict:
    """One Figure 7 column: per-layer CKA of the same n parallel sentences on sides ``a`` and ``b``."""
    length_a, length_b = _length(a), _length(b)
    if length_a != length_b:
        raise XltError(f"parallel inputs differ in length: {a.source} has {length_a} sentences, "
                       f"{b.source} has {length_b}")
    n = min(length_a, settings.n_sentences) if settings.n_sentences else length_a
    least = 4 if settings.debiased else 2
    if n < least:  # found out here, not after encoding (with numpy's warnings about empty means first)
        raise XltError(f"CKA needs at least {least} parallel sentences, {a.source} has {n}")
    runs: dict = {}
    A, layers_a = _compute_side(a, settings, n, runs)
    B, layers_b = _compute_side(b, settings, n, runs)
    if layers_a != layers_b:
        raise XltError(f"the two sides have different layers ({layers_a} and {layers_b}); pass --layers")
    values = per_layer_cka(A, B, settings.debiased)
    result = {
        "format": COLUMN_FORMAT, "label": label, "column": column,
        "estimator": "debiased" if settings.debiased else "linear",
        "pooling": "mean over subwords, " + ("</s> included" if settings.include_specials else "specials excluded"),
        "n": int(A.shape[1]), "layers": layers_a, "cka": values.tolist(), "average": float(values.mean()),
        "matrix": per_layer_cka(A, B, settings.debiased, matrix=True).tolist() if settings.matrix else None,
        "a": a.describe(), "b": b.describe(), "retrieval": None,
    }
    if retrieval:
        result["retrieval"] = retrieval_correlation(retrieval, layers_a, values)
    return result


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
    return col


def assemble_table(paths: Sequence[str]) -> dict:
    """Figure 7 layout from column files: rows L0..Ln and AVER, one column per file."""
    columns, layers = [], None
    for path in paths:
        col = check_column(read_json(path, "xlt cka compare output", format=COLUMN_FORMAT), path)
        if layers is None:
            layers = col["layers"]
        elif col["layers"] != layers:
            raise XltError(f"layers {col['layers']} differ from the first column's {layers}", path)
        columns.append({"label": col["label"], "column": col["column"], "estimator": col.get("estimator"),
                        "n": col.get("n"), "values": col["cka"] + [col["average"]], "source": os.path.abspath(path),
                        "pearson_retrieval": (col.get("retrieval") or {}).get("pearson")})
    if not columns:
        raise XltError("no CKA column files given")
    return {"format": TABLE_FORMAT, "rows": [f"L{layer}" for layer in layers] + ["AVER"], "columns": columns}


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


def write_column(result: dict, output: str) -> None:
    """``OUT.json`` and ``OUT.png`` (the layer x layer matrix if computed, else the column) + table on stdout."""
    rows = [f"L{layer}" for layer in result["layers"]]
    header = f"{result['label']} {result['column']}".strip()
    write_json(output + ".json", result)
    if result["matrix"] is not None:
        heatmap(result["matrix"], rows, rows, output + ".png", f"{header}: layer of A (rows) x layer of B")
    else:
        heatmap(np.array(result["cka"] + [result["average"]])[:, None], rows + ["AVER"], [header],
                output + ".png", f"CKA ({result['estimator']})")
    print_table(rows + ["AVER"], [header], [result["cka"] + [result["average"]]],
                f"CKA ({result['estimator']}, n={result['n']})")


def write_table(table: dict, output: str) -> None:
    """``OUT.json``, ``OUT.tsv`` (Figure 7 layout), ``OUT.png`` + table on stdout."""
    headers = [f"{c['label']}\n{c['column']}" for c in table["columns"]]
    values = np.array([c["values"] for c in table["columns"]]).T
    write_json(output + ".json", table)
    with atomic_output(output + ".tsv") as f:
        f.write("\t" + "\t".join(c["label"] for c in table["columns"]) + "\n")
        f.write("\t" + "\t".join(c["column"] for c in table["columns"]) + "\n")
        for row, line in zip(table["rows"], values):
            f.write(row + "\t" + "\t".join(f"{v:.4f}" for v in line) + "\n")
    heatmap(values, table["rows"], headers, output + ".png", "CKA of mean-pooled parallel sentences")
    print_table(table["rows"], [h.replace("\n", " ") for h in headers], values.T, "CKA")
