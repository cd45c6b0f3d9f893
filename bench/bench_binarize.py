"""Benchmark ``xlt binarize``: throughput (lines/s, MB/s) and peak memory for 1M and 10M lines.

Each run binarizes a synthetic BPE'd corpus (short lines of 4-16 subwords drawn Zipf-like from a
30k vocabulary, ~1 % unknown subwords) in a child process, and reads that child's peak resident
set size (``VmHWM`` of ``/proc/self/status``, which exec resets; ``ru_maxrss`` from ``wait4``
would also count the pages the child inherited from this generator process before its exec).
The peak must stay flat as the corpus grows tenfold: binarize writes chunk by chunk and never
holds the corpus. Linux only.

    .venv/bin/python bench/bench_binarize.py            # 1M and 10M lines
    .venv/bin/python bench/bench_binarize.py 200000     # other sizes
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

VOCAB_SIZE = 30_000
CHILD = """
import sys
from xlt.data.store import binarize
binarize(sys.argv[1], sys.argv[2], "en", sys.argv[3])
print(next(line.split()[1] for line in open("/proc/self/status") if line.startswith("VmHWM:")))
"""


def write_vocab(path: Path) -> list[str]:
    words = [f"w{i}" + ("@@" if i % 3 else "") for i in range(VOCAB_SIZE)]
    path.write_text("".join(f"{w} {VOCAB_SIZE - i}\n" for i, w in enumerate(words)), encoding="utf-8")
    return words


def write_corpus(path: Path, n_lines: int, words: list[str], seed: int = 0) -> int:
    """Write ``n_lines`` lines of 4-16 subwords; return the number of bytes."""
    rng = np.random.default_rng(seed)
    vocab = np.array(words + ["oov@@", "zzz"], dtype=object)  # the last two are unknown subwords
    with open(path, "w", encoding="utf-8") as f:
        for start in range(0, n_lines, 100_000):
            n = min(100_000, n_lines - start)
            lengths = rng.integers(4, 17, size=n)
            ids = np.minimum(rng.zipf(1.3, size=int(lengths.sum())) - 1, VOCAB_SIZE - 1)
            ids[rng.random(len(ids)) < 0.01] = VOCAB_SIZE + rng.integers(0, 2)
            tokens = vocab[ids]
            ends = np.cumsum(lengths)
            f.write("".join(" ".join(tokens[e - k:e]) + "\n" for k, e in zip(lengths, ends)))
    return path.stat().st_size


def run(n_lines: int, directory: Path, vocab_path: Path, words: list[str]) -> None:
    corpus = directory / f"corpus_{n_lines}.txt"
    t0 = time.perf_counter()
    size = write_corpus(corpus, n_lines, words)
    gen_s = time.perf_counter() - t0
    prefix = directory / f"store_{n_lines}"
    t0 = time.perf_counter()
    child = subprocess.run([sys.executable, "-c", CHILD, str(corpus), str(vocab_path), str(prefix)],
                           capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if child.returncode != 0:
        raise SystemExit(f"binarize failed:\n{child.stderr}")
    peak_mib = int(child.stdout.split()[-1]) / 1024  # VmHWM is in kB
    store_mb = sum(os.path.getsize(f"{prefix}{s}") for s in (".bin", ".idx")) / 1e6
    print(f"{n_lines:>11,} lines  {size / 1e6:8.1f} MB text  {seconds:7.1f} s  "
          f"{n_lines / seconds:>10,.0f} lines/s  {size / 1e6 / seconds:6.1f} MB/s  "
          f"peak RSS {peak_mib:6.1f} MiB  store {store_mb:7.1f} MB  (corpus generated in {gen_s:.0f} s)",
          flush=True)
    for p in (corpus, *(Path(f"{prefix}{s}") for s in (".bin", ".idx", ".json"))):
        p.unlink()


def main() -> None:
    sizes = [int(a) for a in sys.argv[1:]] or [1_000_000, 10_000_000]
    print(f"binarize benchmark: vocabulary {VOCAB_SIZE:,}, load average {os.getloadavg()[0]:.2f} "
          f"on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(prefix="xlt-bench-binarize-") as tmp:
        directory = Path(tmp)
        vocab_path = directory / "vocab"
        words = write_vocab(vocab_path)
        for n in sizes:
            run(n, directory, vocab_path, words)


if __name__ == "__main__":
    main()
