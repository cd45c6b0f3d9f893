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

The source and target sides are two models (monolingual BERTs) or one multilingual model's two
languages; a model is any ``--model`` through the :class:`~xlt.model.protocol.TextModel` seam (an xlt
run, a transformers directory, ``hf:NAME``), so every procedure has one code path (embedding files:
:mod:`xlt.analysis.static_words`). Settings: :mod:`xlt.analysis.align_settings`. At the word levels, :class:`WordSettings` chooses the
Procrustes map or none (one joint space measured as it is, Liu et al.), the MRR candidates, a
breakdown of the MRR by each source word's part of speech, and the test pairs scored
(:mod:`xlt.analysis.pair_sets`: ``--pairs-out``/``--pairs-from``, one pair set for several systems).
Shapes: L layers, N words/sentences, D dimensions.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Optional, Sequence

import numpy as np
import torch

from xlt.analysis.align_settings import CANDIDATES, MAPS, AlignSettings, WordSettings  # noqa: F401 (the library's names)
from xlt.analysis.dictionaries import NO_TAG, pos_breakdown, rank_breakdown, read_muse_dictionary, read_pos_lexicon
from xlt.analysis.extract import resolve_layers, word_vectors
from xlt.analysis.pair_sets import ScoredPairs, scored_pairs, write_pairs
from xlt.analysis.procrustes import align_spaces, unit_length
from xlt.analysis.retrieval import gold_ranks, precision_at_k, rank_scores, topk_cosine, topk_csls
from xlt.analysis.space_cache import cached_space, model_identity, space_key
from xlt.loader.text_model import load_text_model
from xlt.model.protocol import TextModel
from xlt.utils import log
from xlt.utils.errors import XltError, require_file
from xlt.utils.outputs import atomic_path
from xlt.utils.textio import file_sha256, read_lines

KS = (1, 5, 10)


@dataclass
class Sides:
    """The two models being aligned: ``source``'s language ``source_lang`` and ``target``'s ``target_lang``.

    Each is any ``--model`` (:func:`~xlt.loader.text_model.load_text_model`): an xlt run, a transformers
    directory or ``hf:NAME``; the procedures see only the :class:`TextModel` protocol.
    """

    source: TextModel
    source_lang: str
    target: TextModel
    target_lang: str

    @classmethod
    def load(cls, model: str, source_lang: str, target_lang: str, target_model: Optional[str],
             settings: AlignSettings) -> "Sides":
        source = load_text_model(model, settings.checkpoint, settings.device, settings.finetuned)
        # --finetuned is --model's: a second model is read as it was pretrained
        target = source if target_model is None else load_text_model(target_model, settings.checkpoint,
                                                                     settings.device)
        source.check_language(source_lang)  # an unknown language is a one-line error before any work
        target.check_language(target_lang)
        if source.d_model != target.d_model:  # a rotation (or a cosine) needs one width, found out before any work
            raise XltError(f"the two models differ in width: --model has d_model {source.d_model}, --target-model "
                           f"{target.d_model} (an orthogonal map needs one)", target.source)
        return cls(source, source_lang, target, target_lang)

    def layers(self, layers: Optional[Sequence[int]]) -> list[int]:
        """Layers both models have (0 = embeddings); out of range -> XltError."""
        return resolve_layers(min(self.source.n_layers, self.target.n_layers), layers)

    def describe(self) -> dict:
        def side(model: TextModel, lang: str) -> dict:
            described = model.describe()
            # "model": pretrained, or the fine-tuned run read (--finetuned), or random:SEED
            return {"run": model.source, "kind": described["kind"], "model": described.get("model", "pretrained"),
                    "lang": lang, "step": model.step}
        return {"source": side(self.source, self.source_lang), "target": side(self.target, self.target_lang)}


@dataclass
class WordSpace:
    """The words of one language and their vectors: row r is ``words[r]``; vectors [L, N, D]."""

    words: list[str]
    vectors: np.ndarray

    def __post_init__(self) -> None:
        self.row = {w: r for r, w in enumerate(self.words)}


def _check_target_size(n: int) -> None:
    if n <= max(KS):
        # over exactly k candidates every gold is within the top k: P@k would be 1 whatever the space
        raise XltError(f"the target space has only {n} words: P@{max(KS)} needs more than {max(KS)} "
                       "candidates (more text, a larger --max-words or a larger vocabulary)")


def own_rows(source: WordSpace, target: WordSpace, layer: int = 0) -> np.ndarray:
    """Each source row's own row in the target space, -1 where it has none: int64 [Ns].

    Two spaces cut from one joint space (one embedding file or table for both languages) share rows:
    a shared row holds the same word with the same vector. A word spelt alike in two separate spaces
    (two files, two models, two corpora) has two vectors, so it has no own row there.
    """
    own = np.full(len(source.words), -1, dtype=np.int64)
    shared = np.array([(s, target.row[w]) for s, w in enumerate(source.words) if w in target.row], dtype=np.int64)
    if len(shared):
        same = (source.vectors[layer, shared[:, 0]] == target.vectors[layer, shared[:, 1]]).all(axis=1)
        own[shared[same, 0]] = shared[same, 1]
    return own


def _gold_sets(test: np.ndarray, queries: np.ndarray) -> list[set[int]]:
    """For each query row (sorted, unique), its gold target rows in ``test`` [P,2]: one pass, O(P)."""
    gold: dict[int, set[int]] = {}
    for s_row, t_row in test.tolist():
        gold.setdefault(s_row, set()).add(t_row)
    return [gold[q] for q in queries.tolist()]


def word_translation(source: np.ndarray, target: np.ndarray, train: Optional[np.ndarray], test: np.ndarray,
                     settings: AlignSettings, word: WordSettings = WordSettings(),
                     tags: Optional[Sequence[str]] = None, same_spelling: Optional[np.ndarray] = None,
                     own: Optional[np.ndarray] = None) -> tuple[dict, Optional[np.ndarray]]:
    """Evaluate source -> target translation of ``test``'s source words, after a map learned on
    ``train`` (``word.map="procrustes"``) or in the joint space as it is (``"none"``).

    source [Ns,D], target [Nt,D]: whole spaces; train/test int [P,2] rows; tags [Ns]: a UPOS per
    source row (``word.pos_from``); same_spelling bool [P]: test pairs of one string. NN and CSLS
    P@k search the whole target space (CSLS's r_S the whole mapped source space); MRR (Liu et al.)
    ranks ``word.candidates`` by cosine, and the same ranks give ``ranked`` P@k, the per-tag
    breakdown and the per-spelling one (a query is "identical" when one of its gold translations is
    its own string: in one joint space of one row per string that pair is rank 1 whatever the model
    learned). own [Ns]: each source row's own row in the target space (:func:`own_rows`; -1: none),
    which NN, CSLS and the MRR's ranking leave out unless it is a gold translation (a pair of one
    string, then rank 1); CSLS's neighbourhoods leave every vector's own row out. Returns
    (scores, W [D,D] or None).
    """
    _check_target_size(len(target))
    if word.map == "procrustes":
        mapped, target_n, W = align_spaces(source, target, train, settings.iternorm_rounds)
    else:
        mapped, target_n, W = unit_length(source), unit_length(target), None
    queries = np.unique(test[:, 0])
    gold = _gold_sets(test, queries)
    kw = {"block_size": settings.block_size, "device": settings.device}
    exclude, neighbourhoods = None, None
    if own is not None and (own >= 0).any():
        # Else each query finds itself first (cosine 1) and P@1 counts only pairs of one string.
        exclude = np.array([-1 if o in g else o for o, g in zip(own[queries].tolist(), gold)], dtype=np.int64)
        target_own = np.full(len(target_n), -1, dtype=np.int64)
        target_own[own[own >= 0]] = np.flatnonzero(own >= 0)
        neighbourhoods = (own[queries], target_own)
    _, nn = topk_cosine(mapped[queries], target_n, k=max(KS), exclude=exclude, **kw)
    left_out = 0 if exclude is None else int((exclude >= 0).sum())
    scores: dict = {"queries": int(len(queries)), "own_rows_left_out": left_out, "nn": precision_at_k(nn, gold, KS)}
    if word.csls:
        _, csls = topk_csls(mapped[queries], target_n, k=max(KS), source_space=mapped, csls_k=settings.csls_k,
                            exclude=exclude, own_rows=neighbourhoods, **kw)
        scores["csls"] = precision_at_k(csls, gold, KS)
    candidates = np.unique(test[:, 1]) if word.candidates == "dictionary" else np.arange(len(target_n))
    position = {row: p for p, row in enumerate(candidates.tolist())}
    ranked_out = None if exclude is None else np.array([position.get(o, -1) for o in exclude.tolist()], dtype=np.int64)
    ranks = gold_ranks(mapped[queries], target_n[candidates], [{position[g] for g in s} for s in gold], **kw,
                       exclude=ranked_out)
    # a query whose own row is left out ranks one candidate fewer
    ranked_each = len(candidates) - int(ranked_out is not None and (ranked_out >= 0).any())
    ranked = rank_scores(ranks, KS, candidates=ranked_each)
    scores.update(mrr=ranked.pop("mrr"), mrr_candidates=int(len(candidates)), ranked=ranked)
    if tags is not None:
        scores["by_pos"] = pos_breakdown(ranks, [tags[q] for q in queries.tolist()], ranked_each)
    if same_spelling is not None:
        identical = set(test[np.asarray(same_spelling, dtype=bool), 0].tolist())
        scores["by_spelling"] = rank_breakdown(ranks, ["identical" if q in identical else "different"
                                                       for q in queries.tolist()], len(candidates))
    return scores, W


def source_tags(space: WordSpace, conllu: str) -> list[str]:
    """Each source row's most frequent UPOS in ``conllu`` (:data:`NO_TAG` if absent). [N]"""
    lexicon = read_pos_lexicon(conllu)
    # A "(mean)" row of several subwords is tagged as its word.
    return [lexicon.get(w.split("\t")[0].lower(), NO_TAG) for w in space.words]


def save_maps(path: str, maps: Sequence[np.ndarray], labels: Sequence) -> dict:
    """Write W ([D,D] for one layer, else [L,D,D]) as float32 .npy, atomically; describe it."""
    W = np.stack(maps).astype(np.float32)
    W = W[0] if len(maps) == 1 else W
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.save(f, W)  # a file object: np.save would append ".npy" to the temporary name
    return {"file": path, "shape": list(W.shape), "layers": list(labels),
            "orientation": "iternorm(x_source) @ W -> target space"}


def check_word_inputs(word: WordSettings, train_dictionary: Optional[str]) -> None:
    """Before any work: the settings fit the dictionaries, and a --pos-from file is one the breakdown
    can read (read again once the spaces are built, cheaply next to them)."""
    word.check(train_dictionary)
    if word.pos_from is not None:
        read_pos_lexicon(word.pos_from)


def evaluate_spaces(source: WordSpace, target: WordSpace, train_dictionary: Optional[str], test_dictionary: str,
                    settings: AlignSettings, word: WordSettings, labels: Sequence, source_key=str,
                    target_key=str) -> dict:
    """Dictionary pairs, then :func:`word_translation` per layer (``labels``), the POS breakdown and
    the saved map: the part of the result every word-level procedure shares."""
    word.check(train_dictionary)
    _check_target_size(len(target.words))  # before the log line: an error stays the only line

    def pairs(path: str, pairs_from=()) -> ScoredPairs:
        return scored_pairs(path, source, target, source_key, target_key, word.drop_identical, pairs_from)

    train = pairs(train_dictionary) if train_dictionary is not None else None
    test = pairs(test_dictionary, word.pairs_from)
    train_info = train.info if train else None
    log.info("dictionaries: " + (f"{train_info['usable']}/{train_info['pairs']} train and " if train_info else "")
             + f"{test.info['usable']}/{test.info['pairs']} test pairs scored"
             + (" (those of --pairs-from)" if word.pairs_from else ""))
    tags = source_tags(source, word.pos_from) if word.pos_from else None
    same_spelling = np.array([source.words[s] == target.words[t] for s, t in test.rows.tolist()], dtype=bool)
    results, maps = [], []
    with log.progress("layers", total=len(labels), unit="layers") as bar:
        for k, label in enumerate(labels):
            scores, W = word_translation(source.vectors[k], target.vectors[k], None if train is None else train.rows,
                                         test.rows, settings, word, tags, same_spelling, own_rows(source, target, k))
            results.append({"layer": label, **scores})
            maps.append(W)
            bar.advance(1)
    if word.pairs_out is not None:  # before the result JSON: a finished result has its pairs file
        write_pairs(word.pairs_out, test.pairs)
        test.info["pairs_out"] = word.pairs_out
    out = {"map": word.map, "candidates": word.candidates, "pos_from": word.pos_from,
           "space": {"source_words": len(source.words), "target_words": len(target.words)},
           "train": train_info, "test": test.info, "results": results}
    if word.save_map is not None:
        out["saved_map"] = save_maps(word.save_map, maps, labels)
    return out


# ---- word: the token embedding tables -------------------------------------------------------

def embedding_space(model: TextModel, lang: str, dictionary_words: Sequence[str],
                    subwords: str) -> tuple[WordSpace, dict]:
    """One language's word space from the model's input token embedding table.

    Rows are the table's whole-word tokens of ``lang`` (:meth:`TextModel.input_embeddings`: an xlt
    run's whole-word vocabulary entries of the language; a transformers model's tokens that are a
    word by themselves, every language's). A dictionary word is looked up through the model's own
    tokenizer: ``subwords="single"`` keeps it only if it is one whole-word token (the XLM authors'
    practice); ``"mean"`` also represents a word of several subwords by their mean, added as an extra
    row. Returns the space [1, N, D] and {dictionary word: its key in the space}.
    """
    table, whole = model.input_embeddings(lang)
    ids, words = list(whole), list(whole.values())
    extra_words, extra_vectors, key = [], [], {}
    for word in dict.fromkeys(dictionary_words):
        sub_ids, _ = model.encode_words(lang, [word])
        if not sub_ids or model.unk_id in sub_ids:
            continue
        if len(sub_ids) == 1 and sub_ids[0] in whole:
            key[word] = whole[sub_ids[0]]
        elif len(sub_ids) > 1 and subwords == "mean":
            key[word] = f"{word}\t(mean)"  # never collides with a vocabulary entry (no tabs there)
            extra_words.append(key[word])
            extra_vectors.append(table[sub_ids].mean(axis=0))
    vectors = np.vstack([table[ids]] + ([np.stack(extra_vectors)] if extra_vectors else []))
    return WordSpace(words + extra_words, vectors[None]), key


def align_word(model: str, source_lang: str, target_lang: str, train_dictionary: Optional[str], test_dictionary: str,
               target_model: Optional[str] = None, subwords: str = "single",
               settings: AlignSettings = AlignSettings(), word: WordSettings = WordSettings()) -> dict:
    """``xlt align word``: the two token embedding tables, mapped (Figure 4a) or as one joint space."""
    if subwords not in ("single", "mean"):
        raise XltError(f"unknown subword handling {subwords!r} (single or mean)")
    check_word_inputs(word, train_dictionary)
    sides = Sides.load(model, source_lang, target_lang, target_model, settings)
    pairs = [p for path in (train_dictionary, test_dictionary) if path for p in read_muse_dictionary(path)]
    source, source_key = embedding_space(sides.source, source_lang, [s for s, _ in pairs], subwords)
    target, target_key = embedding_space(sides.target, target_lang, [t for _, t in pairs], subwords)
    evaluated = evaluate_spaces(source, target, train_dictionary, test_dictionary, settings, word, ["embeddings"],
                                lambda w: source_key.get(w), lambda w: target_key.get(w))
    return {"command": "align word", **sides.describe(), "subwords": subwords, "settings": asdict(settings),
            **evaluated}


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


def contextual_space(run: TextModel, lang: str, corpus: str, n_sentences: int, max_words: int,
                     layers: list[int], pooling: str, settings: AlignSettings, chunk: int = 2048) -> WordSpace:
    """Each of the ``max_words`` most frequent words of the corpus: the mean of its contextual
    vectors (``pooling`` over its subwords) over all its occurrences, per layer. [L, V, D]

    The corpus is split into words by the model's own pipeline (:meth:`TextModel.split_words`) and
    encoded in chunks, so memory is the sums [L, V, D] plus one chunk, whatever ``n_sentences`` is.
    """
    sentences = [run.split_words(lang, line) for line in read_sentences(corpus, n_sentences)]
    counts = Counter(w for words in sentences for w in words)
    words = [w for w, _ in counts.most_common(max_words)]
    type_of = {w: t for t, w in enumerate(words)}
    D = run.d_model
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


def cached_contextual_space(run: TextModel, lang: str, corpus: str, n_sentences: int, max_words: int,
                            layers: list[int], pooling: str, settings: AlignSettings, cache: Optional[str],
                            identity: Optional[dict] = None) -> tuple[WordSpace, Optional[dict]]:
    """:func:`contextual_space`, read from the ``cache`` directory when it holds that space
    (:mod:`xlt.analysis.space_cache`); returns it and the cache's record (None without one).
    ``identity``: the model's :func:`~xlt.analysis.space_cache.model_identity`, when the caller has it."""
    def compute() -> tuple[list[str], np.ndarray]:
        space = contextual_space(run, lang, corpus, n_sentences, max_words, layers, pooling, settings)
        return space.words, space.vectors

    if cache is None:
        return WordSpace(*compute()), None
    key = space_key(identity or model_identity(run), lang, file_sha256(corpus), n_sentences, max_words, layers,
                    pooling, settings.batch_size, torch.device(settings.device).type)
    (words, vectors), record = cached_space(cache, key, compute)
    return WordSpace(words, vectors), record


def align_contextual_word(model: str, source_lang: str, target_lang: str, source_corpus: str, target_corpus: str,
                          train_dictionary: Optional[str], test_dictionary: str, target_model: Optional[str] = None,
                          n_sentences: int = 10000, max_words: int = 50000, layers: Optional[Sequence[int]] = None,
                          pooling: str = "mean", settings: AlignSettings = AlignSettings(),
                          word: WordSettings = WordSettings(), space_cache: Optional[str] = None) -> dict:
    """``xlt align contextual-word``: per-layer mean contextual word vectors (Figure 4b; with
    ``word.map="none"`` Liu et al.'s BERT word retrieval: each word the mean of its contexts).
    ``space_cache``: a directory where each language's space is kept and reused."""
    check_word_inputs(word, train_dictionary)
    if space_cache is not None:
        for corpus in (source_corpus, target_corpus):  # stdin or a pipe would be read up by the checksum
            if not os.path.isfile(require_file(corpus, "corpus")):
                raise XltError("--space-cache keys a space by its corpus's checksum: give the corpus as a regular "
                               "file, not - or a pipe", corpus)
    sides = Sides.load(model, source_lang, target_lang, target_model, settings)
    chosen = sides.layers(layers)
    # One model for both sides (Liu et al.'s joint BERT) is identified once.
    identities = ({id(m): model_identity(m) for m in (sides.source, sides.target)} if space_cache is not None
                  else {})
    source, source_cached = cached_contextual_space(sides.source, source_lang, source_corpus, n_sentences, max_words,
                                                    chosen, pooling, settings, space_cache,
                                                    identities.get(id(sides.source)))
    target, target_cached = cached_contextual_space(sides.target, target_lang, target_corpus, n_sentences, max_words,
                                                    chosen, pooling, settings, space_cache,
                                                    identities.get(id(sides.target)))
    # Dictionary words are segmented like the corpus (e.g. lowercased) before the lookup.
    evaluated = evaluate_spaces(source, target, train_dictionary, test_dictionary, settings, word, chosen,
                                lambda w: " ".join(sides.source.split_words(source_lang, w)),
                                lambda w: " ".join(sides.target.split_words(target_lang, w)))
    return {"command": "align contextual-word", **sides.describe(), "pooling": pooling,
            "n_sentences": n_sentences, "max_words": max_words, "settings": asdict(settings), "layers": chosen,
            **({"space_cache": {"source": source_cached, "target": target_cached}} if space_cache else {}),
            **evaluated}
