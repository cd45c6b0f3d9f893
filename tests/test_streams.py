"""Pretraining streams: windows against a brute-force stream, epochs, ranks, resume, dev order."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import synthetic
from xlt.data.masking import MaskingConfig, MaskTransform
from xlt.data.store import TokenStore, binarize
from xlt.data.streams import FeistelPermutation, LanguageStream, iterate_eval
from xlt.text.vocab import SPECIALS, Vocabulary
from xlt.utils.errors import XltError

EOS = SPECIALS.index("</s>")
FIRST_ID = len(SPECIALS)


def make_store(directory: Path, lengths: list[int], lang: str = "en", dtype=np.uint32) -> TokenStore:
    """A token store in the real layout whose every token id is unique (so a window names its place).

    Sentence i holds consecutive ids and is followed by ``</s>``; the arrays go through files and
    come back as read-only memmaps, as :meth:`TokenStore.open` maps them.
    """
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(np.asarray(lengths) + 1)
    tokens = np.full(offsets[-1], EOS, dtype=dtype)
    next_id = FIRST_ID
    for start, length in zip(offsets[:-1], lengths):
        tokens[start:start + length] = np.arange(next_id, next_id + length)
        next_id += length
    tokens.tofile(directory / f"{lang}.bin")
    offsets.tofile(directory / f"{lang}.idx")
    mapped = np.memmap(directory / f"{lang}.bin", dtype=dtype, mode="r")
    mapped_offsets = np.memmap(directory / f"{lang}.idx", dtype=np.int64, mode="r")
    return TokenStore(str(directory / lang), {"language": lang}, mapped, mapped_offsets)


def random_lengths(n: int, seed: int = 0, low: int = 1, high: int = 15) -> list[int]:
    return np.random.default_rng(seed).integers(low, high + 1, n).tolist()


def brute_force_windows(store: TokenStore, stream_len: int, max_sentences: int | None = None) -> np.ndarray:
    """XLM's layout the obvious way: [</s>] + every sentence and its </s>, cut every stream_len."""
    n = len(store) if max_sentences is None else max_sentences
    stream = [EOS]
    for i in range(n):
        stream += store.tokens[store.offsets[i]:store.offsets[i + 1] - 1].tolist() + [EOS]
    n_windows = len(stream) // stream_len
    return np.array(stream[:n_windows * stream_len], dtype=np.int64).reshape(n_windows, stream_len)


def read_rows(stream: LanguageStream, n_rows: int) -> np.ndarray:
    """The next ``n_rows`` windows of ``stream`` (whole batches are read; extra rows dropped)."""
    rows = []
    while sum(len(r) for r in rows) < n_rows:
        batch = next(stream)
        assert batch.dtype == torch.int64 and batch.shape == (stream.batch_size, stream.stream_len)
        rows.append(batch.numpy())
    return np.concatenate(rows)[:n_rows]


def as_set(rows: np.ndarray) -> set[tuple[int, ...]]:
    return {tuple(r) for r in rows.tolist()}


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 13, 16, 31, 32, 64, 97, 127, 128, 256, 1000, 1024, 4099])
def test_permutation_is_a_bijection(n):
    for seed in range(3):
        values = FeistelPermutation.seeded(n, seed, 99)(np.arange(n))
        assert np.array_equal(np.sort(values), np.arange(n))


def test_permutation_depends_on_its_key_and_shuffles():
    a, b, c = (FeistelPermutation.seeded(1000, *key)(np.arange(1000)) for key in ((1, 2), (1, 2), (1, 3)))
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert np.count_nonzero(a == np.arange(1000)) < 10  # a random permutation has ~1 fixed point
    # Element by element equals all at once (a resumed position is computed on its own).
    assert all(FeistelPermutation.seeded(1000, 1, 2)(np.array([i]))[0] == a[i] for i in (0, 1, 500, 999))


def test_windows_cover_the_stream_exactly_once_per_epoch(tmp_path):
    store = make_store(tmp_path, random_lengths(300))
    expected = brute_force_windows(store, 16)
    stream = LanguageStream(store, stream_len=16, batch_size=7, seed=1)
    assert stream.n_windows == len(expected) == stream.windows_per_epoch
    rows = read_rows(stream, 2 * stream.n_windows)  # epochs straddle batches: 7 does not divide n
    first, second = rows[:stream.n_windows], rows[stream.n_windows:]
    assert len(as_set(first)) == len(first) and as_set(first) == as_set(expected)
    assert as_set(second) == as_set(expected)
    assert not np.array_equal(first, second)  # each epoch has its own order
    assert not np.array_equal(first, expected)  # and it is shuffled
    assert isinstance(stream.tokens, np.memmap)  # a view of the file, never a copy of the corpus


def test_windows_cut_across_sentence_boundaries_like_xlm(tmp_path):
    store = make_store(tmp_path, [3, 5, 2, 6, 4])
    windows = brute_force_windows(store, 4)
    # [</s> 5 6 7] [</s> 8 9 10] [11 12 </s> 13] ...: the leading </s>, then sentences run on.
    assert windows[:3].tolist() == [[EOS, 5, 6, 7], [EOS, 8, 9, 10], [11, 12, EOS, 13]]
    stream = LanguageStream(store, stream_len=4, batch_size=len(windows), seed=0)
    assert as_set(next(stream).numpy()) == as_set(windows)


def test_max_sentences_uses_only_the_first_sentences(tmp_path):
    lengths = random_lengths(120, seed=2)
    store = make_store(tmp_path, lengths)
    stream = LanguageStream(store, stream_len=8, batch_size=5, seed=0, max_sentences=40)
    expected = brute_force_windows(store, 8, max_sentences=40)
    assert stream.n_windows == len(expected) == (int(store.offsets[40]) + 1) // 8
    rows = read_rows(stream, stream.n_windows)
    assert as_set(rows) == as_set(expected)
    assert rows.max() < FIRST_ID + sum(lengths[:40])  # nothing from sentence 40 on
    for bad in (0, 121):
        with pytest.raises(XltError, match="max_sentences"):
            LanguageStream(store, stream_len=8, max_sentences=bad)


def test_resume_from_state_dict_equals_uninterrupted(tmp_path):
    store = make_store(tmp_path, random_lengths(200, seed=3))
    settings = dict(stream_len=8, batch_size=6, seed=5)
    uninterrupted = LanguageStream(store, **settings)
    expected = [next(uninterrupted).numpy() for _ in range(60)]  # about two and a half epochs
    first = LanguageStream(store, **settings)
    for _ in range(37):
        next(first)
    state = json.loads(json.dumps(first.state_dict()))
    assert set(state) >= {"epoch", "position", "seed"} and len(json.dumps(state)) < 300
    resumed = LanguageStream(store, **settings)
    resumed.load_state_dict(state)
    for want in expected[37:]:
        assert np.array_equal(next(resumed).numpy(), want)


def test_resume_with_another_batch_size_continues_the_window_sequence(tmp_path):
    store = make_store(tmp_path, random_lengths(100, seed=4))
    uninterrupted = LanguageStream(store, stream_len=8, batch_size=4, seed=0)
    expected = read_rows(uninterrupted, 40)
    first = LanguageStream(store, stream_len=8, batch_size=4, seed=0)
    head = read_rows(first, 12)
    resumed = LanguageStream(store, stream_len=8, batch_size=7, seed=0)
    resumed.load_state_dict(first.state_dict())
    assert np.array_equal(np.concatenate([head, read_rows(resumed, 28)]), expected)


def test_resume_on_other_data_or_settings_is_refused(tmp_path):
    store = make_store(tmp_path, random_lengths(100, seed=4))
    state = LanguageStream(store, stream_len=8, seed=0).state_dict()
    for other in (dict(stream_len=8, seed=1), dict(stream_len=8, seed=0, max_sentences=50), dict(stream_len=4, seed=0)):
        with pytest.raises(XltError, match="cannot resume"):
            LanguageStream(store, **other).load_state_dict(state)


@pytest.mark.parametrize("n_sentences", [240, 241])
def test_ranks_read_disjoint_windows_whose_union_is_the_single_rank_set(tmp_path, n_sentences):
    store = make_store(tmp_path, [3] * n_sentences)  # 4 tokens a sentence + 1: n_windows = 4n+1 // 8
    single = LanguageStream(store, stream_len=8, batch_size=5, seed=9)
    n = single.n_windows
    everything = read_rows(single, n)
    ranks = [LanguageStream(store, stream_len=8, batch_size=5, seed=9, rank=r, world_size=2) for r in (0, 1)]
    shares = [read_rows(s, s.windows_per_epoch) for s in ranks]
    assert not as_set(shares[0]) & as_set(shares[1])
    union = as_set(shares[0]) | as_set(shares[1])
    if n % 2 == 0:
        assert union == as_set(everything)
    else:  # the one window that falls last in this epoch's order is skipped by both ranks
        assert union < as_set(everything) and len(union) == n - 1
    # Both ranks are at the same place: one rank's state restores either.
    assert ranks[0].state_dict() == ranks[1].state_dict()


def test_too_little_data_for_the_ranks_is_a_clear_error(tmp_path):
    store = make_store(tmp_path, [2, 2])  # 7 stream tokens: one window of 4
    LanguageStream(store, stream_len=4, batch_size=2)
    with pytest.raises(XltError, match="fewer than one window") as error:
        LanguageStream(store, stream_len=4, batch_size=2, world_size=2, rank=1)
    assert error.value.path == f"{store.prefix}.bin"   # the line names the store
    # a .bin whose last id is not </s> is no store's: named too
    tokens = np.memmap(f"{store.prefix}.bin", dtype=store.tokens.dtype, mode="r+")
    tokens[-1] = 5
    tokens.flush()
    with pytest.raises(XltError, match="does not end with </s>") as error:
        LanguageStream(TokenStore(store.prefix, store.header, np.memmap(f"{store.prefix}.bin", dtype=tokens.dtype,
                                                                         mode="r"), store.offsets),
                       stream_len=4, batch_size=2)
    assert error.value.path == f"{store.prefix}.bin"


def test_eval_yields_every_window_in_order_then_the_tail(tmp_path):
    store = make_store(tmp_path, random_lengths(50, seed=6), dtype=np.uint16)
    full = np.concatenate([[EOS], np.asarray(store.tokens, dtype=np.int64)])
    batches = list(iterate_eval(store, stream_len=16, batch_size=4))
    assert all(b.dtype == torch.int64 for b in batches)
    assert [b.shape[0] for b in batches[:-2]] == [4] * (len(batches) - 2)
    assert batches[-1].shape == (1, len(full) % 16)
    assert np.array_equal(np.concatenate([b.numpy().reshape(-1) for b in batches]), full)
    no_tail = list(iterate_eval(store, stream_len=16, batch_size=4, include_tail=False))
    assert np.array_equal(np.concatenate([b.numpy() for b in no_tail]), brute_force_windows(store, 16))
    by_rank = [list(iterate_eval(store, stream_len=16, batch_size=4, rank=r, world_size=3)) for r in range(3)]
    assert sum(len(x) for x in by_rank) == len(batches)
    assert all(torch.equal(b, batches[i]) for r in range(3) for b, i in zip(by_rank[r], range(r, len(batches), 3)))


def test_eval_on_a_dev_set_shorter_than_a_window_still_scores_it(tmp_path):
    store = make_store(tmp_path, [2, 3])
    (only,) = list(iterate_eval(store, stream_len=256))
    assert only.tolist() == [[EOS, 5, 6, EOS, 7, 8, 9, EOS]]


def test_binarized_store_to_masked_batches(tmp_path):
    """The whole data side on a store written by ``binarize`` and opened by ``TokenStore.open``."""
    en_path, _ = synthetic.write_corpus(tmp_path, n=120, seed=0)
    words = en_path.read_text(encoding="utf-8").split()
    vocab = Vocabulary.from_counts({w: words.count(w) for w in set(words)})
    binarize(en_path, vocab, "en", tmp_path / "en.train")
    store = TokenStore.open(tmp_path / "en.train", vocab=vocab)
    stream = LanguageStream(store, stream_len=32, batch_size=3, seed=0)
    batch = next(stream)
    sentences = en_path.read_text(encoding="utf-8").splitlines()
    ids = [EOS] + [i for s in sentences for i in vocab.encode(s.split(), "en") + [EOS]]
    assert as_set(batch.numpy()) <= as_set(np.array(ids[:len(ids) // 32 * 32]).reshape(-1, 32))
    masking = MaskTransform.from_vocabulary(MaskingConfig(random_within_language=True), vocab, ["en"])
    out = masking(batch, "en", torch.Generator().manual_seed(0))
    assert out.input_ids.shape == (3, 32) and 0 < len(out.target_ids) <= round(0.15 * 96) + 1
    assert (out.target_ids >= FIRST_ID).all()
