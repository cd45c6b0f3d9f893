"""Word retrieval (xlt align word) over a 200k-word vocabulary: time and peak memory.

The setting of Liu et al. (2020) at MUSE's scale: a 200k x 300 source space and a 200k x 300
target space (random Gaussian vectors: speed does not depend on the values), a test dictionary of
``--queries`` source words with one or two translations each, and
:func:`xlt.analysis.align.word_translation` with

* ``--map none`` (the joint space) and ``--map procrustes`` (W learned on a training dictionary
  after iterative normalization of both 200k spaces);
* MRR ranked among the dictionary's target words (Liu et al.'s candidates) and among the whole
  200k target vocabulary (``--candidates vocabulary``: queries x 200k, blocked);
* NN P@k over the whole target space; CSLS only with ``--csls`` (its r_S is 200k x 200k products:
  bench/bench_csls.py measures it).

No [V x V] matrix exists at any point: a dense 200k x 200k float32 score matrix would be 160 GB;
peak RSS is printed next to the size of the inputs. ``--io`` also times writing and reading the
target space as a word2vec text file.

Example:
    OMP_NUM_THREADS=2 .venv/bin/python bench/word_retrieval.py --threads 2
    .venv/bin/python bench/word_retrieval.py --vocab 200000 --dim 300 --io --device cuda
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time

import numpy as np
import torch

from xlt.analysis.align import AlignSettings, WordSettings, word_translation
from xlt.embed.formats import read_word2vec, write_word2vec


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux: KiB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--vocab", type=int, default=200_000, help="words in each space")
    parser.add_argument("--dim", type=int, default=300)
    parser.add_argument("--queries", type=int, default=1500, help="test dictionary source words (MUSE: 1,500)")
    parser.add_argument("--train-pairs", type=int, default=5000, help="training pairs for --map procrustes")
    parser.add_argument("--block-size", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--csls", action="store_true", help="also CSLS (slow: 200k x 200k products)")
    parser.add_argument("--io", action="store_true", help="also write and read the target space as word2vec text")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    source = rng.standard_normal((args.vocab, args.dim), dtype=np.float32)
    target = rng.standard_normal((args.vocab, args.dim), dtype=np.float32)
    # Test pairs: query q -> target q, and every other query also -> target q + 1 (several golds).
    queries = rng.choice(args.vocab - 1, size=args.queries, replace=False)
    test = np.concatenate([np.stack([queries, queries], 1), np.stack([queries[::2], queries[::2] + 1], 1)])
    train = np.stack([np.arange(args.train_pairs)] * 2, 1)
    inputs_gb = (source.nbytes + target.nbytes) / 2**30
    print(f"vocabulary {args.vocab:,} x {args.dim} per side ({inputs_gb:.2f} GB of inputs), {args.queries:,} queries,"
          f" {len(test):,} test pairs, {torch.get_num_threads()} threads, device {args.device}")
    print(f"a dense {args.vocab:,} x {args.vocab:,} float32 score matrix would be "
          f"{args.vocab ** 2 * 4 / 2**30:,.0f} GB")
    settings = AlignSettings(block_size=args.block_size, device=args.device)
    for map_ in ("none", "procrustes"):
        for candidates in ("dictionary", "vocabulary"):
            word = WordSettings(map=map_, candidates=candidates, csls=args.csls)
            start = time.perf_counter()
            scores, _ = word_translation(source, target, train, test, settings, word)
            seconds = time.perf_counter() - start
            print(f"map {map_:10s} candidates {candidates:10s} ({scores['mrr_candidates']:>7,}): "
                  f"{seconds:6.1f} s   MRR {scores['mrr']:.4f}   peak RSS {peak_rss_gb():.2f} GB")
    if args.io:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "target.txt")
            start = time.perf_counter()
            write_word2vec(path, [f"w{i}" for i in range(args.vocab)], target)
            written = time.perf_counter() - start
            start = time.perf_counter()
            emb = read_word2vec(path)
            read = time.perf_counter() - start
            print(f"word2vec text: write {written:.1f} s, read {read:.1f} s ({os.path.getsize(path) / 2**30:.2f} GB file, "
                  f"{len(emb.words):,} rows); peak RSS {peak_rss_gb():.2f} GB")


if __name__ == "__main__":
    main()
