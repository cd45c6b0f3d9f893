"""K et al.'s word-order control (xlt.text.word_order, `xlt permute-words`, language `fakeperm`): each
sentence's words permuted, nothing else changed; labels, entities and arcs kept."""

from __future__ import annotations

from collections import Counter

import conllu
from conftest import assert_one_line_error, run_xlt

from xlt.finetune.ner import read_tagged
from xlt.text.fake import fake_file, to_english, to_fake
from xlt.text.tokenize import Tokenizer
from xlt.text.word_order import permute_file, permute_tokens, sentences, spelled

RAW = ("The land on which the street lies was part of an estate. It was sold in 1949 by the Vera family! "
       "\"Why?\" asked the mayor, who wanted a new road through it.")
PARAGRAPH = Tokenizer("en").tokenize(RAW)
CONLLU = """# sent_id = s1
# text = I don't see the big dog.
1\tI\tI\tPRON\tPRP\t_\t4\tnsubj\t4:nsubj\t_
2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
2\tdo\tdo\tAUX\tVBP\t_\t4\taux\t4:aux\t_
3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t4:advmod\t_
4\tsee\tsee\tVERB\tVB\t_\t0\troot\t0:root\t_
5\tthe\tthe\tDET\tDT\t_\t7\tdet\t7:det\t_
6\tbig\tbig\tADJ\tJJ\t_\t7\tamod\t7:amod\t_
7\tdog\tdog\tNOUN\tNN\t_\t4\tobj\t4:obj\tSpaceAfter=No
8\t.\t.\tPUNCT\t.\t_\t4\tpunct\t4:punct\t_

# sent_id = s2
1\tDogs\tdog\tNOUN\tNNS\t_\t2\tnsubj\t_\t_
2\tbark\tbark\tVERB\tVBP\t_\t0\troot\t_\t_

"""
TAGGED = ("en:John\tB-PER\nen:Smith\tI-PER\nen:visited\tO\nen:New\tB-LOC\nen:York\tI-LOC\nen:City\tI-LOC\n"
          "en:and\tO\nen:Paris\tB-LOC\nen:with\tO\nen:the\tO\nen:UN\tB-ORG\nen:.\tO\n\n"
          "en:Alone\tO\nen:here\tO\n")


def test_words_are_permuted_within_each_sentence_only():
    cut = sentences(PARAGRAPH.split())
    assert [" ".join(run) for run in cut] == [
        "The land on which the street lies was part of an estate .", "It was sold in 1949 by the Vera family !",
        "\" Why ? \" asked the mayor , who wanted a new road through it ."]
    # Fake-English is cut where its English original is
    assert sentences(to_fake(PARAGRAPH).split()) == [[to_fake(t) for t in run] for run in cut]
    out = permute_tokens(PARAGRAPH, seed=0).split()
    start = 0
    for run in cut:     # each sentence keeps its place and its tokens, in another order
        assert Counter(out[start:start + len(run)]) == Counter(run) and out[start:start + len(run)] != run
        start += len(run)
    assert permute_tokens(PARAGRAPH, seed=0) == permute_tokens(PARAGRAPH, seed=0) != permute_tokens(PARAGRAPH, seed=1)
    # a sentence is permuted alike wherever it stands: the draw depends on its text alone
    first = " ".join(cut[0])
    assert permute_tokens(first + " More here .", 0).split()[:len(cut[0])] == permute_tokens(first, 0).split()
    # mapping and permuting commute: a permuted Fake-English line is the twin of the permuted English one
    assert permute_tokens(to_fake(PARAGRAPH), 0) == to_fake(permute_tokens(PARAGRAPH, 0))


def test_permuted_raw_sentences_give_the_tokenizer_the_permuted_tokens_back(tmp_path):
    # XNLI's sentences are raw: permuted as tokens, then written so that fine-tuning's tokenizer reads those
    # tokens (clitics written against a word: standalone, Moses would split their apostrophe off too)
    sentences_ = ["I don't think it's Mr. Smith's U.S. house... or is it?", "They've gone; I'm not, I'm not.",
                  "'s odd: that'll do, won't it?", "We don't have 15 of the 1990's cars."]
    source, out = tmp_path / "en.tsv", tmp_path / "perm.tsv"
    source.write_text("".join(f"{s}\tIt's fine.\tneutral\n" for s in sentences_))
    permute_file(source, out, "xnli", seed=5)
    english = Tokenizer("en")
    for original, line in zip(sentences_, out.read_text().splitlines()):
        premise = line.split("\t")[0]
        assert Counter(english.tokenize(premise).split()) == Counter(english.tokenize(original).split())
        assert english.tokenize(premise) != english.tokenize(original)
    # one word per clitic: a third clitic with no word left to take it stays alone
    assert spelled(["'s", ",", "dog", "'t", "'s", "cat", "."]) == ", dog's cat't . 's"
    # after a digit Moses splits only 's: "15't" would be one new token (XNLI test-en line 902)
    assert spelled(["15", "'t", "x"]) == "15 x't" and spelled(["x", "15", "'s", "'t"]) == "x't 15's"
    fake = tmp_path / "fake.tsv"
    fake_file(source, fake, "xnli")
    permute_file(fake, tmp_path / "fakeperm.tsv", "xnli", seed=5)
    # Fake-English's sentences are permuted as their English twins
    assert [line.split("\t") for line in (tmp_path / "fakeperm.tsv").read_text().splitlines()] == \
        [[to_fake(p), to_fake(h), label] for p, h, label in (line.split("\t") for line in out.read_text().splitlines())]


def test_permuted_fake_english_is_the_twin_of_permuted_english(tmp_path):
    english, fake = tmp_path / "en.tok", tmp_path / "fake.tok"
    english.write_text(PARAGRAPH + "\n\n" + "Short one .\n")
    fake.write_text(to_fake(english.read_text()))
    run_xlt("permute-words", fake, "-o", tmp_path / "perm.tok", check=True)
    lines = (tmp_path / "perm.tok").read_text().splitlines()
    assert lines == [to_fake(permute_tokens(PARAGRAPH, 0)), "", to_fake(permute_tokens("Short one .", 0))]
    # the language code fakeperm tokenizes as Fake-English does: by English's rules on the original
    assert Tokenizer("fakeperm").tokenize(lines[0]) == to_fake(Tokenizer("en").tokenize(to_english(lines[0])))


def test_conllu_keeps_every_arc_and_label_with_words_renumbered(tmp_path):
    source, mapped, out = tmp_path / "en.conllu", tmp_path / "fake.conllu", tmp_path / "perm.conllu"
    source.write_text(CONLLU)
    fake_file(source, mapped, "conllu")
    permute_file(mapped, out, "conllu")
    before, after = conllu.parse(CONLLU), conllu.parse(to_english(out.read_text()))
    assert len(after) == 2
    for old, new in zip(before, after):
        words = [t for t in old if isinstance(t["id"], int)]
        assert [t["id"] for t in new] == list(range(1, len(words) + 1))      # the range line 2-3 is dropped
        form = {t["id"]: t["form"] for t in new}

        def arcs(sentence, form_of):
            return Counter((form_of[t["id"]], form_of.get(t["head"], "ROOT"), t["deprel"]) for t in sentence
                           if isinstance(t["id"], int))
        assert arcs(new, form) == arcs(words, {t["id"]: t["form"] for t in words})
        assert all(t["deps"] is None and t["misc"] is None for t in new)
        assert [t["upos"] for t in sorted(new, key=lambda t: t["form"])] == \
            [t["upos"] for t in sorted(words, key=lambda t: t["form"])]
    assert after[0].metadata["text"] == " ".join(t["form"] for t in after[0])
    assert [t["form"] for t in after[0]] != [t["form"] for t in before[0] if isinstance(t["id"], int)]


def test_entities_move_whole_and_every_tag_is_kept(tmp_path):
    source, out = tmp_path / "en", tmp_path / "perm"
    source.write_text(TAGGED)
    run_xlt("permute-words", "--format", "wikiann", source, "-o", out, check=True)
    (original, alone), (moved, alone_after) = [[(s.words, s.tags) for s in read_tagged(f)] for f in (source, out)]

    def entities(words, tags):
        spans, current = [], None
        for word, tag in zip(words, tags):
            if tag.startswith("B-"):
                current = [tag[2:], word]
                spans.append(current)
            elif tag.startswith("I-"):
                current.append(word)
        return Counter(" ".join(span) for span in spans)
    assert entities(*moved) == entities(*original) == Counter(
        ["PER John Smith", "LOC New York City", "LOC Paris", "ORG UN"])
    assert Counter(zip(*moved)) == Counter(zip(*original)) and moved[0] != original[0]
    assert sorted(alone_after[0]) == sorted(alone[0])


def test_iob1_entities_are_written_in_iob2_so_two_moved_together_stay_two(tmp_path):
    source, out = tmp_path / "iob1", tmp_path / "perm"
    source.write_text("a\tI-PER\nb\tI-PER\nx\tO\nc\tI-PER\n")   # two PER entities: "a b" and "c"
    for seed in range(8):
        permute_file(source, out, "wikiann", seed)
        tags = [line.split("\t")[1] for line in out.read_text().splitlines()]
        assert tags.count("B-PER") == 2 and tags.count("I-PER") == 1


def test_xnli_permutes_premise_and_hypothesis_and_keeps_the_label(tmp_path):
    source, out = tmp_path / "en.tsv", tmp_path / "perm.tsv"
    source.write_text("A man in a red coat sleeps on the bench.\tSomeone rests outside today.\tentailment\n")
    permute_file(source, out, "xnli", seed=3)
    premise, hypothesis, label = out.read_text().rstrip("\n").split("\t")
    assert label == "entailment"
    assert premise == permute_tokens("A man in a red coat sleeps on the bench .", 3)
    assert Counter(hypothesis.split()) == Counter("Someone rests outside today .".split())


def test_bad_input_names_the_file_and_line_and_writes_nothing(tmp_path):
    bad, out = tmp_path / "bad.conllu", tmp_path / "out.conllu"
    bad.write_text("1\tA\ta\tDET\tDT\t_\t2\tdet\t_\t_\n2\tdog\tdog\tNOUN\tNN\t_\t7\troot\t_\t_\n\n")
    assert_one_line_error(run_xlt("permute-words", "--format", "conllu", bad, "-o", out),
                          f"{bad}:2: HEAD '7' names no word")
    assert not out.exists()
    bad.write_text("1\tA\ta\tDET\n")
    assert_one_line_error(run_xlt("permute-words", "--format", "conllu", bad, "-o", out), f"{bad}:1: expected 10")
    bad.write_text("premise\thypothesis\tneutral\nno label\n")
    assert_one_line_error(run_xlt("permute-words", "--format", "xnli", bad, "-o", out), f"{bad}:2: expected premise")
    assert not out.exists()
    # what the parser's reader refuses, both filters refuse: an empty FORM, a tree with one word left headless
    word = "1\tA\ta\tDET\tDT\t_\t2\tdet\t_\t_\n"
    for second, what in (("2\t\tdog\tNOUN\tNN\t_\t0\troot\t_\t_", "2: a word with an empty FORM"),
                         ("2\tdog\tdog\tNOUN\tNN\t_\t_\t_\t_\t_", "2: a word without a head")):
        bad.write_text(f"{word}{second}\n\n")
        for command in ("permute-words", "fake-english"):
            assert_one_line_error(run_xlt(command, "--format", "conllu", bad, "-o", out), f"{bad}:{what}")
            assert not out.exists()
    # every word headless is a text without trees, as before
    bad.write_text(word.replace("\t2\tdet", "\t_\t_") + "2\tdog\tdog\tNOUN\tNN\t_\t_\t_\t_\t_\n\n")
    assert run_xlt("permute-words", "--format", "conllu", bad, "-o", out).returncode == 0
    out.unlink()
    # a file with no sentence: blank lines only, or comments only
    for content, fmt in (("\n\n  \n", "text"), ("\n \n", "wikiann"), ("\n\n", "dictionary"),
                         ("# sent_id = 1\n# text = nothing\n\n", "conllu")):
        bad.write_text(content)
        for command in ("permute-words", "fake-english"):
            if command == "permute-words" and fmt == "dictionary":
                continue
            assert_one_line_error(run_xlt(command, "--format", fmt, bad, "-o", out), f"{bad}: empty input: no sentence")
            assert not out.exists()
