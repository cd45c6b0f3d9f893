"""Word retrieval on embedding files: ``xlt align word --emb-a FILE --emb-b FILE``.

The two files are in the word2vec text format (:mod:`xlt.embed.formats`); for a jointly trained
model (``xlt embed train``) both are the same file. Each side's *space* is every whole-word row of
its file (rows ending in the BPE continuation mark ``@@`` are pieces, not words). A dictionary word
is looked up as it is; with ``--codes`` (the BPE codes the training text was segmented with) a word
that BPE splits into several pieces is, with ``--subwords mean``, the mean of its pieces' vectors --
what Liu et al. do for every model ("we tokenized data uniformly with the vocabulary of mBERT") and
for BERT's contextual vectors. ``--subwords single`` keeps whole-word rows only.

It is an analysis of what :mod:`xlt.embed` trains, so it sits here, above that package.

Note that with one joint file the NN and CSLS searches run over the whole joint vocabulary (every
language's words) but each query's own row (:func:`xlt.analysis.align.own_rows`); the Liu et al.
figure is MRR among the test dictionary's target words.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Optional, Sequence

import numpy as np

from xlt.analysis.align import AlignSettings, WordSettings, WordSpace, check_word_inputs, evaluate_spaces
from xlt.analysis.dictionaries import read_muse_dictionary
from xlt.embed.formats import Embeddings, read_word2vec
from xlt.text.tokenize import check_language
from xlt.utils.errors import XltError

CONTINUATION = "@@"


def static_space(emb: Embeddings, dictionary_words: Sequence[str], subwords: str = "single",
                 bpe=None) -> tuple[WordSpace, dict[str, str]]:
    """One side's word space [1, N, D] from an embedding file, and {dictionary word: its key}.

    Rows: the file's whole words, then one extra row per dictionary word that only exists as
    several BPE pieces (``subwords="mean"`` and ``bpe`` given): the mean of the pieces' vectors.
    """
    keep = [r for r, w in enumerate(emb.words) if not w.endswith(CONTINUATION)]
    words = [emb.words[r] for r in keep]
    whole = set(words)
    extra_words, extra_vectors, key = [], [], {}
    wanted = list(dict.fromkeys(dictionary_words))
    pieces = bpe.apply(wanted) if (bpe is not None and subwords == "mean") else [None] * len(wanted)
    for word, split in zip(wanted, pieces):
        if word in whole:
            key[word] = word
        elif split is not None:
            parts = split.split()
            if len(parts) > 1 and all(p in emb.row for p in parts):
                key[word] = f"{word}\t(mean)"  # never a file word (no whitespace there)
                extra_words.append(key[word])
                extra_vectors.append(emb.vectors[[emb.row[p] for p in parts]].mean(axis=0))
    vectors = np.vstack([emb.vectors[keep]] + ([np.stack(extra_vectors)] if extra_vectors else []))
    return WordSpace(words + extra_words, vectors[None]), key


def align_static_word(emb_a: str, emb_b: str, source_lang: str, target_lang: str, train_dictionary: Optional[str],
                      test_dictionary: str, subwords: str = "single", codes: Optional[str] = None,
                      max_words: Optional[int] = None, settings: AlignSettings = AlignSettings(),
                      word: WordSettings = WordSettings()) -> dict:
    """``xlt align word --emb-a/--emb-b``: word translation between two embedding files' spaces.

    ``max_words``: read only the first N rows of each file (the most frequent, MUSE's 200k).
    """
    if subwords not in ("single", "mean"):
        raise XltError(f"unknown subword handling {subwords!r} (single or mean)")
    if max_words is not None and max_words < 10:
        raise XltError(f"--max-words must be at least 10, got {max_words}")
    for lang in (source_lang, target_lang):   # the files name no language: the codes are the record's
        check_language(lang)
    check_word_inputs(word, train_dictionary)
    bpe = None
    if codes is not None:
        from xlt.text.bpe import BPE

        bpe = BPE(codes)
    pairs = [p for path in (train_dictionary, test_dictionary) if path for p in read_muse_dictionary(path)]
    a = read_word2vec(emb_a, max_words)
    b = a if emb_b == emb_a else read_word2vec(emb_b, max_words)
    if a.dim != b.dim:
        raise XltError(f"{emb_a} has {a.dim} dimensions and {emb_b} {b.dim}: one space needs one dimension")
    source, source_key = static_space(a, [s for s, _ in pairs], subwords, bpe)
    target, target_key = static_space(b, [t for _, t in pairs], subwords, bpe)
    evaluated = evaluate_spaces(source, target, train_dictionary, test_dictionary, settings, word, ["embeddings"],
                                lambda w: source_key.get(w), lambda w: target_key.get(w))
    return {"command": "align word", "source": {"embeddings": emb_a, "lang": source_lang},
            "target": {"embeddings": emb_b, "lang": target_lang}, "subwords": subwords, "codes": codes,
            "max_words": max_words, "settings": asdict(settings), **evaluated}
