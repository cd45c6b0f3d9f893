"""The parallel-data procedures of ``xlt align``: sentence-level alignment and contextual dictionaries.

* :func:`align_sentence` (Figure 6): mean-pooled sentence vectors per layer (specials excluded),
  a map learned on parallel sentences (XNLI dev/test are 15-way parallel) and evaluated by
  Tatoeba retrieval, P@1 with cosine nearest neighbours.
* :func:`align_dictionary` (Figure 5): fast_align contextual-word pairs of a parallel corpus, one
  target -> source map per layer, saved for ``xlt finetune``
  (:func:`xlt.model.interventions.write_maps`).

Shapes: L layers, N sentences or aligned words, D dimensions.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from typing import Optional, Sequence

import numpy as np

from xlt.analysis.align_settings import MAPS, AlignSettings
from xlt.analysis.align import Sides
from xlt.analysis.dictionaries import contextual_dictionary
from xlt.analysis.extract import sentence_vectors, word_vectors
from xlt.analysis.fastalign import FastAlignSettings
from xlt.analysis.procrustes import iterative_normalization, orthogonal_procrustes, unit_length
from xlt.analysis.retrieval import topk_cosine
from xlt.model.interventions import MAP_FORMAT, MAP_ORIENTATION, write_maps
from xlt.utils import log
from xlt.utils.errors import XltError, require_file
from xlt.utils.textio import read_numbered_lines


def read_parallel(source_path: str, target_path: str, columns: Sequence[int] = (1,),
                  limit: Optional[int] = None) -> tuple[list[str], list[str]]:
    """Line-parallel sentences of two files, as (source, target) lists.

    A ``.tsv`` file contributes the tab-separated ``columns`` (1-based; XNLI: 1 = premise,
    2 = hypothesis) of each line; other files the whole line. Pairs where a side is empty and
    repeated pairs (XNLI repeats each premise three times) are dropped, order kept. Files of
    different lengths -> XltError naming both. ``limit`` keeps the first lines only.
    """
    sides = []
    for path in (source_path, target_path):
        require_file(path, "parallel file")
        lines = []
        for number, line in read_numbered_lines(path):
            if limit is not None and number > limit:
                break
            if path.endswith(".tsv"):
                fields = line.split("\t")
                if len(fields) < max(columns):
                    raise XltError(f"needs {max(columns)} tab-separated columns, found {len(fields)}", path, number)
                lines.append([fields[c - 1].strip() for c in columns])
            else:
                lines.append([line.strip()])
        sides.append(lines)
    if len(sides[0]) != len(sides[1]):
        raise XltError(f"parallel files differ in length: {source_path} has {len(sides[0])} lines, "
                       f"{target_path} has {len(sides[1])}")
    pairs = dict.fromkeys((s, t) for src, tgt in zip(*sides) for s, t in zip(src, tgt) if s and t)
    if not pairs:
        raise XltError("no non-empty sentence pair", source_path)
    return [s for s, _ in pairs], [t for _, t in pairs]


def align_sentence(model: str, source_lang: str, target_lang: str, train: Sequence[tuple[str, str]],
                   test_source: str, test_target: str, target_model: Optional[str] = None,
                   columns: Sequence[int] = (1, 2), layers: Optional[Sequence[int]] = None,
                   settings: AlignSettings = AlignSettings(), map_kind: str = "procrustes",
                   test_columns: Sequence[int] = (1,)) -> dict:
    """``xlt align sentence``: per-layer sentence alignment learned on ``train`` file pairs, Tatoeba P@1.

    ``p_at_1[l]`` is target -> source retrieval (each target sentence finds its source among all
    test source sentences; XTREME's xx -> en), ``p_at_1_source_to_target`` the other way. The
    result has top-level ``layers`` and ``p_at_1``, the form ``xlt cka --retrieval`` reads.
    ``map_kind="none"`` learns no map (no ``train``): one joint model's two languages, each language's
    sentences iteratively normalized on their own (which centres them, so a constant offset between
    the languages does not count), the question being whether the model already pairs them.
    ``columns`` picks the sentences of ``.tsv`` training files, ``test_columns`` those of ``.tsv``
    test files (XNLI's hypotheses: 2).
    """
    if map_kind not in MAPS:
        raise XltError(f"--map must be one of {', '.join(MAPS)}, got {map_kind!r}")
    if map_kind == "procrustes" and not train:
        raise XltError("--map procrustes learns its map from --train pairs: give --train (or --map none)")
    if map_kind == "none" and train:
        raise XltError("--map none learns no map: --train goes with --map procrustes")
    sides = Sides.load(model, source_lang, target_lang, target_model, settings)
    chosen = sides.layers(layers)
    train_source, train_target = [], []
    for source_path, target_path in train:
        s, t = read_parallel(source_path, target_path, columns)
        train_source += s
        train_target += t
    test_src, test_tgt = read_parallel(test_source, test_target, test_columns)
    if len(set(test_src)) != len(test_src) or len(set(test_tgt)) != len(test_tgt):
        log.info("the test set has repeated sentences; each query counts only its own line as correct")
    n_train = len(train_source)
    log.info(f"{n_train} training pairs, {len(test_src)} test pairs")
    encode = dict(layers=chosen, batch_size=settings.batch_size, device=settings.device)
    X = sentence_vectors(sides.source, source_lang, train_source + test_src, **encode)  # [L, n_train+n_test, D]
    Y = sentence_vectors(sides.target, target_lang, train_target + test_tgt, **encode)
    results = []
    for k, layer in enumerate(chosen):
        # Normalize each language's whole set of sentences (train + test) together, then map.
        x = iterative_normalization(X[k], settings.iternorm_rounds)
        y = iterative_normalization(Y[k], settings.iternorm_rounds)
        mapped, target = x[n_train:], y[n_train:]
        if map_kind == "procrustes":
            mapped = mapped @ orthogonal_procrustes(x[:n_train], y[:n_train])
        expected = np.arange(len(test_src))
        kw = {"k": 1, "block_size": settings.block_size, "device": settings.device}
        _, t2s = topk_cosine(target, mapped, **kw)
        _, s2t = topk_cosine(mapped, target, **kw)
        results.append({"layer": layer, "p_at_1": float((t2s[:, 0] == expected).mean()),
                        "p_at_1_source_to_target": float((s2t[:, 0] == expected).mean())})
    return {"command": "align sentence", **sides.describe(), "map": map_kind, "settings": asdict(settings),
            "train": [{"source": s, "target": t} for s, t in train], "columns": list(columns),
            "test_columns": list(test_columns),
            "n_train": n_train, "test": {"source": test_source, "target": test_target, "pairs": len(test_src)},
            "layers": chosen, "p_at_1": [r["p_at_1"] for r in results], "results": results}


def align_dictionary(model: str, source_lang: str, target_lang: str, source_path: str, target_path: str,
                     output_dir: str, target_model: Optional[str] = None, layers: Optional[Sequence[int]] = None,
                     pooling: str = "mean", drop_identical: bool = False, max_sentences: Optional[int] = None,
                     fast_align: FastAlignSettings = FastAlignSettings(),
                     settings: AlignSettings = AlignSettings()) -> dict:
    """``xlt align dictionary``: fast_align pairs of contextual words -> one target -> source map per layer.

    Both sides are split into words by their model's own pipeline, aligned (forward + reverse,
    grow-diag-final-and, one-to-one links), encoded per word (``pooling`` over its subwords), and
    W_l = Procrustes(target words at layer l -> source words at layer l), applied about the two
    languages' means (:func:`fit_layer_map`). Maps are written with
    :func:`~xlt.model.interventions.write_maps`; returns the result (also OUTPUT_DIR/map.json).
    """
    if max_sentences is not None and max_sentences < 1:
        raise XltError(f"--max-sentences must be at least 1, got {max_sentences}")
    if os.path.exists(output_dir) and not os.path.isdir(output_dir):
        raise XltError("is a file; expected the output directory of the maps", output_dir)
    sides = Sides.load(model, source_lang, target_lang, target_model, settings)
    chosen = sides.layers(layers)
    raw_source, raw_target = read_parallel(source_path, target_path, limit=max_sentences)
    source_words = [sides.source.split_words(source_lang, s) for s in raw_source]
    target_words = [sides.target.split_words(target_lang, t) for t in raw_target]
    log.info(f"fast_align on {len(source_words)} sentence pairs")
    found = contextual_dictionary(source_words, target_words, drop_identical, fast_align)
    if found.n_links == 0:
        raise XltError("fast_align found no one-to-one link to learn a map from", source_path)
    keep = [k for k, links in enumerate(found.links) if links]
    X, x_index = word_vectors(sides.source, source_lang, [source_words[k] for k in keep], chosen, pooling,
                              settings.batch_size, settings.device)
    Y, y_index = word_vectors(sides.target, target_lang, [target_words[k] for k in keep], chosen, pooling,
                              settings.batch_size, settings.device)
    rows = [(x_index.offsets[n] + i, y_index.offsets[n] + j)
            for n, k in enumerate(keep) for i, j in found.links[k]
            if i < x_index.counts()[n] and j < y_index.counts()[n]]  # words cut off by truncation have no vector
    pair_rows = np.array(rows, dtype=np.int64).reshape(-1, 2)
    maps, means, fits = [], [], []
    for k, layer in enumerate(chosen):
        W, pair, fit = fit_layer_map(Y[k][pair_rows[:, 1]], X[k][pair_rows[:, 0]], settings.iternorm_rounds)
        maps.append(W)
        means.append(pair)
        fits.append({"layer": layer, **fit})
    header = {"format": MAP_FORMAT, "source": source_lang, "target": target_lang, "layers": chosen,
              "d_model": int(maps[0].shape[0]), "orientation": MAP_ORIENTATION,
              "centred": settings.iternorm_rounds > 0,
              "command": "align dictionary", "runs": sides.describe(),
              "parallel": {"source": source_path, "target": target_path, "sentences": found.n_sentences},
              "links": int(len(pair_rows)), "identical_dropped": found.n_identical_dropped,
              "drop_identical": drop_identical, "pooling": pooling, "fast_align": asdict(fast_align),
              "settings": asdict(settings), "results": fits,
              "files": {str(layer): f"W_layer{layer}.npy" for layer in chosen}}
    write_maps(output_dir, maps, header, None if settings.iternorm_rounds == 0 else means)
    return header


def fit_layer_map(target: np.ndarray, source: np.ndarray,
                  rounds: int) -> tuple[np.ndarray, Optional[np.ndarray], dict]:
    """One layer's map from paired word states target [P,D] -> source [P,D]: (W [D,D], means [2,D]
    (the target's, the source's) or None, {"cosine_before", "cosine_after"}).

    W is Procrustes on the iteratively normalized pairs. Iterative normalization centres both sides, so
    W is a rotation about the two means, and a state is mapped as ``(x - mean_tgt) @ W + mean_src``:
    about the origin it would leave the target's mean where the source has none. With ``rounds`` 0
    nothing is centred and W turns about the origin (means None). The cosines are those of the raw
    pairs, before and after that mapping: what the fine-tuning hook does.
    """
    W = orthogonal_procrustes(iterative_normalization(target, rounds), iterative_normalization(source, rounds))
    means = None
    if rounds > 0:
        means = np.stack([target.mean(axis=0, dtype=np.float64),
                          source.mean(axis=0, dtype=np.float64)]).astype(np.float32)
    mapped = target @ W if means is None else (target - means[0]) @ W + means[1]
    return W, means, {"cosine_before": _mean_cosine(target, source), "cosine_after": _mean_cosine(mapped, source)}


def _mean_cosine(A: np.ndarray, B: np.ndarray) -> float:
    """Mean cosine of paired rows A [P,D], B [P,D]."""
    return float(np.mean(np.sum(unit_length(A) * unit_length(B), axis=1)))
