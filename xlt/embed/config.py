"""The settings of ``xlt embed train``: one typed config, help text written once (CLI options too)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

from xlt.utils.errors import XltError

METHODS = ("word2vec", "glove")
ARCHITECTURES = ("cbow", "skipgram")

# Per-method defaults where the two reference implementations differ (gensim / word2vec.c for
# Word2Vec; glove.c and cooccur.c for GloVe). Liu et al. give neither, so each tool's own is used.
DEFAULT_WINDOW = {"word2vec": 5, "glove": 15}
DEFAULT_EPOCHS = {"word2vec": 5, "glove": 25}
WORD2VEC_ONLY = ("architecture", "negative", "sample")
GLOVE_ONLY = ("x_max", "alpha", "learning_rate", "batch_size", "device")


@dataclass
class EmbedConfig:
    """How static embeddings are trained (``xlt embed train``)."""

    method: str = field(default="word2vec", metadata={"metavar": "[word2vec|glove]", "help": "word2vec (gensim) or glove (xlt's GloVe)."})
    dim: int = field(default=768, metadata={"help": "Vector dimension (Liu et al.: 768, as their BERT)."})
    window: Optional[int] = field(default=None, metadata={
        "help": "Context window: words on each side [default: word2vec 5, glove 15]."})
    epochs: Optional[int] = field(default=None, metadata={
        "help": "Passes over the corpus (GloVe: over the co-occurrence matrix) [default: word2vec 5, glove 25]."})
    min_count: int = field(default=5, metadata={
        "help": "Words seen fewer times than this in all languages together are dropped."})
    workers: int = field(default=0, metadata={
        "help": "Worker threads (0 = every CPU core). Word2Vec is bit-reproducible only with 1."})
    seed: int = field(default=0, metadata={"help": "Random seed (initialisation, sampling, GloVe's shuffles)."})
    architecture: str = field(default="cbow", metadata={
        "metavar": "[cbow|skipgram]", "help": "word2vec: cbow (gensim's default) or skipgram."})
    negative: int = field(default=5, metadata={"help": "word2vec: negative samples per positive one."})
    sample: float = field(default=1e-3, metadata={"help": "word2vec: down-sampling threshold of frequent words."})
    x_max: float = field(default=100.0, metadata={"help": "glove: weighting cut-off x_max (the paper: 100)."})
    alpha: float = field(default=0.75, metadata={"help": "glove: weighting exponent alpha (the paper: 3/4)."})
    learning_rate: float = field(default=0.05, metadata={"help": "glove: AdaGrad learning rate (glove.c: 0.05)."})
    batch_size: int = field(default=4096, metadata={"help": "glove: co-occurrence entries per AdaGrad step."})
    device: str = field(default="auto", metadata={
        "metavar": "DEVICE", "help": "glove: torch device: auto (CUDA when present, else CPU), cpu, cuda or cuda:N."})

    def __post_init__(self) -> None:
        # Everything is checked before the corpus is read: a typo must not cost a pass over 1M lines.
        if self.method not in METHODS:
            raise XltError(f"--method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if self.architecture not in ARCHITECTURES:
            raise XltError(f"--architecture must be one of {', '.join(ARCHITECTURES)}, got {self.architecture!r}")
        if self.window is None:
            self.window = DEFAULT_WINDOW[self.method]
        if self.epochs is None:
            self.epochs = DEFAULT_EPOCHS[self.method]
        for name in ("dim", "window", "epochs", "min_count", "batch_size"):
            if getattr(self, name) < 1:
                raise XltError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.workers < 0:
            raise XltError(f"--workers must be 0 (every core) or more, got {self.workers}")
        if self.negative < 1 or not self.sample >= 0:   # not >=: NaN too
            raise XltError(f"--negative must be at least 1 and --sample at least 0, got {self.negative} and {self.sample}")
        if not 0 <= self.seed < 2 ** 32:   # numpy's and gensim's range
            raise XltError(f"--seed must be between 0 and 2^32 - 1, got {self.seed}")
        if self.x_max <= 0 or self.alpha <= 0 or self.learning_rate <= 0:
            raise XltError("--x-max, --alpha and --learning-rate must be positive")
        if self.method == "glove":
            from xlt.utils.device import resolve_device

            self.device = str(resolve_device(self.device))  # "auto" becomes what this machine has
        if self.workers == 0:
            self.workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
