"""Word2Vec (Mikolov et al., 2013) through gensim: no hand-written word2vec.

The interleaved joint corpus (:class:`~xlt.embed.corpus.JointCorpus`) is first written to one
temporary file beside the output, and gensim trains from that file (``corpus_file`` mode): its
workers then read their own parts of the file in C, so training scales with ``--workers``, where
the iterable mode is held back by one Python thread feeding every worker. Progress comes from
gensim's own progress records (one every second), shown as a rich bar.
"""

from __future__ import annotations

import contextlib
import logging
import re
from typing import Iterator

import numpy as np

from xlt.embed.config import EmbedConfig
from xlt.embed.corpus import JointCorpus
from xlt.utils import log
from xlt.utils.errors import XltError
from xlt.utils.outputs import scratch_file

_EPOCH_PROGRESS = re.compile(r"EPOCH (\d+) ?- PROGRESS: at ([0-9.]+)%")
_EPOCH_END = re.compile(r"EPOCH (\d+): training on")


class _ProgressHandler(logging.Handler):
    """Turns gensim's "EPOCH e - PROGRESS: at p% ..." log records into a progress bar position."""

    def __init__(self, task, epochs: int):
        super().__init__(logging.INFO)
        self.task, self.epochs = task, epochs

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        match, end = _EPOCH_PROGRESS.match(message), _EPOCH_END.match(message)
        # gensim 4 counts epochs from 0; the bar is in epochs.
        if match:
            self.task.update(completed=min(self.epochs, int(match.group(1)) + float(match.group(2)) / 100))
        elif end:
            self.task.update(completed=min(self.epochs, int(end.group(1)) + 1))


@contextlib.contextmanager
def _gensim_progress(task, epochs: int) -> Iterator[None]:
    """Route gensim's INFO records to the bar only (nothing printed), for the duration of training."""
    logger = logging.getLogger("gensim")
    handler = _ProgressHandler(task, epochs)
    saved = (logger.level, logger.propagate)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


def write_joint_file(corpus: JointCorpus, path: str) -> int:
    """The interleaved sentences, one a line, tokens joined by single spaces -> sentences written."""
    n = 0
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for tokens in corpus:
            f.write(" ".join(tokens))
            f.write("\n")
            n += 1
    return n


def train_word2vec(corpus: JointCorpus, config: EmbedConfig, scratch_dir: str) -> tuple[list[str], np.ndarray, dict]:
    """Train Word2Vec on ``corpus`` -> (words by decreasing frequency, vectors float32 [V,D], info).

    ``scratch_dir`` holds the temporary joint corpus file (removed afterwards, also on errors).
    """
    from gensim.models import Word2Vec

    with scratch_file(scratch_dir, ".xlt-embed-joint") as joint:
        with log.progress("joint corpus", unit="sentences") as bar:
            corpus.on_sentence = bar.advance
            n_sentences = write_joint_file(corpus, joint)
            corpus.on_sentence = None
        model = Word2Vec(vector_size=config.dim, window=config.window, min_count=config.min_count,
                         workers=config.workers, sg=int(config.architecture == "skipgram"),
                         negative=config.negative, sample=config.sample, seed=config.seed, epochs=config.epochs)
        with log.progress("word2vec vocabulary", unit="sentences") as bar:
            model.build_vocab(corpus_file=joint)
            bar.advance(n_sentences)
        if len(model.wv) == 0:
            raise XltError(f"no word occurs at least --min-count {config.min_count} times in {corpus.files}")
        with log.progress("word2vec epochs", total=config.epochs, unit="epochs") as bar, \
                _gensim_progress(bar, config.epochs):
            model.train(corpus_file=joint, total_examples=model.corpus_count, total_words=model.corpus_total_words,
                        epochs=config.epochs)
    words = list(model.wv.index_to_key)  # sorted by decreasing count (gensim's sorted_vocab)
    info = {"sentences": n_sentences, "corpus_words": int(model.corpus_total_words),
            "vocabulary": len(words)}
    return words, np.asarray(model.wv.vectors, dtype=np.float32), info
