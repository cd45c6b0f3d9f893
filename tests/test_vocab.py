"""xlt bpe vocab / union / anchors and Vocabulary's ownership: fastBPE bytes, ablation vocabularies, anchors."""

from __future__ import annotations

import gzip
import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from conftest import assert_one_line_error, run_xlt

from xlt.text.bpe import vocabulary_limit
from xlt.text.fastbpe import fast_tool
from xlt.text.vocab import SIDECAR_SUFFIX, Vocabulary
from xlt.utils.errors import XltError

FAST = fast_tool()


def fast(*args) -> bytes:
    return subprocess.run([FAST, *map(str, args)], capture_output=True, check=True).stdout


@pytest.fixture
def bpe_corpora(bilingual, tmp_path) -> dict[str, Path]:
    """The synthetic en/fr corpus BPE'd with joint codes, plus a third file with non-ASCII tokens."""
    en, fr = bilingual
    codes = tmp_path / "codes"
    codes.write_bytes(fast("learnbpe", 40, en, fr))
    out = {}
    for name, path in (("en", en), ("fr", fr)):
        out[name] = tmp_path / f"{name}.bpe"
        fast("applybpe", out[name], path, codes)
    out["zh"] = tmp_path / "zh.bpe"
    out["zh"].write_text("猫 が 見@@ る\nthe 猫 🐈 é@@ lan\n", encoding="utf-8")
    return out


def textbook_counts(*paths: Path) -> Counter:
    """Words are runs of bytes between ' ' and '\\n', as fastBPE reads them."""
    return Counter(w for p in paths for line in p.read_text(encoding="utf-8").split("\n") for w in line.split(" ") if w)


# ---- vocab -----------------------------------------------------------------------------------
def test_vocab_matches_fast_getvocab(bpe_corpora, tmp_path):
    en, fr, zh = bpe_corpora["en"], bpe_corpora["fr"], bpe_corpora["zh"]
    assert run_xlt("bpe", "vocab", en, check=True).stdout.encode() == fast("getvocab", en)
    assert run_xlt("bpe", "vocab", en, zh, check=True).stdout.encode() == fast("getvocab", en, zh)
    # more than fastBPE's two inputs, one of them compressed: same as getvocab of the concatenation
    joined = tmp_path / "all.bpe"
    joined.write_bytes(en.read_bytes() + fr.read_bytes() + zh.read_bytes())
    fr_gz = tmp_path / "fr.bpe.gz"
    fr_gz.write_bytes(gzip.compress(fr.read_bytes()))
    out = tmp_path / "vocab"
    run_xlt("bpe", "vocab", "-o", out, en, fr_gz, zh, check=True)
    assert out.read_bytes() == fast("getvocab", joined)
    vocab = Vocabulary.load(out)
    counts = textbook_counts(en, fr, zh)
    assert dict(zip(vocab.tokens, vocab.counts)) == counts
    assert vocab.tokens == sorted(counts, key=lambda t: (-counts[t], t.encode("utf-8")))
    assert not (tmp_path / ("vocab" + SIDECAR_SUFFIX)).exists()


def test_vocab_with_languages_records_ownership(bpe_corpora, tmp_path):
    en, fr, zh = bpe_corpora["en"], bpe_corpora["fr"], bpe_corpora["zh"]
    out = tmp_path / "vocab"
    run_xlt("bpe", "vocab", "--lang", "en", "--lang", "fr", "--lang", "en", "-o", out, en, fr, zh, check=True)
    joined = tmp_path / "all.bpe"
    joined.write_bytes(en.read_bytes() + fr.read_bytes() + zh.read_bytes())
    assert out.read_bytes() == fast("getvocab", joined)  # the file itself does not change
    vocab = Vocabulary.load(out)
    assert vocab.languages == ["en", "fr"]
    en_words, fr_words = set(textbook_counts(en, zh)), set(textbook_counts(fr))
    for token, mask in zip(vocab.tokens, vocab.owners):
        assert mask == (token in en_words) * 1 + (token in fr_words) * 2, token
    assert set(vocab.shared_tokens("en", "fr")) == en_words & fr_words
    assert {vocab.token(i) for i in vocab.language_ids("fr")} == fr_words
    # rewriting it without languages removes the sidecar, which would no longer match
    run_xlt("bpe", "vocab", "-o", out, fr, check=True)
    assert not Path(str(out) + SIDECAR_SUFFIX).exists() and Vocabulary.load(out).languages == []


# ---- union -----------------------------------------------------------------------------------
def per_language_vocabs(bpe_corpora, tmp_path) -> tuple[Path, Path]:
    en_vocab, fr_vocab = tmp_path / "en.vocab", tmp_path / "fr.vocab"
    en_vocab.write_bytes(fast("getvocab", bpe_corpora["en"], bpe_corpora["zh"]))
    fr_vocab.write_bytes(fast("getvocab", bpe_corpora["fr"]))
    return en_vocab, fr_vocab


def test_union_sums_counts_and_keeps_every_token(bpe_corpora, tmp_path):
    en_vocab, fr_vocab = per_language_vocabs(bpe_corpora, tmp_path)
    out = tmp_path / "union"
    run_xlt("bpe", "union", "--vocab", "en", en_vocab, "--vocab", "fr", fr_vocab, "-o", out, check=True)
    union, en, fr = Vocabulary.load(out), Vocabulary.load(en_vocab), Vocabulary.load(fr_vocab)
    assert set(union.tokens) == set(en.tokens) | set(fr.tokens)
    expected = Counter(dict(zip(en.tokens, en.counts))) + Counter(dict(zip(fr.tokens, fr.counts)))
    assert dict(zip(union.tokens, union.counts)) == expected
    assert set(union.shared_tokens("en", "fr")) == set(en.tokens) & set(fr.tokens) != set()
    # the union of per-language vocabularies is what `vocab --lang` writes in one go, file and sidecar
    direct = tmp_path / "direct"
    run_xlt("bpe", "vocab", "--lang", "en", "--lang", "en", "--lang", "fr", "-o", direct,
            bpe_corpora["en"], bpe_corpora["zh"], bpe_corpora["fr"], check=True)
    assert direct.read_bytes() == out.read_bytes()
    assert Path(str(direct) + SIDECAR_SUFFIX).read_bytes() == Path(str(out) + SIDECAR_SUFFIX).read_bytes()


def test_prefix_lang_union_shares_no_token(bpe_corpora, tmp_path):
    en_vocab, fr_vocab = per_language_vocabs(bpe_corpora, tmp_path)
    out = tmp_path / "noanchor"
    run_xlt("bpe", "union", "--prefix-lang", "--vocab", "en", en_vocab, "--vocab", "fr", fr_vocab, "-o", out,
            check=True)
    union, en, fr = Vocabulary.load(out), Vocabulary.load(en_vocab), Vocabulary.load(fr_vocab)
    assert union.prefix_lang and union.shared_tokens("en", "fr") == []
    assert len(union.tokens) == len(en.tokens) + len(fr.tokens)
    assert dict(zip(union.tokens, union.counts)) == {
        **{f"en:{t}": c for t, c in zip(en.tokens, en.counts)}, **{f"fr:{t}": c for t, c in zip(fr.tokens, fr.counts)}}
    assert union.counts == sorted(union.counts, reverse=True)
    shared = sorted(set(en.tokens) & set(fr.tokens))[0]
    assert union.encode([shared], "en") != union.encode([shared], "fr")
    with pytest.raises(XltError, match="language-prefixed"):  # apply cannot limit to a prefixed vocabulary
        with vocabulary_limit(out):
            pass


# ---- anchors ---------------------------------------------------------------------------------
def test_anchor_numbers_checked_by_hand(tmp_path):
    en, fr = tmp_path / "en.vocab", tmp_path / "fr.vocab"
    en.write_text("the 6\nchat 3\nOK 1\n", encoding="utf-8")  # 10 running tokens, 3 types
    fr.write_text("le 10\nchat 5\nOK 4\nun 1\n", encoding="utf-8")  # 20 running tokens, 4 types
    report_path = tmp_path / "anchors.json"
    res = run_xlt("bpe", "anchors", "--vocab", "en", en, "--vocab", "fr", fr, "--json", report_path, check=True)
    report = json.loads(report_path.read_text())
    (pair,) = report["pairs"]
    assert pair["languages"] == ["en", "fr"] and pair["shared_types"] == 2  # chat, OK
    assert pair["type_share"] == {"en": 2 / 3, "fr": 2 / 4}
    assert pair["token_coverage"] == {"en": (3 + 1) / 10, "fr": (5 + 4) / 20}
    assert report["vocabularies"]["fr"]["tokens"] == 20
    assert "en-fr" in res.stdout and "40.0%" in res.stdout and "45.0%" in res.stdout
    as_json = run_xlt("bpe", "anchors", "--vocab", "en", en, "--vocab", "fr", fr, "--json", "-", check=True)
    assert json.loads(as_json.stdout) == report and "en-fr" in as_json.stderr


# ---- errors ----------------------------------------------------------------------------------
def test_bad_vocabularies_give_one_line_and_no_output(bpe_corpora, tmp_path):
    en_vocab, fr_vocab = per_language_vocabs(bpe_corpora, tmp_path)
    union = tmp_path / "union"
    run_xlt("bpe", "union", "--vocab", "en", en_vocab, "--vocab", "fr", fr_vocab, "-o", union, check=True)
    edited = tmp_path / "edited"
    edited.write_text(union.read_text() + "extra 1\n")
    Path(str(edited) + SIDECAR_SUFFIX).write_bytes(Path(str(union) + SIDECAR_SUFFIX).read_bytes())
    malformed = tmp_path / "malformed.vocab"
    malformed.write_text("a 3\nb\n", encoding="utf-8")
    duplicate = tmp_path / "duplicate.vocab"
    duplicate.write_text("a 3\nb 2\na 1\n", encoding="utf-8")
    latin1 = tmp_path / "latin1.bpe"
    latin1.write_bytes("ok\n\xe9t\xe9\n".encode("latin-1"))
    out = tmp_path / "out"
    cases = [
        (["union", "--vocab", "en", edited, "--vocab", "fr", fr_vocab], ["edited.langs.json", "does not match"]),
        (["union", "--vocab", "en", malformed, "--vocab", "fr", fr_vocab], ["malformed.vocab:2:", "malformed"]),
        (["union", "--vocab", "en", duplicate], ["duplicate.vocab:3:", "duplicate"]),
        (["union", "--vocab", "en", en_vocab, "--vocab", "en", fr_vocab], ["more than once"]),
        (["union", "--vocab", "en", union], ["expected a vocabulary of en only"]),
        (["anchors", "--vocab", "en", en_vocab, "--vocab", "fr", tmp_path / "nope"], ["nope", "no such"]),
        (["vocab", "--lang", "en", bpe_corpora["en"], bpe_corpora["fr"]], ["1 --lang for 2 inputs"]),
        (["vocab", latin1], ["latin1.bpe:2:", "UTF-8"]),
    ]
    for args, fragments in cases:
        before = set(tmp_path.iterdir())
        extra = ["--json", out] if args[0] == "anchors" else ["-o", out]
        assert_one_line_error(run_xlt("bpe", *args, *extra), *fragments)
        assert set(tmp_path.iterdir()) == before, args


def test_vocabulary_union_in_process():
    en = Vocabulary(["the", "chat"], [5, 2])
    fr = Vocabulary(["le", "chat"], [4, 3])
    union = Vocabulary.union([("en", en), ("fr", fr)])
    assert list(zip(union.tokens, union.counts, union.owners)) == [("chat", 5, 3), ("the", 5, 1), ("le", 4, 2)]
    prefixed = Vocabulary.union([("en", en), ("fr", fr)], prefix_lang=True)
    assert prefixed.tokens == ["en:the", "fr:le", "fr:chat", "en:chat"] and prefixed.owners == [1, 2, 2, 1]


@pytest.mark.parametrize("sidecar,says", [
    ("[1, 2]", "not a vocabulary ownership sidecar"),
    ('{"format": "something-else"}', "format 'something-else'"),
    ("{not json", "not a valid vocabulary ownership sidecar"),
    ('{"format": "FORMAT", "languages": ["en"]}', "without its 'languages' and 'owners' lists"),
    ('{"format": "FORMAT", "languages": ["en"], "owners": [1]}', "does not match its vocabulary file"),
])
def test_a_damaged_ownership_sidecar_is_one_error_naming_it(sidecar, says, tmp_path):
    from xlt.text.vocab import SIDECAR_FORMAT

    Vocabulary(["a", "b"], [2, 1], languages=["en"], owners=[1, 1]).save(tmp_path / "vocab")
    path = tmp_path / f"vocab{SIDECAR_SUFFIX}"
    path.write_text(sidecar.replace("FORMAT", SIDECAR_FORMAT), encoding="utf-8")
    with pytest.raises(XltError, match=says.replace("(", "\\(")) as err:
        Vocabulary.load(tmp_path / "vocab")
    assert err.value.path == str(path)
