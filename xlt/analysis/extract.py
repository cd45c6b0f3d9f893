"""Per-layer representations of a model: the one forward pass every analysis shares.

The model is any :class:`~xlt.model.protocol.TextModel`: an xlt run (:class:`PretrainedRun`) or a
Hugging Face model (:class:`~xlt.model.hf.HFTextModel`), both loaded by ``load_text_model(--model)``.
Text goes through the model's own pipeline (an xlt run: its Moses tokenizer and BPE; mBERT: its
WordPiece), is laid out as the model saw it in pretraining (``model.wrap``: one special token on
each side, e.g. ``</s> ids </s>`` or ``[CLS] ids [SEP]``), truncated to the model's
``max_positions``, batched longest-first and run once with every hidden state kept. Each
input sequence contributes *rows*: a row is the mean of the hidden states over one span of
positions, which covers every level with one code path:

* sentence -- one span, the sentence's subwords (the two ``</s>`` excluded unless asked);
* word     -- one span per pre-tokenized word: its first subword (``pooling="first"``) or all of
  its subwords (``pooling="mean"``);
* token    -- one span of length one per subword.

Results are float32 arrays ``[L, rows, D]`` (L = selected layers, in the order asked; layer 0 is the
embedding output, layer ``n`` the output of Transformer layer ``n``). Word and token levels also
return a :class:`RowIndex` telling which rows belong to which sentence and which sentences were cut
(:func:`sentence_vectors_and_index` gives the sentence level's).

``model=`` replaces the network: ``run.random_like(seed)`` (any TextModel, the CKA lower bound) or,
for an xlt run, any ``MaskedLM`` of its architecture::

    run = load_text_model("runs/en-fr")            # or "hf:bert-base-multilingual-cased"
    X = sentence_vectors(run, "en", lines, layers=[0, 4, 8])               # [3, N, D]
    R = sentence_vectors(run, "en", lines, model=run.random_like(0))
    W, index = word_vectors(run, "fr", [["Le", "chat"], ["Il", "dort", "."]], pooling="mean")
    W[:, index.rows(1)]                                                      # [L, 3, D]

Shapes: L layers kept, B batch rows, T positions, D = d_model, R rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Sequence

import numpy as np
import torch
from torch import Tensor, nn

from xlt.model.encoder import Encoder
from xlt.loader.text_model import load_text_model
from xlt.model.protocol import TextModel
from xlt.model.xlt_run import PretrainedRun, pad_inputs
from xlt.utils import log
from xlt.utils.errors import XltError

LEVELS = ("sentence", "word", "token")
POOLINGS = ("first", "mean")

Span = tuple[int, int]  # [start, end) positions in the model input
Allocate = Callable[[tuple[int, ...]], np.ndarray]


@dataclass
class RowIndex:
    """Which rows of a flattened ``[L, total, D]`` array belong to which input sentence.

    Attributes:
        offsets: int64 [N+1]; sentence ``i`` owns rows ``offsets[i]:offsets[i+1]``. A word-level
            sentence truncated to the model's length keeps its first words only, so its row count
            can be smaller than its number of words (``truncated`` counts such sentences).
        token_ids: int64 [total] model ids of the rows (token level), else None.
        truncated_sentences: the (0-based) indices of the sentences cut to ``max_positions``.
    """

    offsets: np.ndarray
    token_ids: Optional[np.ndarray] = None
    truncated_sentences: Sequence[int] = ()

    @property
    def truncated(self) -> int:
        """How many sentences were cut."""
        return len(self.truncated_sentences)

    def rows(self, i: int) -> slice:
        return slice(int(self.offsets[i]), int(self.offsets[i + 1]))

    def counts(self) -> np.ndarray:
        """Rows per sentence, int64 [N]."""
        return np.diff(self.offsets)


def text_model(run: TextModel, model: Optional[TextModel | nn.Module] = None) -> TextModel:
    """The model an analysis runs: ``run`` itself, another TextModel, or (xlt runs) ``run`` around a
    ``MaskedLM`` of its architecture."""
    if model is None:
        return run
    if isinstance(model, nn.Module):
        if not isinstance(run, PretrainedRun):
            raise TypeError("a bare network can only stand in for an xlt run's model")
        return run.with_model(model.to(next(run.model.parameters()).device), "custom")
    return model


def encoder_of(model: nn.Module) -> Encoder:
    """The :class:`Encoder` of a ``MaskedLM`` (or the encoder itself)."""
    encoder = getattr(model, "encoder", model)
    if not isinstance(encoder, Encoder):
        raise TypeError(f"expected a MaskedLM or an Encoder, got {type(model).__name__}")
    return encoder


def resolve_layers(n_layers: int, layers: Optional[Sequence[int]], source: Optional[str] = None) -> list[int]:
    """``None`` -> all layers ``0..n_layers``; otherwise checked against the model (XltError if out of range)."""
    if layers is None:
        return list(range(n_layers + 1))
    chosen = [int(layer) for layer in layers]
    if not chosen:
        raise XltError("no layers selected", source)
    for layer in chosen:
        if not 0 <= layer <= n_layers:
            raise XltError(f"layer {layer} is out of range: the model has layers 0..{n_layers} "
                           f"(0 = embeddings)", source)
    return chosen


def length_sorted_batches(lengths: Sequence[int], batch_size: int) -> Iterator[list[int]]:
    """Indices in batches of ``batch_size``, longest first (little padding, and the largest batch,
    the one that may run out of memory, comes first)."""
    if batch_size < 1:
        raise XltError(f"batch size must be positive, got {batch_size}")
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    for start in range(0, len(order), batch_size):
        yield order[start:start + batch_size]


def truncate(ids: Sequence[int], max_positions: int) -> list[int]:
    """Content ids cut so that ``</s> ids </s>`` fits the model's position table."""
    return list(ids[:max_positions - 2])


@torch.no_grad()
def iter_span_means(model: TextModel, lang: str, inputs: Sequence[Sequence[int]], spans: Sequence[Sequence[Span]],
                    layers: Sequence[int], batch_size: int = 32, device: torch.device | str = "cpu",
                    description: str = "extract") -> Iterator[tuple[list[int], list[Tensor]]]:
    """Run ``model`` over ``inputs`` (full model inputs, ``model.wrap``-ped) and average hidden states over spans.

    Yields, batch by batch (longest inputs first), ``(sequence_indices, pooled)`` where ``pooled[k]``
    is a float32 CPU tensor [L, len(spans[sequence_indices[k]]), D]: row j is the mean of the states
    of layers ``layers`` over positions ``spans[i][j]``. The model runs in eval mode (no dropout).
    """
    with log.progress(description, total=len(inputs), unit="sentences") as bar:
        for batch in length_sorted_batches([len(s) for s in inputs], batch_size):
            ids, padding_mask = pad_inputs([inputs[i] for i in batch], device, model.pad_id)
            states = model.hidden_states(ids, padding_mask, lang)
            B, T = ids.shape
            # Every position is assigned to (at most) one output row; the rest go to a dump row.
            # index_add over positions then gives exact per-span sums in one pass for all layers.
            row_of_position = torch.full((B, T), -1, dtype=torch.long)
            span_sizes: list[int] = []
            for b, i in enumerate(batch):
                for start, end in spans[i]:
                    row_of_position[b, start:end] = len(span_sizes)
                    span_sizes.append(end - start)
            n_rows = len(span_sizes)
            row_of_position[row_of_position < 0] = n_rows
            stacked = torch.stack([states[layer] for layer in layers]).float()  # [L,B,T,D]
            L, D = stacked.shape[0], stacked.shape[-1]
            sums = stacked.new_zeros(L, n_rows + 1, D)
            sums.index_add_(1, row_of_position.view(-1).to(stacked.device), stacked.view(L, B * T, D))
            sizes = torch.tensor(span_sizes, dtype=torch.float32, device=stacked.device)
            means = (sums[:, :n_rows] / sizes[None, :, None]).cpu()
            yield list(batch), list(torch.split(means, [len(spans[i]) for i in batch], dim=1))
            bar.advance(len(batch))


def _sentence_span(n_content: int, include_specials: bool) -> Span:
    return (0, n_content + 2) if include_specials else (1, n_content + 1)


def _fill(model: TextModel, lang: str, inputs: list[list[int]], spans: list[list[Span]], layers: list[int],
          offsets: np.ndarray, batch_size: int, device, allocate: Optional[Allocate], description: str) -> np.ndarray:
    """Allocate ``[L, offsets[-1], D]`` and write each sequence's span means at its rows."""
    shape = (len(layers), int(offsets[-1]), model.d_model)
    out = allocate(shape) if allocate is not None else np.empty(shape, dtype=np.float32)
    if tuple(out.shape) != shape:
        raise ValueError(f"allocate returned shape {tuple(out.shape)}, expected {shape}")
    for batch, pooled in iter_span_means(model, lang, inputs, spans, layers, batch_size, device, description):
        for i, vectors in zip(batch, pooled):
            out[:, offsets[i]:offsets[i + 1]] = vectors.numpy()
    return out


def _log_truncated(truncated: Sequence[int], limit: int, consequence: str = "") -> None:
    if truncated:
        log.info(f"{len(truncated)} sentence(s) truncated to {limit} positions{consequence}")


def _encode_lines(model: TextModel, lang: str, lines: Sequence[str]) -> tuple[list[list[int]], list[int]]:
    """Raw lines -> truncated content ids, and the indices of the lines that were truncated (logged)."""
    limit = model.max_positions
    encoded = model.encode_lines(lang, list(lines))
    truncated = [i for i, ids in enumerate(encoded) if len(ids) > limit - 2]
    _log_truncated(truncated, limit)
    return [truncate(ids, limit) for ids in encoded], truncated


def sentence_vectors_and_index(run: TextModel, lang: str, lines: Sequence[str],
                               layers: Optional[Sequence[int]] = None, batch_size: int = 32,
                               device: torch.device | str = "cpu", include_specials: bool = False,
                               model: Optional[nn.Module] = None, allocate: Optional[Allocate] = None,
                               source: Optional[str] = None) -> tuple[np.ndarray, RowIndex]:
    """:func:`sentence_vectors` and its index: one row per sentence, and which sentences were cut."""
    model = text_model(run, model)
    layers = resolve_layers(model.n_layers, layers, source)
    content, truncated = _encode_lines(model, lang, lines)
    for number, ids in enumerate(content, start=1):
        if not ids and not include_specials:
            raise XltError("empty sentence: no subwords to average", source, number)
    inputs = [model.wrap(ids) for ids in content]
    spans = [[_sentence_span(len(ids), include_specials)] for ids in content]
    offsets = np.arange(len(inputs) + 1, dtype=np.int64)
    out = _fill(model, lang, inputs, spans, layers, offsets, batch_size, device, allocate, "sentences")
    return out, RowIndex(offsets, None, truncated)


def sentence_vectors(run: TextModel, lang: str, lines: Sequence[str], layers: Optional[Sequence[int]] = None,
                     batch_size: int = 32, device: torch.device | str = "cpu", include_specials: bool = False,
                     model: Optional[nn.Module] = None, allocate: Optional[Allocate] = None,
                     source: Optional[str] = None) -> np.ndarray:
    """Mean-pooled sentence representations: float32 [L, N, D].

    ``lines``: raw text (tokenized here). ``layers``: None = all, 0 = embeddings.
    ``model``: another model (see :func:`text_model`; default ``run``). ``allocate(shape)``
    returns the output array (e.g. a memmap); ``source`` names the input in error messages.
    A line with no subword at all is an error (its mean does not exist). A line longer than the
    model is cut (logged; :func:`sentence_vectors_and_index` says which).
    """
    return sentence_vectors_and_index(run, lang, lines, layers, batch_size, device, include_specials, model,
                                      allocate, source)[0]


def word_vectors(run: TextModel, lang: str, sentences_of_words: Sequence[Sequence[str]],
                 layers: Optional[Sequence[int]] = None, pooling: str = "first", batch_size: int = 32,
                 device: torch.device | str = "cpu", model: Optional[nn.Module] = None,
                 allocate: Optional[Allocate] = None) -> tuple[np.ndarray, RowIndex]:
    """Word representations of pre-tokenized sentences: (float32 [L, total_words, D], index).

    Each word is segmented on its own (``encode_words``); ``pooling`` "first" takes its first
    subword, "mean" averages all of its subwords. Sentence ``i``'s words are rows ``index.rows(i)``.
    A sentence longer than the model keeps the words whose first subword fits (a word cut in two
    is averaged over its subwords that fit).
    """
    if pooling not in POOLINGS:
        raise XltError(f"unknown pooling {pooling!r} (one of: {', '.join(POOLINGS)})")
    model = text_model(run, model)
    layers = resolve_layers(model.n_layers, layers)
    limit = model.max_positions
    inputs, spans, counts, truncated = [], [], [], []
    for number, words in enumerate(sentences_of_words):
        ids, starts = model.encode_words(lang, list(words))
        ends = starts[1:] + [len(ids)]
        kept = truncate(ids, limit)
        if len(kept) < len(ids):
            truncated.append(number)
        # +1: position 0 of the model input is its opening special token.
        sentence_spans = [(s + 1, (s + 2) if pooling == "first" else min(e, len(kept)) + 1)
                          for s, e in zip(starts, ends) if s < len(kept)]
        inputs.append(model.wrap(kept))
        spans.append(sentence_spans)
        counts.append(len(sentence_spans))
    _log_truncated(truncated, limit, "; their last words have no vectors")
    offsets = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(np.int64)
    out = _fill(model, lang, inputs, spans, layers, offsets, batch_size, device, allocate, "sentences")
    return out, RowIndex(offsets, None, truncated)


def token_vectors(run: TextModel, lang: str, lines: Sequence[str], layers: Optional[Sequence[int]] = None,
                  batch_size: int = 32, device: torch.device | str = "cpu", include_specials: bool = False,
                  model: Optional[nn.Module] = None,
                  allocate: Optional[Allocate] = None) -> tuple[np.ndarray, RowIndex]:
    """Every subword's representation: (float32 [L, total_tokens, D], index with ``token_ids``).

    ``include_specials`` keeps the two special tokens of every input as rows too.
    """
    model = text_model(run, model)
    layers = resolve_layers(model.n_layers, layers)
    content, truncated = _encode_lines(model, lang, lines)
    inputs = [model.wrap(ids) for ids in content]
    spans, token_ids = [], []
    for seq in inputs:
        start, end = _sentence_span(len(seq) - 2, include_specials)
        spans.append([(p, p + 1) for p in range(start, end)])
        token_ids.extend(seq[start:end])
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in spans], dtype=np.int64)]).astype(np.int64)
    out = _fill(model, lang, inputs, spans, layers, offsets, batch_size, device, allocate, "sentences")
    return out, RowIndex(offsets, np.asarray(token_ids, dtype=np.int64), truncated)


def parse_layers(text: Optional[str]) -> Optional[list[int]]:
    """``"0,4,8"`` -> [0, 4, 8]; None or "all" -> None (every layer)."""
    if text is None or text.strip() in ("", "all"):
        return None
    try:
        layers = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise XltError(f"--layers takes comma-separated layer numbers such as 0,4,8, got {text!r}") from None
    if len(set(layers)) != len(layers):   # each would be computed and reported twice, as two layers
        raise XltError(f"--layers names a layer twice: {text!r}")
    return layers


def load_model(run: TextModel, random_seed: Optional[int]) -> TextModel:
    """The model itself, or a randomly initialised one of its architecture (``random_seed`` given)."""
    return run if random_seed is None else run.random_like(random_seed)


def extract_to_files(model_spec: str, lang: str, input_path: str, output: str, level: str = "sentence",
                     pooling: str = "first", layers: Optional[Sequence[int]] = None, checkpoint: str = "best",
                     batch_size: int = 32, device: str = "cpu", include_specials: bool = False,
                     random_seed: Optional[int] = None, finetuned: Optional[str] = None) -> dict:
    """``xlt extract``: ``model_spec`` (an xlt run, a transformers directory or ``hf:NAME``) -> ``OUTPUT.npy`` (float32 [L, rows, D], a memmap-able .npy), ``OUTPUT.json``
    (the header) and ``OUTPUT.index.npz`` (``offsets`` [N+1] of each sentence's rows; ``token_ids`` at
    token level).

    Word level reads one pre-tokenized sentence per line (words separated by spaces). Every file
    goes through a temporary name; the header is written last. Returns the header.
    """
    import json
    import os

    from xlt.utils.errors import require_file
    from xlt.utils.outputs import atomic_path, check_output_paths, json_text, reserve_disk_space, superseded
    from xlt.utils.textio import file_sha256, read_lines

    if level not in LEVELS:
        raise XltError(f"unknown level {level!r} (one of: {', '.join(LEVELS)})")
    if random_seed is not None and finetuned is not None:
        raise XltError("--random-init and --finetuned exclude each other (a random encoder has no fine-tuning)")
    prefix = output[:-4] if output.endswith(".npy") else output
    check_output_paths(prefix + ".npy", prefix + ".index.npz", prefix + ".json")
    require_file(input_path, "input file")
    lines = list(read_lines(input_path))
    if not lines:
        raise XltError("empty input: no sentences", input_path)
    if level != "sentence" and not any(line.strip() for line in lines):  # no word to give a vector
        raise XltError("empty input: every line is blank", input_path)
    run = load_text_model(model_spec, checkpoint, device, finetuned)
    run.check_language(lang)  # unknown language -> one-line error before any work
    model = load_model(run, random_seed)
    layers = resolve_layers(run.n_layers, layers)
    # the header, entered first, is renamed last and its old version removed before any rename:
    # whatever a kill interrupts, a header never stands beside vectors it does not describe
    with atomic_path(prefix + ".json") as tmp_header, atomic_path(prefix + ".npy") as tmp_npy, \
            atomic_path(prefix + ".index.npz") as tmp_index, superseded(prefix + ".json"):
        def allocate(shape):
            array = np.lib.format.open_memmap(tmp_npy, mode="w+", dtype=np.float32, shape=shape)
            reserve_disk_space(tmp_npy, prefix + ".npy")
            return array

        if level == "sentence":
            out, index = sentence_vectors_and_index(run, lang, lines, layers, batch_size, device, include_specials,
                                                    model, allocate, source=input_path)
        elif level == "word":
            out, index = word_vectors(run, lang, [line.split() for line in lines], layers, pooling, batch_size,
                                      device, model, allocate)
        else:
            out, index = token_vectors(run, lang, lines, layers, batch_size, device, include_specials, model,
                                       allocate)
        out.flush()
        shape = list(out.shape)
        del out
        arrays = {"offsets": index.offsets}
        if index.token_ids is not None:
            arrays["token_ids"] = index.token_ids
        with open(tmp_index, "wb") as f:
            np.savez(f, **arrays)
        described = run.describe()
        header = {
            "run": run.source, "checkpoint": checkpoint if isinstance(run, PretrainedRun) else None, "step": run.step,
            "model": described["model"] if random_seed is None else f"random:{random_seed}", "kind": described["kind"],
            "lang": lang, "level": level,
            "pooling": {"word": pooling, "sentence": "mean"}.get(level),
            "include_specials": include_specials if level != "word" else False,
            "layers": layers, "shape": shape, "dtype": "float32",
            "input": os.path.abspath(input_path) if input_path != "-" else "-",
            "input_sha256": file_sha256(input_path) if input_path != "-" else None,
            # -q drops the log line: the header is where a cut is recorded for good.
            "count": len(lines), "truncated": index.truncated,
            "truncated_lines": [i + 1 for i in index.truncated_sentences],
            "vectors": os.path.basename(prefix + ".npy"), "index": os.path.basename(prefix + ".index.npz"),
        }
        with open(tmp_header, "w", encoding="utf-8") as f:
            f.write(json_text(header))
    log.info(f"{prefix}.npy: {json.dumps(shape)} ({level}, layers {','.join(map(str, layers))})")
    return header
