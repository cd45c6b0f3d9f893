"""Token stores: round trips against a brute-force encoding, header counts, O(1) views, errors."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_one_line_error, run_xlt

from xlt.data import store as store_module
from xlt.data.store import TokenStore, binarize, token_dtype
from xlt.text.vocab import EOS, SPECIALS, UNK, Vocabulary
from xlt.utils.errors import XltError

# Subword text as `xlt bpe apply` writes it, with an empty line, a blank line, unknown subwords
# ("zebra", "qq@@") and a double space (fastBPE splits on single spaces and drops empty words).
LINES = [
    "the c@@ at sees a dog .",
    "",
    "a small dog likes the c@@ at .",
    "zebra qq@@ x .",
    "   ",
    "the  dog .",
    "c@@ at",
]
KNOWN = ["the", "c@@", "at", "sees", "a", "dog", ".", "small", "likes", "x"]


def make_vocab(tmp_path: Path, tokens=KNOWN, name="vocab", **kwargs) -> tuple[Vocabulary, Path]:
    vocab = Vocabulary(list(tokens), [len(tokens) - i for i in range(len(tokens))], **kwargs)
    path = tmp_path / name
    vocab.save(path)
    return Vocabulary.load(path), path


def write_text(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def brute_force(lines: list[str], vocab: Vocabulary, lang: str = "en") -> tuple[list[list[int]], list[int]]:
    """Per-sentence ids (the textbook way: one dict lookup per word) and the whole stream."""
    sentences = [vocab.encode(line.split(), lang) for line in lines]
    stream = [i for ids in sentences for i in ids + [SPECIALS.index(EOS)]]
    return sentences, stream


def decode(ids: np.ndarray, vocab: Vocabulary) -> list[str]:
    return [vocab.token(int(i)) for i in ids]


def store_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("st"))


def test_round_trip_matches_brute_force_and_keeps_empty_lines(tmp_path):
    vocab, vocab_path = make_vocab(tmp_path)
    src = write_text(tmp_path / "en.bpe", LINES)
    binarize(src, vocab_path, "en", tmp_path / "st")
    store = TokenStore.open(tmp_path / "st", vocab=vocab)

    sentences, stream = brute_force(LINES, vocab)
    assert len(store) == len(LINES)
    assert store.tokens.dtype == np.uint16
    np.testing.assert_array_equal(store.tokens, stream)
    for i, line in enumerate(LINES):
        expected = [t if t in KNOWN else UNK for t in line.split()]
        assert decode(store.sentence(i), vocab) == expected
        assert list(store.sentence(i)) == sentences[i]
    assert len(store.sentence(1)) == 0 and len(store.sentence(4)) == 0


def test_header_counts_and_unk_rate(tmp_path):
    vocab, vocab_path = make_vocab(tmp_path)
    src = write_text(tmp_path / "en.bpe", LINES)
    header = binarize(src, vocab, "en", tmp_path / "st", command="xlt binarize test")
    on_disk = json.loads((tmp_path / "st.json").read_text(encoding="utf-8"))
    assert on_disk == header

    words = [w for line in LINES for w in line.split()]
    n_unk = sum(w not in KNOWN for w in words)
    assert n_unk == 2
    assert header["format"] == "xlt-token-store" and header["format_version"] == 1
    assert header["language"] == "en"
    assert header["vocab_sha256"] == vocab.sha256 == hashlib.sha256(vocab_path.read_bytes()).hexdigest()
    assert header["vocab_size"] == len(KNOWN) + len(SPECIALS)
    assert header["dtype"] == "uint16"
    assert header["n_sentences"] == len(LINES)
    assert header["n_tokens"] == len(words)
    assert header["n_unk"] == n_unk
    assert header["unk_rate"] == pytest.approx(n_unk / len(words))
    assert header["source"] == str(src)
    assert header["source_sha256"] == hashlib.sha256(src.read_bytes()).hexdigest()
    assert header["created_by"] == {"xlt_version": "0.1.0", "command": "xlt binarize test"}
    store = TokenStore.open(tmp_path / "st")
    assert store.n_tokens == len(words) and store.language == "en"


def test_chunk_boundaries_do_not_change_the_result(tmp_path, monkeypatch):
    """Flushing after every 3 sentences or 5 ids gives the same files as one big chunk."""
    vocab, _ = make_vocab(tmp_path)
    lines = LINES * 5
    src = write_text(tmp_path / "en.bpe", lines)
    binarize(src, vocab, "en", tmp_path / "one")
    monkeypatch.setattr(store_module, "FLUSH_SENTENCES", 3)
    monkeypatch.setattr(store_module, "FLUSH_TOKENS", 5)
    binarize(src, vocab, "en", tmp_path / "many")
    for suffix in (".bin", ".idx"):
        assert (tmp_path / f"one{suffix}").read_bytes() == (tmp_path / f"many{suffix}").read_bytes()
    one, many = TokenStore.open(tmp_path / "one").header, TokenStore.open(tmp_path / "many").header
    assert one == many


@pytest.mark.parametrize("n_entries, dtype", [(65_531, np.uint16), (65_532, np.uint32)])
def test_dtype_boundary_round_trip(tmp_path, n_entries, dtype):
    """65,531 entries + 5 specials = ids 0..65535 (uint16); one more entry needs uint32."""
    tokens = [f"w{i}" for i in range(n_entries)]
    vocab, vocab_path = make_vocab(tmp_path, tokens)
    assert token_dtype(len(vocab)) == dtype
    last = tokens[-1]  # the highest id, 65535 or 65536
    lines = [f"w0 {last} w1", "", f"{last} nope w65530"]
    binarize(write_text(tmp_path / "big.bpe", lines), vocab_path, "en", tmp_path / "st")
    store = TokenStore.open(tmp_path / "st", vocab=vocab)
    assert store.tokens.dtype == dtype and store.header["dtype"] == np.dtype(dtype).name
    assert int(store.sentence(0)[1]) == len(vocab) - 1
    assert decode(store.sentence(0), vocab) == ["w0", last, "w1"]
    assert decode(store.sentence(2), vocab) == [last, UNK, "w65530"]
    np.testing.assert_array_equal(store.tokens, brute_force(lines, vocab)[1])


def test_token_dtype_limits():
    assert token_dtype(10) == np.uint16
    assert token_dtype(65_536) == np.uint16
    assert token_dtype(65_537) == np.uint32
    with pytest.raises(XltError):
        token_dtype(2**32 + 1)


def test_language_prefixed_vocabulary_uses_the_language(tmp_path):
    vocab, _ = make_vocab(tmp_path, ["en:the", "en:dog", "fr:le", "fr:chien"], languages=["en", "fr"],
                          owners=[1, 1, 2, 2], prefix_lang=True)
    src = write_text(tmp_path / "x.bpe", ["the dog", "le chien"])
    binarize(src, vocab, "en", tmp_path / "st_en")
    binarize(src, vocab, "fr", tmp_path / "st_fr")
    en, fr = TokenStore.open(tmp_path / "st_en"), TokenStore.open(tmp_path / "st_fr")
    assert decode(en.sentence(0), vocab) == ["en:the", "en:dog"] and decode(en.sentence(1), vocab) == [UNK, UNK]
    assert decode(fr.sentence(0), vocab) == [UNK, UNK] and decode(fr.sentence(1), vocab) == ["fr:le", "fr:chien"]
    assert fr.header["language"] == "fr" and fr.header["n_unk"] == 2


def test_a_language_the_vocabulary_does_not_know_is_refused(tmp_path):
    vocab, vocab_path = make_vocab(tmp_path, ["en:the", "fr:le"], languages=["en", "fr"], owners=[1, 2],
                                   prefix_lang=True)
    src = write_text(tmp_path / "x.bpe", ["the"])
    with pytest.raises(XltError, match="'de' is not one of the vocabulary's \\(en, fr\\)") as err:
        binarize(src, vocab_path, "de", tmp_path / "st_de")
    assert err.value.path == str(vocab_path)
    assert not list(tmp_path.glob("st_de*"))


def test_a_vocabulary_naming_no_language_still_refuses_an_unknown_code(tmp_path):
    # fastBPE's own vocabulary has no .langs.json; the header's language must still be one xlt knows
    vocab, _ = make_vocab(tmp_path)
    assert not vocab.languages
    src = write_text(tmp_path / "x.bpe", ["the"])
    with pytest.raises(XltError, match="unknown language 'eng'"):
        binarize(src, vocab, "eng", tmp_path / "st_eng")
    assert not list(tmp_path.glob("st_eng*"))
    assert binarize(src, vocab, "en", tmp_path / "st_en")["language"] == "en"


def test_access_helpers_are_views_into_the_memmap(tmp_path):
    vocab, _ = make_vocab(tmp_path)
    binarize(write_text(tmp_path / "en.bpe", LINES), vocab, "en", tmp_path / "st")
    store = TokenStore.open(tmp_path / "st")
    sentences, stream = brute_force(LINES, vocab)

    assert isinstance(store.tokens, np.memmap) and isinstance(store.offsets, np.memmap)
    assert store.offsets.dtype == np.int64 and len(store.offsets) == len(LINES) + 1
    np.testing.assert_array_equal(store.sentence_lengths(), [len(s) for s in sentences])
    assert store.sentence_lengths().dtype == np.int64
    for i in range(len(LINES)):
        view = store.sentence(i)
        assert not view.flags.owndata and (len(view) == 0 or np.shares_memory(view, store.tokens))  # a view
        assert store.tokens[store.offsets[i + 1] - 1] == SPECIALS.index(EOS)
    np.testing.assert_array_equal(store.sentence(-1), sentences[-1])
    with pytest.raises(IndexError):
        store.sentence(len(LINES))
    with pytest.raises(IndexError):
        store.sentence(-len(LINES) - 1)

    # Any contiguous range, e.g. sentences 2..3 with their separators, as the stream sees them.
    start, end = int(store.offsets[2]), int(store.offsets[4])
    window = store.span(start, end)
    assert np.shares_memory(window, store.tokens)
    np.testing.assert_array_equal(window, stream[start:end])
    assert len(store.span(end, end)) == 0
    with pytest.raises(IndexError):
        store.span(0, len(store.tokens) + 1)
    with pytest.raises(IndexError):
        store.span(3, 2)
    with pytest.raises(ValueError):
        store.tokens[0] = 7  # read-only


def test_vocabulary_mismatch_is_refused(tmp_path):
    vocab, _ = make_vocab(tmp_path)
    other, _ = make_vocab(tmp_path, KNOWN[::-1], name="other")
    binarize(write_text(tmp_path / "en.bpe", LINES), vocab, "en", tmp_path / "st")
    with pytest.raises(XltError, match="vocabulary does not match the store") as err:
        TokenStore.open(tmp_path / "st", vocab=other)
    assert err.value.path == str(tmp_path / "st.json")
    assert TokenStore.open(tmp_path / "st", vocab=vocab).header["vocab_sha256"] == vocab.sha256


def test_missing_and_corrupt_files_are_named(tmp_path):
    vocab, _ = make_vocab(tmp_path)
    binarize(write_text(tmp_path / "en.bpe", LINES), vocab, "en", tmp_path / "st")

    with pytest.raises(XltError) as err:
        TokenStore.open(tmp_path / "nope")
    assert err.value.path == str(tmp_path / "nope.json")

    bin_bytes = (tmp_path / "st.bin").read_bytes()
    (tmp_path / "st.bin").write_bytes(bin_bytes[:-2])
    with pytest.raises(XltError, match="corrupt token store file") as err:
        TokenStore.open(tmp_path / "st")
    assert err.value.path == str(tmp_path / "st.bin")
    (tmp_path / "st.bin").write_bytes(bin_bytes)

    idx = np.fromfile(tmp_path / "st.idx", dtype=np.int64)
    idx[-1] -= 1
    idx.tofile(tmp_path / "st.idx")
    with pytest.raises(XltError, match="corrupt offsets") as err:
        TokenStore.open(tmp_path / "st")
    assert err.value.path == str(tmp_path / "st.idx")
    (tmp_path / "st.idx").unlink()
    with pytest.raises(XltError, match="missing") as err:
        TokenStore.open(tmp_path / "st")
    assert err.value.path == str(tmp_path / "st.idx")

    (tmp_path / "st.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(XltError, match="not a valid token store header") as err:
        TokenStore.open(tmp_path / "st")
    assert err.value.path == str(tmp_path / "st.json")


def test_cli_round_trip_from_gzip_and_stdin(tmp_path):
    vocab, vocab_path = make_vocab(tmp_path)
    with gzip.open(tmp_path / "en.bpe.gz", "wt", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in LINES))
    res = run_xlt("binarize", "--vocab", vocab_path, "--lang", "en", tmp_path / "en.bpe.gz", "-o", tmp_path / "st")
    assert res.returncode == 0, res.stderr
    assert f"{len(LINES)} sentences" in res.stderr
    res = run_xlt("binarize", "--vocab", vocab_path, "--lang", "en", "-o", tmp_path / "st_stdin",
                  input="".join(line + "\n" for line in LINES))
    assert res.returncode == 0, res.stderr
    from_file, from_stdin = TokenStore.open(tmp_path / "st"), TokenStore.open(tmp_path / "st_stdin")
    np.testing.assert_array_equal(from_file.tokens, brute_force(LINES, vocab)[1])
    np.testing.assert_array_equal(from_file.tokens, from_stdin.tokens)
    assert from_file.header["source_sha256"] == hashlib.sha256((tmp_path / "en.bpe.gz").read_bytes()).hexdigest()
    assert from_stdin.header["source_sha256"] is None
    assert from_file.header["created_by"]["command"].startswith("xlt binarize --vocab ")


def test_cli_errors_leave_nothing_behind(tmp_path):
    _, vocab_path = make_vocab(tmp_path)
    args = ("binarize", "--vocab", vocab_path, "--lang", "en")

    res = run_xlt(*args, tmp_path / "missing.bpe", "-o", tmp_path / "st")
    assert_one_line_error(res, "missing.bpe", "no such input file")

    write_text(tmp_path / "empty.bpe", ["", "  ", ""])
    res = run_xlt(*args, tmp_path / "empty.bpe", "-o", tmp_path / "st")
    assert_one_line_error(res, "empty.bpe", "empty corpus")

    (tmp_path / "latin1.bpe").write_bytes("the dog .\n\nle caf\xe9 .\n".encode("latin-1"))
    res = run_xlt(*args, tmp_path / "latin1.bpe", "-o", tmp_path / "st")
    assert_one_line_error(res, "latin1.bpe:3:", "UTF-8")

    res = run_xlt(*args, tmp_path / "latin1.bpe", "-o", tmp_path / "no_dir" / "st")
    assert_one_line_error(res, "no_dir", "does not exist")
    assert store_files(tmp_path) == []  # no final names and no temporary files


def test_failed_run_keeps_the_previous_store(tmp_path):
    vocab, vocab_path = make_vocab(tmp_path)
    binarize(write_text(tmp_path / "en.bpe", LINES), vocab, "en", tmp_path / "st")
    before = {name: (tmp_path / name).read_bytes() for name in store_files(tmp_path)}
    (tmp_path / "bad.bpe").write_bytes(b"the dog .\n" * 100 + b"\xff\xfe\n")
    with pytest.raises(XltError) as err:
        binarize(tmp_path / "bad.bpe", vocab, "en", tmp_path / "st")
    assert err.value.line == 101
    assert {name: (tmp_path / name).read_bytes() for name in store_files(tmp_path)} == before
