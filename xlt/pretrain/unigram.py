"""The unigram reference of dev perplexity: what a model that ignores every context scores.

A small masked LM first learns the tokens' frequencies and can sit at that level for millions of
tokens (docs/pretrain.md, "the unigram plateau"); a dev perplexity means little until it is read
against this floor. Each evaluation scores the same masked dev targets under add-one unigram
frequencies of the language's training text, beside the model's own perplexity.
"""

from __future__ import annotations

import numpy as np

from xlt.data.store import TokenStore
from xlt.text.vocab import SPECIALS

COUNT_TOKENS = 50_000_000  # a prefix of the training store: a stable estimate, counted in about a second


def unigram_log_probs(store: TokenStore, vocab_size: int, limit: int = COUNT_TOKENS) -> np.ndarray:
    """log p(token) under add-one frequencies of the store's first ``limit`` ids. float64 [vocab_size]

    Specials (separators, ``<mask>``) are not counted and the smoothing mass is spread over the
    ordinary tokens, as if specials were never targets (``<unk>`` can be one: it keeps its add-one).
    """
    counts = np.bincount(np.asarray(store.tokens[:limit], dtype=np.int64), minlength=vocab_size)
    counts = counts[:vocab_size].astype(np.float64)
    counts[:len(SPECIALS)] = 0
    return np.log((counts + 1.0) / (counts.sum() + vocab_size - len(SPECIALS)))
