"""Pretraining streams: a language's token store cut into fixed-length windows, read lazily.

XLM's StreamDataset (the code Wu et al. used) joins a language's sentences with ``</s>`` after each
one and one more at the very start, cuts that stream into windows of 256 tokens *across* sentence
boundaries (no padding), and shuffles the windows. xlt keeps that stream but never materialises it:
the stream is the token store's memmap, a window is a contiguous slice of it read when its batch is
built, and each epoch's shuffle is a keyed permutation evaluated index by index.

Layout (``T`` = ``stream_len``; ``N`` = ``max_sentences`` or every sentence of the store)::

    stream   = [</s>] + tokens[0 : offsets[N]]        # every sentence already ends with </s>
    window k = stream[k*T : (k+1)*T]                 # k < n_windows = len(stream) // T

Training (:class:`LanguageStream`) drops the incomplete tail (< T tokens); dev perplexity
(:func:`iterate_eval`) reads every window in order and, by default, the tail as a last short batch.
``stream_len=20`` is Liu et al.'s short-context ablation and ``max_sentences`` their data-size one.

Shuffling: epoch ``e`` visits the windows in the order of :class:`FeistelPermutation` keyed by
``(seed, language, e)``: O(1) memory instead of a 12M-entry array per language and rank, and any
position of the order is computed directly, so resuming needs only ``(epoch, position)``.

Distributed: with ``world_size`` w, rank r reads the permuted positions ``r, r+w, r+2w, ...`` of the
first ``w * (n_windows // w)``, so ranks read disjoint windows (only their own, from the memmap) and
together every window of the epoch except the at most w-1 that fall last in that epoch's order (a
different few each epoch). Every rank has the same number of windows per epoch, so all ranks are
always at the same ``(epoch, position)``: one rank's :meth:`LanguageStream.state_dict` restores all.
"""

from __future__ import annotations

import zlib
from typing import Any, Iterator, Mapping, Optional, Protocol, Sequence

import numpy as np
import torch

from xlt.text.vocab import EOS_ID
from xlt.utils.errors import XltError

STATE_FORMAT = "xlt-stream/1"
_FEISTEL_ROUNDS = 6
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


class TokenSource(Protocol):
    """What streams read from a token store (:class:`xlt.data.store.TokenStore` provides it).

    ``tokens``: 1-D integer memmap, every sentence followed by ``</s>``; ``offsets``: int64[n+1],
    sentence i is ``tokens[offsets[i]:offsets[i+1]]``; ``language``: the store's language code.
    """

    tokens: np.ndarray
    offsets: np.ndarray
    language: str


class FeistelPermutation:
    """A keyed pseudo-random bijection of ``[0, n)`` computed per element in O(1) memory.

    A balanced Feistel network on ``2h`` bits (``4**h >= n``) permutes ``[0, 4**h)`` whatever its
    round function is; cycle walking (re-encrypt until the value is below ``n``, Black & Rogaway 2002)
    restricts it to a permutation of ``[0, n)``. Since ``4**h < 4n`` a position needs fewer than four
    encryptions on average. The round function is the splitmix64 finaliser of the right half xor a
    64-bit round key. An affine map ``(a*i + b) mod n`` would be a bijection too, but it sends
    consecutive positions to an arithmetic progression, so batches would read regularly spaced windows.
    """

    def __init__(self, n: int, keys: Sequence[int] | np.ndarray):
        if n < 1:
            raise ValueError(f"cannot permute an empty range (n={n})")
        self.n = int(n)
        self.half_bits = ((self.n - 1).bit_length() + 1) // 2
        self.half_mask = np.uint64((1 << self.half_bits) - 1)
        self.keys = np.asarray(keys, dtype=np.uint64)

    @classmethod
    def seeded(cls, n: int, *seed_words: int) -> "FeistelPermutation":
        keys = np.random.SeedSequence([int(w) for w in seed_words]).generate_state(_FEISTEL_ROUNDS, np.uint64)
        return cls(n, keys)

    def _round(self, half: np.ndarray, key: np.uint64) -> np.ndarray:
        z = half ^ key
        z = (z ^ (z >> np.uint64(30))) * _MIX1
        z = (z ^ (z >> np.uint64(27))) * _MIX2
        return (z ^ (z >> np.uint64(31))) & self.half_mask

    def _encrypt(self, x: np.ndarray) -> np.ndarray:
        shift = np.uint64(self.half_bits)
        left, right = x >> shift, x & self.half_mask
        for key in self.keys:
            left, right = right, left ^ self._round(right, key)
        return (left << shift) | right

    def __call__(self, positions: np.ndarray) -> np.ndarray:
        """int64[k] positions in ``[0, n)`` -> int64[k] permuted values in ``[0, n)``."""
        y = self._encrypt(np.asarray(positions, dtype=np.uint64))
        outside = y >= self.n
        while outside.any():
            y[outside] = self._encrypt(y[outside])
            outside = y >= self.n
        return y.astype(np.int64)


def sentences_read(store: TokenSource, max_sentences: Optional[int]) -> int:
    """How many of the store's sentences a stream cut at ``max_sentences`` reads (all of them for
    None); an error for a cut the store cannot give (the plan checks it before a run starts)."""
    n_sentences = len(store.offsets) - 1
    if max_sentences is None:
        return n_sentences
    if max_sentences < 1 or max_sentences > n_sentences:
        raise XltError(f"max_sentences must be between 1 and the {n_sentences} sentences of the "
                       f"{store.language!r} store, got {max_sentences}")
    return max_sentences


def _stream_tokens(store: TokenSource, max_sentences: Optional[int]) -> np.ndarray:
    """The store's tokens up to the ``max_sentences`` cut (a memmap view; nothing is read)."""
    return store.tokens[:int(store.offsets[sentences_read(store, max_sentences)])]


def read_windows(tokens: np.ndarray, window_ids: np.ndarray, stream_len: int) -> torch.Tensor:
    """LongTensor[len(window_ids), stream_len]: windows of ``[</s>] + tokens``, one contiguous slice each."""
    out = np.empty((len(window_ids), stream_len), dtype=np.int64)
    for row, window in enumerate(window_ids):
        start = int(window) * stream_len - 1  # -1: the stream's leading </s> is not in the memmap
        if start < 0:
            out[row, 0] = EOS_ID
            out[row, 1:] = tokens[:stream_len - 1]
        else:
            out[row] = tokens[start:start + stream_len]
    return torch.from_numpy(out)


class LanguageStream:
    """Infinite, seeded, resumable iterator of ``LongTensor[batch_size, stream_len]`` for one language.

    Batches are consecutive runs of ``batch_size`` windows in this rank's share of the epoch order;
    a batch may straddle two epochs, so every batch is full and every epoch is read exactly once.

    Args:
        store: the language's token store (see :class:`TokenSource`).
        stream_len: tokens per window (256; 20 for Liu et al.'s short-context ablation).
        batch_size: windows per batch.
        seed: shuffling seed; the same on every rank.
        rank, world_size: this process's share in distributed training.
        max_sentences: use only the first N sentences (Liu et al.'s data-size ablation).
    """

    def __init__(self, store: TokenSource, *, stream_len: int = 256, batch_size: int = 96, seed: int = 0,
                 rank: int = 0, world_size: int = 1, max_sentences: Optional[int] = None):
        if stream_len < 1 or batch_size < 1:
            raise XltError(f"stream_len and batch_size must be positive, got {stream_len} and {batch_size}")
        if not 0 <= rank < world_size:
            raise XltError(f"rank {rank} is outside a world of {world_size}")
        self.language = store.language
        self.stream_len, self.batch_size, self.seed = stream_len, batch_size, int(seed)
        self.rank, self.world_size = rank, world_size
        self.max_sentences = max_sentences
        self.tokens = _stream_tokens(store, max_sentences)
        if len(self.tokens) and self.tokens[-1] != EOS_ID:
            raise XltError(f"the {self.language!r} token store does not end with </s>: not a token store layout",
                           f"{store.prefix}.bin")
        self.n_windows = (len(self.tokens) + 1) // stream_len
        self.windows_per_epoch = self.n_windows // world_size
        if self.windows_per_epoch == 0:
            raise XltError(f"the {self.language!r} data has {len(self.tokens) + 1} stream tokens: fewer than one "
                           f"window of {stream_len} per rank for {world_size} rank(s)", f"{store.prefix}.bin")
        self.epoch = 0
        self.position = 0  # windows of this rank's share of `epoch` already read
        self._permutation: Optional[FeistelPermutation] = None
        self._permutation_epoch = -1

    def _epoch_order(self) -> FeistelPermutation:
        if self._permutation_epoch != self.epoch:
            self._permutation = FeistelPermutation.seeded(
                self.n_windows, self.seed, zlib.crc32(self.language.encode("utf-8")), self.epoch)
            self._permutation_epoch = self.epoch
        return self._permutation

    def next_window_ids(self) -> np.ndarray:
        """int64[batch_size]: the windows of the next batch (advances the stream)."""
        parts = []
        needed = self.batch_size
        while needed:
            take = min(needed, self.windows_per_epoch - self.position)
            local = np.arange(self.position, self.position + take, dtype=np.int64)
            parts.append(self._epoch_order()(local * self.world_size + self.rank))
            self.position += take
            needed -= take
            if self.position == self.windows_per_epoch:
                self.epoch, self.position = self.epoch + 1, 0
        return np.concatenate(parts)

    def __iter__(self) -> Iterator[torch.Tensor]:
        return self

    def __next__(self) -> torch.Tensor:
        return read_windows(self.tokens, self.next_window_ids(), self.stream_len)

    def state_dict(self) -> dict[str, Any]:
        """A small snapshot (identical on every rank); loading it reproduces the following batches."""
        return {"format": STATE_FORMAT, "language": self.language, "seed": self.seed,
                "stream_len": self.stream_len, "n_windows": self.n_windows, "world_size": self.world_size,
                "epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from a snapshot of a stream over the same data and settings.

        The batch size may change (the position counts windows). With another world size the
        stream continues at the same fraction of the epoch, not with the same windows; everything
        else that would change which windows come next is refused.
        """
        if state.get("format") != STATE_FORMAT:
            raise XltError(f"not a stream state (format {state.get('format')!r})")
        for key in ("language", "seed", "stream_len", "n_windows"):
            if state[key] != getattr(self, key):
                raise XltError(f"cannot resume the {self.language!r} stream: the checkpoint has {key} "
                               f"{state[key]!r}, this run has {getattr(self, key)!r} (other data or settings?)")
        self.epoch = int(state["epoch"])
        position = int(state["position"]) * int(state["world_size"]) // self.world_size
        self.position = min(position, self.windows_per_epoch - 1)


def iterate_eval(store: TokenSource, stream_len: int = 256, batch_size: int = 96, *, include_tail: bool = True,
                 rank: int = 0, world_size: int = 1) -> Iterator[torch.Tensor]:
    """Dev/test windows in stream order, each read once: LongTensor[<=batch_size, stream_len] batches.

    The last batch of full windows may have fewer rows. With ``include_tail`` the tokens after the
    last full window come last as a ``LongTensor[1, r]`` batch (``0 < r < stream_len``), so every
    dev token is scored even when the dev set is shorter than one window. In distributed evaluation
    rank r yields the batches whose index is r modulo ``world_size`` (sum the losses over ranks).
    """
    if stream_len < 1 or batch_size < 1:
        raise XltError(f"stream_len and batch_size must be positive, got {stream_len} and {batch_size}")
    tokens = _stream_tokens(store, None)
    stream_size = len(tokens) + 1
    n_windows = stream_size // stream_len
    for batch_index, first in enumerate(range(0, n_windows, batch_size)):
        if batch_index % world_size == rank:
            window_ids = np.arange(first, min(first + batch_size, n_windows), dtype=np.int64)
            yield read_windows(tokens, window_ids, stream_len)
    tail = stream_size - n_windows * stream_len
    tail_index = -(-n_windows // batch_size)
    if include_tail and tail and tail_index % world_size == rank:
        start = n_windows * stream_len - 1
        row = np.concatenate([[EOS_ID], tokens[:tail - 1]]) if start < 0 else tokens[start:]
        yield torch.from_numpy(np.asarray(row, dtype=np.int64)).unsqueeze(0)
