"""Procrustes alignment of two models' representations (Wu et al. 2020 §5.1; Liu et al. 2020 §3.1.1).

Four procedures, one per ``xlt align`` subcommand; each learns an orthogonal map per layer after
iterative normalization (:mod:`xlt.analysis.procrustes`) and evaluates or saves it:

* :func:`align_word` -- the token embedding tables, MUSE dictionary supervision, word translation
  retrieval (NN and CSLS P@1/5/10, MRR with cosine). Figure 4a.
* :func:`align_contextual_word` -- a word's vector at layer l is the mean of its contextual vectors
  over N sentences; same evaluation per layer. Figure 4b.
* :func:`~xlt.analysis.align_parallel.align_sentence` -- mean-pooled sentences, XNLI pairs to learn,
  Tatoeba P@1 to evaluate. Figure 6.
* :func:`~xlt.analysis.align_parallel.align_dictionary` -- fast_align contextual-word pairs of a
  parallel corpus, one target -> source map per layer for zero-shot transfer. Figure 5.

The source and target sides are two runs (monolingual BERTs) or one bilingual run's two languages.
Shapes: L layers, N words/sentences, D dimensions.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Optional, Sequence

import numpy as np
import torch

from xlt.analysis.dictionaries import read_muse_dictionary
from xlt.analysis.extract import resolve_layers, word_vectors
from xlt.analysis.procrustes import ITERNORM_ROUNDS, align_spaces
from xlt.analysis.retrieval import BLOCK_SIZE, CSLS_K, mean_reciprocal_rank, precision_at_k, topk_cosine, topk_csls
from xlt.pretrain.pretrained import PretrainedRun
from xlt.text.vocab import UNK_ID
from xlt.utils import log
from xlt.utils.device import DEVICE_HELP, resolve_device
from xlt.utils.errors import XltError
from xlt.utils.textio import read_lines

KS = (1, 5, 10)


@dataclass
class AlignSettings:
    """Options shared by every ``xlt align`` procedure."""

    iternorm_rounds: int = field(default=ITERNORM_ROUNDS, metadata={
        "help": "Iterative normalization rounds before Procrustes (Zhang et al. 2019; 0 = unit length only)."})
    csls_k: int = field(default=CSLS_K, metadata={"help": "Neighbourhood size of CSLS (MUSE: 10)."})
    block_size: int = field(default=BLOCK_SIZE, metadata={"help": "Rows per block in nearest-neighbour search."})
    batch_size: int = field(default=32, metadata={"help": "Sentences per forward pass."})
    device: str = field(default="auto", metadata={"help": DEVICE_HELP})
    checkpoint: str = field(default="best", metadata={"help": "Checkpoint of each run: best or last."})

    def __post_init__(self) -> None:
        # Checked before any work: these would fail (or, csls_k=0, report CSLS as 0) after the encoding.
        for name, least in (("iternorm_rounds", 0), ("csls_k", 1), ("block_size", 1), ("batch_size", 1)):
            if getattr(self, name) < least:
                raise XltError(f"--{name.replace('_', '-')} must be at least {least}, got {getattr(self, name)}")
        if self.checkpoint not in ("best", "last"):
            raise XltError(f"--checkpoint must be best or last, got {self.checkpoint!r}")
        self.device = str(resolve_device(self.device))  # "auto" becomes what this machine has


@dataclass
class Sides:
    """The two models being aligned: ``source``'s language ``source_lang`` and ``target``'s ``target_lang``."""

    source: PretrainedRun
    source_lang: str
    target: PretrainedRun
    target_lang: str

    @classmethod
    def load(cls, model: str, source_lang: str, target_lang: str, target_model: Optional[str],
             settings: AlignSettings) -> "Sides":
        source = PretrainedRun.load(model, settings.checkpoint, settings.device)
        target = source if target_model is None else PretrainedRun.load(target_model, settings.checkpoint,
                                                                         settings.device)
        source.text(source_lang)  # an unknown language is a one-line error before any work
        target.text(target_lang)
        return cls(source, source_lang, target, target_lang)

    def layers(self, layers: Optional[Sequence[int]]) -> list[int]:
        """Layers both models have (0 = embeddings); out of range -> XltError."""
        n = min(self.source.config.n_layers, self.target.config.n_layers)
        return resolve_layers(n, layers)

    def describe(self) -> dict:
        return {"source": {"run": self.source.path, "lang": self.source_lang, "step": self.source.step},
                "target": {"run": self.target.path, "lang": self.target_lang, "step": self.target.step}}


@dataclass
class WordSpace:
    """The words of one language and their vectors: row r is ``words[r]``; vectors [L, N, D]."""

    words: list[str]
    vectors: np.ndarray

    def __post_init__(self) -> None:
        self.row = {w: r for r, w in enumerate(self.words)}


def dictionary_rows(pairs: Sequence[tuple[str, str]], source: WordSpace, target: WordSpace,
                    source_key=str, target_key=str) -> np.ndarray:
    """Dictionary pairs whose two words are in the spaces -> int [P,2] (source row, target row).

    ``*_key`` turn a dictionary word into the space's key (e.g. the run's tokenizer normalisation).
    """
    rows = [(source.row.get(source_key(s)), target.row.get(target_key(t))) for s, t in pairs]
    return np.array([r for r in rows if None not in r], dtype=np.int64).reshape(-1, 2)


def usable_pairs(path: str, source: WordSpace, target: WordSpace, source_key=str, target_key=str) -> tuple[np.ndarray, dict]:
    """Read a MUSE dictionary and keep the pairs the spaces can represent; none at all -> XltError."""
    pairs = read_muse_dictionary(path)
    rows = dictionary_rows(pairs, source, target, source_key, target_key)
    if len(rows) == 0:
        raise XltError(f"none of the {len(pairs)} dictionary pairs has both words in the vocabularies "
                       f"({len(source.words)} source and {len(target.words)} target words)", path)
    return rows, {"file": path, "pairs": len(pairs), "usable": int(len(rows)),
                  "source_words": int(len(np.unique(rows[:, 0])))}


def word_translation(source: np.ndarray, target: np.ndarray, train: np.ndarray, test: np.ndarray,
                     settings: AlignSettings) -> dict:
    """Learn W on ``train`` pairs, evaluate source -> target translation of ``test``'s source words.

    source [Ns,D], target [Nt,D]: whole spaces; train/test int [P,2] rows. Retrieval is over the
    whole target space (NN and CSLS, whose r_S uses the whole mapped source space); MRR (Liu et al.)
    ranks the test dictionary's target words by cosine.
    """
    if len(target) < max(KS):
        raise XltError(f"the target space has only {len(target)} words: P@{max(KS)} needs at least {max(KS)} "
                       "candidates (more text, a larger --max-words or a larger vocabulary)")
    mapped, target_n, _ = align_spaces(source, target, train, settings.iternorm_rounds)
    queries = np.unique(test[:, 0])
    gold = [set(test[test[:, 0] == q, 1].tolist()) for q in queries]
    kw = {"block_size": settings.block_size, "device": settings.device}
    _, nn = topk_cosine(mapped[queries], target_n, k=max(KS), **kw)
    _, csls = topk_csls(mapped[queries], target_n, k=max(KS), source_space=mapped, csls_k=settings.csls_k, **kw)
    candidates = np.unique(test[:, 1])
    position = {row: p for p, row in enumerate(candidates.tolist())}
    mrr = mean_reciprocal_rank(mapped[queries], target_n[candidates], [{position[g] for g in s} for s in gold], **kw)
    return {"queries": int(len(queries)), "nn": precision_at_k(nn, gold, KS),
            "csls": precision_at_k(csls, gold, KS), "mrr": mrr, "mrr_candidates": int(len(candidates))}


# ---- word: the token embedding tables -------------------------------------------------------

def embedding_space(run: PretrainedRun, lang: str, dictionary_words: Sequence[str], subwords: str) -> tuple[WordSpace, dict]:
    """One language's word space from its token embedding table.

    Rows are the whole-word vocabulary entries the language owns (no ``@@`` continuation mark).
    A dictionary word is looked up through the run's text pipeline: ``subwords="single"`` keeps it
    only if it is one whole-word token (the XLM authors' practice); ``"mean"`` also represents a
    word of several subwords by their mean, added as an extra row. Returns the space [1, N, D] and
    {dictionary word: its key in the space}.
    """
    table = run.model.encoder.token_embedding_weight(lang).detach().float().cpu().numpy()
    prefix = f"{lang}:" if run.vocab.prefix_lang else ""
    ids = [i for i in run.vocab.language_ids(lang) if not run.vocab.token(i).endswith("@@")]
    words = [run.vocab.token(i)[len(prefix):] for i in ids]
    row_of_id = {i: r for r, i in enumerate(ids)}
    extra_words, extra_vectors, key = [], [], {}
    text = run.text(lang)
    for word in dict.fromkeys(dictionary_words):
        sub_ids, _ = text.encode_words([word])
        if not sub_ids or UNK_ID in sub_ids:
            continue
        if len(sub_ids) == 1 and sub_ids[0] in row_of_id:
            key[word] = words[row_of_id[sub_ids[0]]]
        elif len(sub_ids) > 1 and subwords == "mean":
            key[word] = f"{word}\t(mean)"  # never collides with a vocabulary entry (no tabs there)
            extra_words.append(key[word])
            extra_vectors.append(table[sub_ids].mean(axis=0))
    vectors = np.vstack([table[ids]] + ([np.stack(extra_vectors)] if extra_vectors else []))
    return WordSpace(words + extra_words, vectors[None]), key


def align_word(model: str, source_lang: str, target_lang: str, train_dictionary: str, test_dictionary: str,
               target_model: Optional[str] = None, subwords: str = "single",
               settings: AlignSettings = AlignSettings()) -> dict:
    """``xlt align word``: non-contextual alignment of the two token embedding tables (Figure 4a)."""
    if subwords not in ("single", "mean"):
        raise XltError(f"unknown subword handling {subwords!r} (single or mean)")
    sides = Sides.load(model, source_lang, target_lang, target_model, settings)
    pairs = read_muse_dictionary(train_dictionary) + read_muse_dictionary(test_dictionary)
    source, source_key = embedding_space(sides.source, source_lang, [s for s, _ in pairs], subwords)
    target, target_key = embedding_space(sides.target, target_lang, [t for _, t in pairs], subwords)
    keys = (lambda w: source_key.get(w), lambda w: target_key.get(w))
    train, train_info = usable_pairs(train_dictionary, source, target, *keys)
    test, test_info = usable_pairs(test_dictionary, source, target, *keys)
    log.info(f"dictionaries: {train_info['usable']}/{train_info['pairs']} train and "
             f"{test_info['usable']}/{test_info['pairs']} test pairs usable")
    scores = word_translation(source.vectors[0], target.vectors[0], train, test, settings)
    return {"command": "align word", **sides.describe(), "subwords": subwords, "settings": asdict(settings),
            "space": {"source_words": len(source.words), "target_words": len(target.words)},
            "train": train_info, "test": test_info, "results": [{"layer": "embeddings", **scores}]}


# ---- contextual-word: mean contextual vectors over a corpus ----------------------------------

def read_sentences(path: str, n: int) -> list[str]:
    """The first ``n`` non-empty lines of a corpus."""
    if n < 1:
        raise XltError(f"--n-sentences must be at least 1, got {n}")
    lines = []
    for line in read_lines(path):
        if line.strip():
            lines.append(line)
            if len(lines) == n:
                break
    if not lines:
        raise XltError("no sentences", path)
    return lines


def contextual_space(run: PretrainedRun, lang: str, corpus: str, n_sentences: int, max_words: int,
                     layers: list[int], pooling: str, settings: AlignSettings, chunk: int = 2048) -> WordSpace:
    """Each of the ``max_words`` most frequent words of the corpus: the mean of its contextual
    vectors (``pooling`` over its subwords) over all its occurrences, per layer. [L, V, D]

    The corpus is read through the run's tokenizer and encoded in chunks, so memory is the sums
    [L, V, D] plus one chunk, whatever ``n_sentences`` is.
    """
    tokenizer = run.text(lang).tokenizer
    sentences = [tokenizer.tokenize(line).split() for line in read_sentences(corpus, n_sentences)]
    counts = Counter(w for words in sentences for w in words)
    words = [w for w, _ in counts.most_common(max_words)]
    type_of = {w: t for t, w in enumerate(words)}
    D = run.config.d_model
    sums = torch.zeros(len(layers), len(words) + 1, D, dtype=torch.float64)  # last row: words not kept
    seen = torch.zeros(len(words) + 1, dtype=torch.float64)
    with log.progress(f"{lang} contextual words", total=len(sentences), unit="sentences") as bar:
        for start in range(0, len(sentences), chunk):
            part = sentences[start:start + chunk]
            vectors, index = word_vectors(run, lang, part, layers, pooling, settings.batch_size, settings.device)
            # A truncated sentence keeps only its first words: index.counts() says how many.
            types = [type_of.get(w, len(words)) for words_k, n in zip(part, index.counts()) for w in words_k[:n]]
            types_t = torch.tensor(types, dtype=torch.long)
            sums.index_add_(1, types_t, torch.from_numpy(vectors).double())
            seen.index_add_(0, types_t, torch.ones(len(types), dtype=torch.float64))
            bar.advance(len(part))
    present = (seen[:-1] > 0).nonzero().flatten()
    means = (sums[:, present] / seen[present][None, :, None]).float().numpy()
    return WordSpace([words[t] for t in present.tolist()], means)


def align_contextual_word(model: str, source_lang: str, target_lang: str, source_corpus: str, target_corpus: str,
                          train_dictionary: str, test_dictionary: str, target_model: Optional[str] = None,
                          n_sentences: int = 10000, max_words: int = 50000, layers: Optional[Sequence[int]] = None,
                          pooling: str = "mean", settings: AlignSettings = AlignSettings()) -> dict:
    """``xlt align contextual-word``: per-layer mean contextual word vectors, aligned (Figure 4b)."""
    sides = Sides.load(model, source_lang, target_lang, target_model, settings)
    chosen = sides.layers(layers)
    source = contextual_space(sides.source, source_lang, source_corpus, n_sentences, max_words, chosen, pooling,
                              settings)
    target = contextual_space(sides.target, target_lang, target_corpus, n_sentences, max_words, chosen, pooling,
                              settings)
    # Dictionary words are normalised like the corpus (e.g. lowercased) before the lookup.
    src_tok, tgt_tok = sides.source.text(source_lang).tokenizer, sides.target.text(target_lang).tokenizer
    keys = (lambda w: src_tok.tokenize(w), lambda w: tgt_tok.tokenize(w))
    train, train_info = usable_pairs(train_dictionary, source, target, *keys)
    test, test_info = usable_pairs(test_dictionary, source, target, *keys)
    results = []
    with log.progress("layers", total=len(chosen), unit="layers") as bar:
        for k, layer in enumerate(chosen):
            results.append({"layer": layer, **word_translation(source.vectors[k], target.vectors[k], train, test,
                                                               settings)})
            bar.advance(1)
    return {"command": "align contextual-word", **sides.describe(), "pooling": pooling,
            "n_sentences": n_sentences, "max_words": max_words, "settings": asdict(settings),
            "space": {"source_words": len(source.words), "target_words": len(target.words)},
            "train": train_info, "test": test_info, "layers": chosen, "results": results}
