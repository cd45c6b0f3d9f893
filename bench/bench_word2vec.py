"""Word2Vec (xlt embed train --method word2vec) on 1M sentences: wall time, words/s, workers busy.

Issue 12's target: training on 1M sentences uses every worker. The corpus is synthetic (two
languages of ``--sentences / 2`` sentences each, Zipf-distributed words, 20 tokens a sentence on
average), since speed depends on token counts and vocabulary size, not on what the words mean. The
figure "workers busy" is the process's CPU time over wall time during training: near ``--workers``
means every worker thread is kept fed (gensim's corpus_file mode reads the file in C per worker).
Writing the interleaved corpus file and the output vectors is included in the wall time.

Example:
    .venv/bin/python bench/bench_word2vec.py                     # 1M sentences, every core
    .venv/bin/python bench/bench_word2vec.py --sentences 200000 --workers 1 --dim 300
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from xlt.embed.config import EmbedConfig  # noqa: E402
from xlt.embed.train import train_embeddings  # noqa: E402


def write_language(path: str, lang: str, n: int, vocab: int, rng: np.random.Generator) -> int:
    """``n`` sentences of Zipf(1.1) word ids below ``vocab``, lengths 5-35 -> tokens written."""
    tokens = 0
    with open(path, "w", encoding="utf-8") as f:
        for start in range(0, n, 10_000):
            lengths = rng.integers(5, 36, size=min(10_000, n - start))
            ids = rng.zipf(1.1, size=int(lengths.sum())) % vocab
            for sentence in np.split(ids, np.cumsum(lengths)[:-1]):
                f.write(" ".join(f"{lang}{i}" for i in sentence) + "\n")
            tokens += int(lengths.sum())
    return tokens


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sentences", type=int, default=1_000_000, help="sentences in all (half per language)")
    ap.add_argument("--vocab", type=int, default=200_000, help="word types per language before min-count")
    ap.add_argument("--dim", type=int, default=100, help="vector dimension (Liu et al.: 768)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--workers", type=int, default=0, help="0: every core")
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        texts, tokens = [], 0
        for lang in ("en", "fr"):
            path = os.path.join(tmp, f"{lang}.txt")
            tokens += write_language(path, lang, args.sentences // 2, args.vocab, rng)
            texts.append((lang, path))
        config = EmbedConfig(method="word2vec", dim=args.dim, epochs=args.epochs, workers=args.workers)
        wall, cpu = time.time(), cpu_seconds()
        description = train_embeddings(texts, os.path.join(tmp, "w2v.txt"), config)
        wall, cpu = time.time() - wall, cpu_seconds() - cpu
    print(f"word2vec: {args.sentences:,} sentences, {tokens:,} tokens, {description['vocabulary']:,} words kept, "
          f"dim {args.dim}, {args.epochs} epoch(s), {config.workers} workers")
    print(f"  wall {wall:.1f} s ({description['seconds']} s in training), {tokens * args.epochs / wall:,.0f} tokens/s")
    print(f"  workers busy: {cpu / wall:.2f} of {config.workers} (CPU time / wall time)")
    print(f"  peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB")


if __name__ == "__main__":
    main()
