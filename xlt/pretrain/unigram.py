"""The unigram reference of dev perplexity: what a model that ignores every context scores.

A small masked LM first learns the tokens' frequencies and can sit at that level for millions of
tokens (docs/pretrain.md, "the unigram plateau"); a dev perplexity means little until it is read
against this floor. Each evaluation scores the same masked dev targets under add-one unigram
frequencies of the language's training text, beside the model's own perplexity.
"""

from __future__ import annotations

import numpy as np

from xlt.text.vocab import SPECIALS

COUNT_TOKENS = 50_000_000  # a prefix of the training store: a stable estimate, counted in about a second
COUNT_CHUNK = 1 << 22


def unigram_log_probs(train_tokens: np.ndarray, vocab_size: int, limit: int = COUNT_TOKENS) -> np.ndarray:
    """log p(token) under add-one frequencies of the first ``limit`` of ``train_tokens``, the ids the
    run trains on (a stream's ``tokens``: the store up to its --max-sentences cut, not the whole
    store, so a data-size ablation's floor is a unigram model of its own data). float64 [vocab_size]

    Specials (separators, ``<unk>``, ``<mask>``) are not counted and the ordinary tokens' add-one
    probabilities sum to 1 by themselves, as masking never makes a special a target; the specials'
    entries hold an add-one of their own that no target reads.
    """
    tokens = train_tokens[:limit]   # memory-mapped: counted a chunk at a time, never copied whole
    counts = np.zeros(vocab_size, dtype=np.int64)
    for start in range(0, len(tokens), COUNT_CHUNK):
        chunk = np.bincount(tokens[start:start + COUNT_CHUNK], minlength=vocab_size)
        counts += chunk[:vocab_size]
    counts = counts.astype(np.float64)
    counts[:len(SPECIALS)] = 0
    return np.log((counts + 1.0) / (counts.sum() + vocab_size - len(SPECIALS)))
