"""Fake-English (xlt.text.fake, `xlt fake-english`, language `fake`): a bijection that shares no
character with English, tokenized as its English original, task files with their labels kept."""

from __future__ import annotations

import random

import conllu
import pytest
from conftest import assert_one_line_error, run_xlt

from xlt.finetune.ner import read_tagged
from xlt.text.bpe import learn
from xlt.text.fake import OFFSET, to_english, to_fake
from xlt.text.tokenize import Tokenizer

SENTENCES = [
    "Mr. Smith didn't pay $3.50 for the U.S. book, did he?",
    "L'été dernier, «Zoë» a vu 1,234 élèves — n'est-ce pas ?",
    "It's 5 p.m.; the co-op's e-mail (see http://x.org/a?b=c) said: \"no\".",
    "  Tabs\tand  double  spaces stay where they were.  ",
]


def random_text(rng: random.Random, n: int = 200) -> str:
    alphabet = [chr(c) for c in range(0x20, 0x250)] + [" ", "\t", "  ", "\u00a0", "\u3000"]
    return "".join(rng.choice(alphabet) for _ in range(n))


def test_the_mapping_is_a_bijection_that_shares_no_character_and_keeps_the_whitespace():
    rng = random.Random(0)
    for text in SENTENCES + [random_text(rng) for _ in range(50)]:
        fake = to_fake(text)
        assert to_english(fake) == text
        assert len(fake) == len(text)
        for original, twin in zip(text, fake):
            if original.isspace():
                assert twin == original
            else:
                assert ord(twin) >= OFFSET and not twin.isspace()
    assert to_fake("ab") != to_fake("ba") and to_fake("a") != to_fake("A")


@pytest.mark.parametrize("lowercase, remove_accents", [(False, False), (True, True)])
def test_fake_english_is_tokenized_as_its_english_original(lowercase, remove_accents):
    english, fake = Tokenizer("en", lowercase, remove_accents), Tokenizer("fake", lowercase, remove_accents)
    for text in SENTENCES:
        assert fake.tokenize(to_fake(text)) == to_fake(english.tokenize(text))
    # the private-use characters are non-printing to Moses: without the round trip they would be blanked
    assert english.tokenize(to_fake(SENTENCES[0])).strip() == ""


def test_joint_bpe_over_english_and_fake_english_shares_no_token(tmp_path):
    english = [Tokenizer("en").tokenize(s) for s in SENTENCES] * 5
    fake = [to_fake(line) for line in english[::-1]]
    (tmp_path / "en.tok").write_text("\n".join(english) + "\n")
    (tmp_path / "fake.tok").write_text("\n".join(fake) + "\n")
    learn([tmp_path / "en.tok", tmp_path / "fake.tok"], 200, tmp_path / "codes")
    codes = [line.split(" ") for line in (tmp_path / "codes").read_text().splitlines()]
    assert len(codes) == 200, "the joint codes learn merges from both languages"
    assert {any(ord(c) >= OFFSET for c in left) for left, *_ in codes} == {True, False}
    for left, right, _ in codes:
        sides = {any(ord(c) >= OFFSET for c in piece) for piece in (left, right.removesuffix("</w>"))
                 if piece.removesuffix("</w>")}
        assert len(sides) == 1, f"merge {left} {right} joins English and Fake-English"


def test_task_files_keep_their_labels(tmp_path):
    xnli = tmp_path / "xnli.tsv"
    xnli.write_text("A man sleeps.\tSomeone rests.\tentailment\nIt's red.\tIt is blue.\tcontradiction\n")
    run_xlt("fake-english", "--format", "xnli", xnli, "-o", tmp_path / "xnli.fake", check=True)
    rows = [line.split("\t") for line in (tmp_path / "xnli.fake").read_text().splitlines()]
    assert [r[2] for r in rows] == ["entailment", "contradiction"]
    assert [to_english(r[0]) for r in rows] == ["A man sleeps.", "It's red."]

    wikiann = tmp_path / "ner"
    wikiann.write_text("en:John\tB-PER\nen:lives\tO\nen:in\tO\nen:New\tB-LOC\nen:York\tI-LOC\n\n"
                       "en:Paris\tB-LOC\n")
    run_xlt("fake-english", "--format", "wikiann", wikiann, "-o", tmp_path / "ner.fake", check=True)
    original, twin = read_tagged(str(wikiann)), read_tagged(str(tmp_path / "ner.fake"))
    assert [s.tags for s in twin] == [s.tags for s in original]
    assert [[to_english(w) for w in s.words] for s in twin] == [s.words for s in original]
    # a file without WikiANN's prefixes keeps its words whole, as NER's reader reads them (a word that
    # happens to start with "ftp:" or "de:" is a word): the twin's words are still the English ones
    plain = tmp_path / "plain-ner"
    plain.write_text("Visit\tO\nftp:archive\tO\nor\tO\nde:Berlin\tB-LOC\n\nen:Paris\tB-LOC\n")
    run_xlt("fake-english", "--format", "wikiann", plain, "-o", tmp_path / "plain.fake", check=True)
    original, twin = read_tagged(str(plain)), read_tagged(str(tmp_path / "plain.fake"))
    assert original[0].words == ["Visit", "ftp:archive", "or", "de:Berlin"]
    assert [[to_english(w) for w in s.words] for s in twin] == [s.words for s in original]

    ud = tmp_path / "ud.conllu"
    ud.write_text("# sent_id = 1\n# text = Dogs bark.\n"
                  "1\tDogs\tdog\tNOUN\tNNS\tNumber=Plur\t2\tnsubj\t2:nsubj\t_\n"
                  "2\tbark\tbark\tVERB\tVBP\t_\t0\troot\t0:root\tSpaceAfter=No\n"
                  "3\t.\t.\tPUNCT\t.\t_\t2\tpunct\t2:punct\t_\n\n")
    run_xlt("fake-english", "--format", "conllu", ud, "-o", tmp_path / "ud.fake", check=True)
    (before,), (after,) = conllu.parse(ud.read_text()), conllu.parse((tmp_path / "ud.fake").read_text())
    assert after.metadata["text"] == to_fake("Dogs bark.")
    for a, b in zip(before, after):
        assert b["form"] == to_fake(a["form"]) and b["lemma"] == to_fake(a["lemma"])
        assert (b["head"], b["deprel"], b["upos"], b["feats"]) == (a["head"], a["deprel"], a["upos"], a["feats"])


def test_the_identity_dictionary_pairs_each_word_with_its_twin(tmp_path):
    muse = tmp_path / "en-fr.txt"
    muse.write_text("the le\nthe la\ncat chat\n\n")
    run_xlt("fake-english", "--format", "dictionary", muse, "-o", tmp_path / "en-fake.txt", check=True)
    pairs = [line.split(" ") for line in (tmp_path / "en-fake.txt").read_text().splitlines()]
    assert pairs == [["the", to_fake("the")], ["the", to_fake("the")], ["cat", to_fake("cat")]]


def test_bad_input_gives_one_line_with_the_file_and_line(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("A man sleeps.\tSomeone rests.\tentailment\nno label here\n")
    out = tmp_path / "out.tsv"
    assert_one_line_error(run_xlt("fake-english", "--format", "xnli", bad, "-o", out), f"{bad}:2:")
    assert not out.exists()
    # what fine-tuning would refuse, the filter refuses: a label it does not know, a fourth column
    for line, what in (("A man sleeps.\tSomeone rests.\tbogus", "unknown label 'bogus'"),
                       ("A man sleeps.\tSomeone rests.\tneutral\textra", "expected premise<TAB>hypothesis<TAB>label, got 4")):
        bad.write_text(f"A man sleeps.\tSomeone rests.\tentailment\n{line}\n")
        assert_one_line_error(run_xlt("fake-english", "--format", "xnli", bad, "-o", out), f"{bad}:2: {what}")
        assert_one_line_error(run_xlt("permute-words", "--format", "xnli", bad, "-o", out), f"{bad}:2: {what}")
        assert not out.exists()
    # and NER's reader's checks: as many columns as the first line, tags O, B-X or I-X
    for line, what in (("en:runs\tO\tX", "expected 2 columns like the file's first word line, got 3"),
                       ("en:runs\tQ-FOO", "bad tag 'Q-FOO'"), ("en:runs", "expected 2 columns")):
        bad.write_text(f"en:John\tB-PER\n{line}\n\nen:Paris\tB-LOC\n")
        assert_one_line_error(run_xlt("fake-english", "--format", "wikiann", bad, "-o", out), f"{bad}:2: {what}")
        assert_one_line_error(run_xlt("permute-words", "--format", "wikiann", bad, "-o", out), f"{bad}:2: {what}")
        assert not out.exists()
    # a prefixed file's word without the prefix: NER's reader refuses it, so the twin refuses it too
    bad.write_text("en:John\tB-PER\nen:runs\tO\n\nParis\tB-LOC\n")
    assert_one_line_error(run_xlt("fake-english", "--format", "wikiann", bad, "-o", out),
                          f"{bad}:4: expected a 'en:'-prefixed word")
    assert not out.exists()
    beyond = tmp_path / "beyond.txt"
    beyond.write_text("ok\nemoji \U0001F600\n")
    assert_one_line_error(run_xlt("fake-english", beyond, "-o", out), f"{beyond}:2:")
