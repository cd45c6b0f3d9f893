"""How fast the pretraining data side produces batches on one CPU core.

Builds a synthetic token store of 1M sentences (5-60 subwords each, ids uniform over an 80k
vocabulary, so uint32 as for Wu et al.'s joint 80k BPE) in a temporary directory, then times, with
torch limited to one thread:

* ``stream``: :class:`LanguageStream` batches (shuffled windows read from the memmap),
* ``mask``: :class:`MaskTransform` on one such batch (same-language random replacement),
* ``stream+mask+sampler``: what the training loop asks for at every step.

Batches are 96 x 256 (Wu et al.'s per-GPU batch). The figures are for a warm page cache (the
store was just written). Private (anonymous) memory stays flat while streaming, so the corpus is
never copied; the memmap pages the windows touched show up as file-backed, reclaimable memory.

Example:
    .venv/bin/python bench/bench_streams.py
    .venv/bin/python bench/bench_streams.py --sentences 200000 --batches 100
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
import torch

from xlt.data.masking import MaskingConfig, MaskTransform
from xlt.data.sampling import LanguageSampler
from xlt.data.store import TokenStore
from xlt.data.streams import LanguageStream
from xlt.text.vocab import SPECIALS

EOS = SPECIALS.index("</s>")


def write_store(directory: str, n_sentences: int, vocab_size: int, seed: int = 0) -> TokenStore:
    """A store in the real layout, written chunk by chunk (the generator never holds the corpus)."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(5, 61, n_sentences)
    offsets = np.zeros(n_sentences + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(lengths + 1)
    offsets.tofile(os.path.join(directory, "en.idx"))
    with open(os.path.join(directory, "en.bin"), "wb") as f:
        for first in range(0, n_sentences, 100_000):
            chunk_lengths = lengths[first:first + 100_000]
            chunk = rng.integers(len(SPECIALS), vocab_size, int(chunk_lengths.sum() + len(chunk_lengths)),
                                 dtype=np.uint32)
            chunk[np.cumsum(chunk_lengths + 1) - 1] = EOS
            chunk.tofile(f)
    tokens = np.memmap(os.path.join(directory, "en.bin"), dtype=np.uint32, mode="r")
    idx = np.memmap(os.path.join(directory, "en.idx"), dtype=np.int64, mode="r")
    return TokenStore(os.path.join(directory, "en"), {"language": "en"}, tokens, idx)


def resident_mb() -> dict[str, float]:
    """Current anonymous and file-backed resident memory of this process (Linux), in MB."""
    with open("/proc/self/status", encoding="ascii") as f:
        fields = dict(line.split(":", 1) for line in f)
    return {key: int(fields[key].split()[0]) / 1024 for key in ("RssAnon", "RssFile")}


def rate(label: str, seconds: float, batches: int, tokens_per_batch: int) -> None:
    per_s = batches / seconds
    print(f"{label:<22} {per_s:10,.1f} batches/s {per_s * tokens_per_batch:14,.0f} tokens/s "
          f"{1000 * seconds / batches:8.2f} ms/batch")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=1_000_000)
    parser.add_argument("--vocab-size", type=int, default=80_000)
    parser.add_argument("--batch-size", type=int, default=96)
    parser.add_argument("--stream-len", type=int, default=256)
    parser.add_argument("--batches", type=int, default=300)
    args = parser.parse_args()
    torch.set_num_threads(1)
    tokens_per_batch = args.batch_size * args.stream_len

    with tempfile.TemporaryDirectory() as directory:
        t0 = time.perf_counter()
        store = write_store(directory, args.sentences, args.vocab_size)
        size_mb = store.tokens.nbytes / 1e6
        print(f"store: {len(store):,} sentences, {len(store.tokens):,} tokens, {size_mb:,.0f} MB "
              f"(written in {time.perf_counter() - t0:.1f} s); batch {args.batch_size} x {args.stream_len}, "
              f"one thread")
        before = resident_mb()

        t0 = time.perf_counter()
        stream = LanguageStream(store, stream_len=args.stream_len, batch_size=args.batch_size, seed=0)
        print(f"stream set-up: {1000 * (time.perf_counter() - t0):.2f} ms for {stream.n_windows:,} windows")
        next(stream)  # first touch of the code paths
        t0 = time.perf_counter()
        for _ in range(args.batches):
            batch = next(stream)
        rate("stream", time.perf_counter() - t0, args.batches, tokens_per_batch)

        ids = {"en": torch.arange(len(SPECIALS), args.vocab_size // 2)}
        masking = MaskTransform(MaskingConfig(random_within_language=True), SPECIALS.index("<mask>"),
                                range(len(SPECIALS)), args.vocab_size, ids)
        generator = torch.Generator().manual_seed(0)
        t0 = time.perf_counter()
        for _ in range(args.batches):
            masked = masking(batch, "en", generator)
        rate("mask", time.perf_counter() - t0, args.batches, tokens_per_batch)

        sampler = LanguageSampler({"en": len(store)}, seed=0)
        t0 = time.perf_counter()
        for _ in range(args.batches):
            lang = sampler.next()
            masked = masking(next(stream), lang, generator)
        rate("stream+mask+sampler", time.perf_counter() - t0, args.batches, tokens_per_batch)
        print(f"predicted positions per batch: {len(masked.target_ids):,}")
        after = resident_mb()
        print(f"private memory {before['RssAnon']:,.0f} -> {after['RssAnon']:,.0f} MB, file-backed "
              f"{before['RssFile']:,.0f} -> {after['RssFile']:,.0f} MB while streaming "
              f"{2 * args.batches + 1:,} batches (the store is {size_mb:,.0f} MB)")


if __name__ == "__main__":
    main()
