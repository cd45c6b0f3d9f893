"""Language means, the mean difference shift, and unsupervised token translation (Liu et al. 2020, §4).

* Mean of Language ``R_L(l)``: the mean hidden state of layer ``l`` over every non-special token of
  a fixed number of held-out sentences of language L (a token mean, Liu et al.'s E over x and i;
  not a mean of sentence means, which would over-weight short sentences).
* Mean Difference Shift ``D(l) = R_tgt(l) - R_src(l)``.
* Shift decoding: run a source sentence to layer ``l``, add ``alpha * D(l)`` to every position's
  state, run the remaining layers and take the MLM head's argmax at every position, nothing masked.

The means and shift files (``xlt-means/1``, ``xlt-shift/1``, what ``xlt finetune --shift`` reads)
and :class:`~xlt.model.interventions.LanguageShift` live in :mod:`xlt.model.interventions`.

Every function takes a :class:`~xlt.model.protocol.TextModel`: an xlt run or a Hugging Face model
(its masked-LM head decodes; it has no language embedding, so ``src`` only picks the tokenizer).

Shapes: L = n_layers + 1 rows (layer 0 = embeddings), D = d_model, B batch rows, T positions.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Iterator, Optional, Sequence

import numpy as np
import torch
from torch import nn

from xlt.analysis.extract import iter_span_means, length_sorted_batches, text_model, truncate
from xlt.analysis.shift_table import RESULT_FORMAT
from xlt.model.hub import HF_PREFIX
from xlt.model.interventions import LanguageShift, save_means
from xlt.loader.text_model import load_text_model
from xlt.model.protocol import TextModel
from xlt.model.xlt_run import pad_inputs
from xlt.text.vocab import SPECIALS
from xlt.utils import log
from xlt.utils.errors import XltError, require_file


@torch.no_grad()
def language_mean(run: TextModel, lang: str, lines: Sequence[str], batch_size: int = 32,
                  device: torch.device | str = "cpu", include_specials: bool = False,
                  model: Optional[nn.Module] = None) -> tuple[np.ndarray, int]:
    """Mean of Language of every layer: (float32 [n_layers+1, D], number of tokens averaged).

    Every (non-special) token of every line weighs the same; the sum over sentences is kept in float64.
    """
    model = text_model(run, model)
    n_layers = model.n_layers
    content = [truncate(ids, model.max_positions) for ids in model.encode_lines(lang, list(lines))]
    inputs = [model.wrap(ids) for ids in content]
    spans = [[(0, len(seq)) if include_specials else (1, len(seq) - 1)] for seq in inputs]
    keep = [i for i, s in enumerate(spans) if s[0][1] > s[0][0]]  # lines with no subword add nothing
    if not keep:
        raise XltError("no tokens to average: every line is empty")
    total = np.zeros((n_layers + 1, model.d_model))
    tokens = 0
    for batch, pooled in iter_span_means(model, lang, [inputs[i] for i in keep], [spans[i] for i in keep],
                                         list(range(n_layers + 1)), batch_size, device, "language mean"):
        for i, sentence_mean in zip(batch, pooled):
            start, end = spans[keep[i]][0]
            total += sentence_mean[:, 0].double().numpy() * (end - start)
            tokens += end - start
    return (total / tokens).astype(np.float32), tokens


def compute_means(model_spec: str, lang: str, text: str, output: str, n_sentences: int = 10000,
                  include_specials: bool = False, checkpoint: str = "best", batch_size: int = 32,
                  device: str = "cpu") -> dict:
    """``xlt shift-decode means``: Mean of Language over the first ``n_sentences`` lines of ``text``."""
    from itertools import islice

    from xlt.utils.textio import file_sha256, read_lines

    for option, value in (("--n-sentences", n_sentences), ("--batch-size", batch_size)):
        if value < 1:
            raise XltError(f"{option} must be at least 1, got {value}")
    lines = list(islice(read_lines(require_file(text, "text file")), n_sentences))
    if not any(line.strip() for line in lines):
        raise XltError("no tokens to average: the text is empty or blank", text)
    run = load_text_model(model_spec, checkpoint, device)
    run.check_language(lang)
    if len(lines) < n_sentences:
        log.info(f"{text}: only {len(lines)} sentences (asked for {n_sentences}); using them all")
    mean, tokens = language_mean(run, lang, lines, batch_size, device, include_specials)
    header = {"run": run.source, "step": run.step, "lang": lang, "sentences": len(lines),
              "tokens": tokens, "include_specials": include_specials, "text": os.path.abspath(text),
              "text_sha256": file_sha256(text) if text != "-" else None}
    save_means(output, mean, header)
    log.info(f"{output}: mean of {lang} over {tokens} tokens of {len(lines)} sentences")
    return header


@torch.no_grad()
def shift_decode(run: TextModel, shift: LanguageShift, lines: Sequence[str],
                 settings: Sequence[tuple[int, float]], batch_size: int = 32, device: torch.device | str = "cpu",
                 decode_lang: Optional[str] = None) -> Iterator[tuple[int, dict[tuple[int, float], list[int]]]]:
    """Unsupervised token translation of source-language ``lines`` for every (layer, alpha) in ``settings``.

    The input is encoded as ``shift.src``; layer ``l``'s output gets ``alpha * D(l)`` at every
    position, the remaining layers run on it (``run.shifted_decode``), and the MLM head of
    ``decode_lang`` (default: the source language, so nothing but the shift pushes towards the
    target) predicts every position, nothing masked.
    Yields ``(line index, {(layer, alpha): predicted ids at the line's subword positions})``
    in length-sorted order.
    """
    src = shift.src
    decode_lang = decode_lang or src
    differences = {layer: torch.as_tensor(shift.difference(layer), device=device) for layer, _ in settings}
    shifts = [(layer, alpha * differences[layer]) for layer, alpha in settings]
    content = [truncate(ids, run.max_positions) for ids in run.encode_lines(src, list(lines))]
    inputs = [run.wrap(ids) for ids in content]
    with log.progress("shift decoding", total=len(inputs), unit="sentences") as bar:
        for batch in length_sorted_batches([len(s) for s in inputs], batch_size):
            ids, padding_mask = pad_inputs([inputs[i] for i in batch], device, run.pad_id)
            predictions = dict(zip(settings, run.shifted_decode(ids, padding_mask, src, shifts, decode_lang)))
            for row, i in enumerate(batch):
                n = len(content[i])
                yield i, {key: pred[row, 1:n + 1].tolist() for key, pred in predictions.items()}
            bar.advance(len(batch))


# ---- metrics -----------------------------------------------------------------------------------

SPECIAL_IDS = frozenset(range(len(SPECIALS)))


def convert_rate(outputs: Sequence[Sequence[int]], source_tokens: set[int], target_tokens: set[int]) -> float:
    """Liu et al.'s convert rate: #{y in V_t - V_s} / (#y - #{y in V_s & V_t}) over output tokens y.

    Tokens of both languages count nowhere; tokens of neither (never seen in either corpus) stay
    in the denominator. Returns NaN when every output token is shared.
    """
    shared = source_tokens & target_tokens
    converted = total = 0
    for sentence in outputs:
        for y in sentence:
            if y in shared:
                continue
            total += 1
            converted += y in target_tokens
    return converted / total if total else float("nan")


def bleu1(hypotheses: Sequence[Sequence[str]], references: Sequence[Sequence[str]]) -> float:
    """Corpus BLEU-1 (x100): clipped unigram precision times the brevity penalty, one reference each.

    precision = sum_s sum_w min(c_hyp(w), c_ref(w)) / sum_s |hyp_s|; BP = exp(1 - r/c) if c < r else 1,
    with c and r the total hypothesis and reference lengths (Papineni et al. 2002 with N = 1).
    """
    from collections import Counter

    matches = hyp_len = ref_len = 0
    for hyp, ref in zip(hypotheses, references, strict=True):
        ref_counts = Counter(ref)
        matches += sum(min(c, ref_counts[w]) for w, c in Counter(hyp).items())
        hyp_len, ref_len = hyp_len + len(hyp), ref_len + len(ref)
    if hyp_len == 0:
        return 0.0
    brevity = 1.0 if hyp_len >= ref_len else float(np.exp(1.0 - ref_len / hyp_len))
    return 100.0 * brevity * matches / hyp_len


def words_of(ids: Sequence[int], run: TextModel, lang: str = "") -> list[str]:
    """Predicted ids -> words (an xlt run: specials dropped, ``lang:`` prefixes removed, ``@@`` joined)."""
    return run.words(lang, ids)


def token_set(run: TextModel, lang: str, text: Optional[str] = None) -> set[int]:
    """V_lang: the ids of the tokens seen in ``lang``'s corpus.

    An xlt run: from a BPE'd text of the language when given (every whitespace token), else from the
    vocabulary's ownership sidecar. A transformers model: from a raw text of the language (required).
    An empty set is refused: every prediction would count as outside it, a convert rate of 0 that
    says nothing of the model.
    """
    tokens = run.token_set(lang, text)
    if not tokens:
        raise XltError(f"no token of the model's vocabulary for {lang}" + (" in this text" if text else ""), text)
    return tokens


# ---- the sweep (Liu et al. Table 2) ------------------------------------------------------------



@dataclass
class TranslateSettings:
    layers: Optional[list[int]] = None     # None: every Transformer layer 1..n_layers
    alphas: tuple[float, ...] = (1.0, 2.0, 3.0)
    n_sentences: Optional[int] = None
    decode_lang: Optional[str] = None
    checkpoint: str = "best"
    batch_size: int = 32
    device: str = "cpu"
    samples: int = 3

    def __post_init__(self) -> None:
        # A negative count would slice off the last sentences instead of keeping the first ones.
        if self.n_sentences is not None and self.n_sentences < 1:
            raise XltError(f"--n-sentences must be at least 1, got {self.n_sentences}")
        if not self.alphas:  # an empty grid would fail only after the whole decoding pass
            raise XltError("--alphas needs at least one shift weight, such as 1,2,3")
        if self.layers is not None and not self.layers:
            raise XltError("--layers needs at least one layer")
        if any(not math.isfinite(a) for a in self.alphas):
            raise XltError(f"--alphas takes finite numbers, got {', '.join(map(str, self.alphas))}")
        if self.samples < 0 or self.batch_size < 1:
            raise XltError("--samples must be 0 or more and --batch-size at least 1")


def _check_shift_model(header: dict, source: str, step: Optional[int], shift_path: str) -> None:
    """The means must be the decoding model's: another checkpoint's or run's shift decodes, and its
    BLEU-1 reads as this model's. A run directory moved since (its recorded path gone) is let through."""
    made_by, made_at = header.get("run"), header.get("step")
    other_run = isinstance(made_by, str) and made_by != source and os.path.exists(made_by) and \
        os.path.exists(source) and not os.path.samefile(made_by, source)
    # a hub model is its name: two names are two models (no path to have moved)
    other_run = other_run or (isinstance(made_by, str) and made_by != source
                              and HF_PREFIX in (made_by[:len(HF_PREFIX)], source[:len(HF_PREFIX)]))
    if other_run or made_at not in (None, step):
        raise XltError(f"the shift's means are of {made_by} at step {made_at}, the model decoding is {source} at "
                       f"step {step} (--checkpoint): take the means with the model that decodes", shift_path)


def translate(model_spec: str, shift_path: str, input_path: str, reference_path: str, settings: TranslateSettings,
              token_sets: Optional[dict[str, str]] = None) -> dict:
    """Shift-decode ``input_path`` (source language) for every layer x alpha; score against the reference."""
    from xlt.analysis.extract import resolve_layers
    from xlt.utils.textio import read_lines

    shift = LanguageShift.load(shift_path)
    lines = list(read_lines(require_file(input_path, "input")))
    references = list(read_lines(require_file(reference_path, "reference")))
    if len(lines) != len(references):
        raise XltError(f"parallel files differ in length: {input_path} has {len(lines)} lines, "
                       f"{reference_path} has {len(references)}")
    if not lines:
        raise XltError("empty input: no sentences to translate", input_path)
    unknown = sorted(set(token_sets or {}) - {shift.src, shift.tgt})
    if unknown:
        raise XltError(f"--token-set for {', '.join(unknown)}: the shift goes from {shift.src} to {shift.tgt}")
    if settings.n_sentences:
        lines, references = lines[:settings.n_sentences], references[:settings.n_sentences]
    run = load_text_model(model_spec, settings.checkpoint, settings.device)
    for lang in (shift.src, shift.tgt, settings.decode_lang or shift.src):
        run.check_language(lang)
    if not run.has_head:  # before any encoding: found out here, not per batch
        raise XltError("this model has no masked-LM head (loaded as a bare encoder): shift decoding needs one",
                       run.source)
    if shift.mean_src.shape != (run.n_layers + 1, run.d_model):
        raise XltError(f"shift of shape {shift.mean_src.shape} does not fit this model "
                       f"({run.n_layers + 1} layers x {run.d_model})", shift_path)
    _check_shift_model(shift.header, run.source, run.step, shift_path)
    layers = resolve_layers(run.n_layers, settings.layers or list(range(1, run.n_layers + 1)))
    grid = [(layer, float(alpha)) for layer in layers for alpha in settings.alphas]
    sets = {lang: token_set(run, lang, (token_sets or {}).get(lang)) for lang in (shift.src, shift.tgt)}
    outputs: dict[tuple[int, float], list] = {key: [None] * len(lines) for key in grid}
    for i, predicted in shift_decode(run, shift, lines, grid, settings.batch_size, settings.device,
                                     settings.decode_lang):
        for key, ids in predicted.items():
            outputs[key][i] = [y for y in ids if y not in run.special_ids]
    reference_words = [run.reference_words(shift.tgt, line) for line in references]
    rows = []
    for (layer, alpha), predicted in outputs.items():
        rows.append({"layer": layer, "alpha": alpha,
                     "bleu1": bleu1([run.words(shift.tgt, ids) for ids in predicted], reference_words),
                     "convert_rate": convert_rate(predicted, sets[shift.src], sets[shift.tgt])})
    best = max(rows, key=lambda r: r["bleu1"])
    samples = [{"input": lines[i], "reference": references[i],
                "outputs": {f"layer {layer} alpha {alpha:g}": " ".join(run.words(shift.tgt, outputs[(layer, alpha)][i]))
                            for layer, alpha in grid}} for i in range(min(settings.samples, len(lines)))]
    return {"format": RESULT_FORMAT, "src": shift.src, "tgt": shift.tgt, "run": run.source,
            "step": run.step, "shift": os.path.abspath(shift_path), "input": os.path.abspath(input_path),
            "reference": os.path.abspath(reference_path), "n": len(lines),
            "decode_lang": settings.decode_lang or shift.src,
            "token_sets": {"source": len(sets[shift.src]), "target": len(sets[shift.tgt]),
                           "shared": len(sets[shift.src] & sets[shift.tgt]),
                           "from": token_sets or "vocabulary ownership"},
            "grid": rows, "best": {k: best[k] for k in ("bleu1", "layer", "alpha")}, "samples": samples}
