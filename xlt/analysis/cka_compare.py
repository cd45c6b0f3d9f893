"""One Figure 7 column (Wu et al., 2020, §5.2): per-layer linear CKA of the same parallel sentences on two sides.

A side is a model's sentence vectors of one language -- computed here from text (any ``--model``:
an xlt run, a transformers directory, ``hf:NAME``; or a random model of its architecture) or read
from an ``xlt extract`` sentence-level output (``--reps``). Both sides must be pooled alike: a side
read from an extraction brings its pooling in its header, and two sides pooled differently are
refused before any work. The estimator is :mod:`xlt.analysis.cka`, the files :mod:`xlt.analysis.cka_files`.

Shapes: L layers, n sentences, D hidden size.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from xlt.analysis.cka import pearson, per_layer_cka
from xlt.analysis.cka_files import COLUMN_FORMAT
from xlt.utils.errors import XltError, require_file
from xlt.utils.shapes import ListOf, require_fields
from xlt.utils.textio import read_json, read_lines


def pooling_label(pooling: str, include_specials: bool) -> str:
    """What a column records of how its sentences were pooled, e.g. "mean over subwords, specials excluded"."""
    return f"{pooling} over subwords, " + ("</s> included" if include_specials else "specials excluded")


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
        from xlt.model.spec import model_source

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


def side_pooling(side: Side, settings: CompareSettings) -> tuple[str, str]:
    """(pooling label, the file that says so): an extraction's header, or the settings for a side
    computed from its text."""
    if not side.reps:
        return pooling_label("mean", settings.include_specials), side.text
    prefix, header = _reps_header(side.reps)
    if not isinstance(header.get("pooling"), str) or not isinstance(header.get("include_specials"), bool):
        raise XltError("the header does not say how its sentences were pooled (no pooling and include_specials): "
                       "extract them again with xlt extract", prefix + ".json")
    return pooling_label(header["pooling"], header["include_specials"]), prefix + ".json"


def _reps_header(prefix: str) -> tuple[str, dict]:
    """The prefix (without ``.npy``) and header of an ``xlt extract`` sentence-level output."""
    prefix = prefix[:-4] if prefix.endswith(".npy") else prefix
    header_path = prefix + ".json"
    header = require_fields(read_json(header_path, "extract header"), {"level": str, "layers": ListOf(int), "count": int},
                            header_path, "an xlt extract header")
    if not header["layers"]:
        raise XltError("not an xlt extract header: 'layers' is empty", header_path)
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
    path = require_file(prefix + ".npy", "representations")
    try:
        vectors = np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError as e:   # a file cut short (copied half-way): its header promises more than it holds
        raise XltError(f"not a whole .npy array ({e})", path) from None
    return np.stack([vectors[stored.index(layer), :n] for layer in wanted]), wanted, header


def _compute_side(side: Side, settings: CompareSettings, n: int, runs: dict) -> tuple[np.ndarray, list[int]]:
    from xlt.analysis.extract import load_model, resolve_layers, sentence_vectors
    from xlt.loader.text_model import load_text_model

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
    (pooling, file_a), (pooling_b, file_b) = side_pooling(a, settings), side_pooling(b, settings)
    if pooling != pooling_b:  # CKA of two differently pooled sides would measure the pooling too
        raise XltError(f"the two sides are pooled differently: {file_a} has {pooling!r}, {file_b} has {pooling_b!r}")
    n = min(length_a, settings.n_sentences) if settings.n_sentences else length_a
    least = 4 if settings.debiased else 2
    if n < least:  # found out here, not after encoding (with numpy's warnings about empty means first)
        if n < length_a:   # the file has enough; --n-sentences cut it
            raise XltError(f"--n-sentences {n}: CKA needs at least {least} parallel sentences")
        raise XltError(f"{n} sentence{'s' * (n != 1)}: CKA needs at least {least} parallel sentences", a.source)
    runs: dict = {}
    A, layers_a = _compute_side(a, settings, n, runs)
    B, layers_b = _compute_side(b, settings, n, runs)
    if layers_a != layers_b:
        raise XltError(f"the two sides have different layers ({layers_a} and {layers_b}); pass --layers")
    values = per_layer_cka(A, B, settings.debiased)
    result = {
        "format": COLUMN_FORMAT, "label": label, "column": column,
        "estimator": "debiased" if settings.debiased else "linear",
        "pooling": pooling,
        "n": int(A.shape[1]), "layers": layers_a, "cka": values.tolist(), "average": float(values.mean()),
        "matrix": per_layer_cka(A, B, settings.debiased, matrix=True).tolist() if settings.matrix else None,
        "a": a.describe(), "b": b.describe(), "retrieval": None,
    }
    if retrieval:
        result["retrieval"] = retrieval_correlation(retrieval, layers_a, values)
    return result
