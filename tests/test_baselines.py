"""xlt baselines: each trivial baseline scored by hand on tiny files; the output file; bad input."""

from __future__ import annotations

import json

import pytest

from conftest import assert_one_line_error, run_in_process, run_xlt
from xlt.finetune.baselines import BASELINES_FORMAT, compute_baselines, tag_known_entities


def write(path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


# ---- xnli -------------------------------------------------------------------------------------------
def test_xnli_chance_and_majority_class(tmp_path):
    train = write(tmp_path / "train.tsv", "a\tb\tneutral\nc\td\tentailment\ne\tf\tneutral\n")
    mostly_neutral = write(tmp_path / "en.tsv", "a\tb\tneutral\nc\td\tneutral\ne\tf\tneutral\ng\th\tcontradiction\n")
    rarely = write(tmp_path / "fr.tsv", "a\tb\tentailment\nc\td\tneutral\ne\tf\tcontradiction\ng\th\tentailment\n")
    result = compute_baselines("xnli", ("en", train), [("en", mostly_neutral), ("fr", rarely)])
    assert result.scores["en"]["chance"] == {"accuracy": pytest.approx(100 / 3)}
    assert result.scores["en"]["majority class"] == {"accuracy": 75.0}       # neutral: 3 of 4
    assert result.scores["fr"]["majority class"] == {"accuracy": 25.0}
    assert "(neutral)" in result.descriptions["majority class"]
    best = result.best()
    assert best["en"] == {"name": "majority class", "score": 75.0, "metric": "accuracy"}
    assert best["fr"]["name"] == "chance" and best["fr"]["score"] == pytest.approx(100 / 3)


# ---- ner --------------------------------------------------------------------------------------------
NER_TRAIN = """John\tB-PER
Smith\tI-PER
lives\tO
in\tO
New\tB-LOC
York\tI-LOC

The\tO
New\tB-ORG
York\tI-ORG
Times\tI-ORG

Paris\tB-LOC
and\tO
Paris\tB-LOC
,\tO
not\tO
Paris\tB-PER
"""

NER_TEST = """Mary\tB-PER
met\tO
John\tB-PER
Smith\tI-PER
at\tO
the\tO
New\tB-ORG
York\tI-ORG
Times\tI-ORG
in\tO
Paris\tB-PER

Smith\tB-PER
slept\tO
"""


def test_ner_all_o_and_training_entities(tmp_path):
    train, test = write(tmp_path / "train", NER_TRAIN), write(tmp_path / "test", NER_TEST)
    result = compute_baselines("ner", ("en", train), [("en", test)])
    assert result.metric == "f1"
    assert result.scores["en"]["all O"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    # Predicted: John Smith PER (right), New York Times ORG (the longest match, right; not New York LOC),
    # Paris LOC (its most frequent training type; gold PER: wrong); Mary and the lone Smith unseen.
    # 2 of 3 predicted spans right, 2 of 5 gold spans found: F1 = 2 * (2/3 * 2/5) / (2/3 + 2/5) = 0.5.
    scores = result.scores["en"]["training entities"]
    assert scores["precision"] == pytest.approx(200 / 3) and scores["recall"] == pytest.approx(40.0)
    assert scores["f1"] == pytest.approx(50.0)
    assert result.best()["en"] == {"name": "training entities", "score": pytest.approx(50.0), "metric": "f1"}


def test_entity_matching_is_longest_first_left_to_right():
    entities = {("a",): "X", ("a", "b"): "Y", ("b", "c"): "Z"}
    assert tag_known_entities(["a", "b", "c"], entities, 2) == ["B-Y", "I-Y", "O"]
    assert tag_known_entities(["c", "b", "c", "a"], entities, 2) == ["O", "B-Z", "I-Z", "B-X"]


# ---- parse ------------------------------------------------------------------------------------------
def conllu(*sentences: list[tuple]) -> str:
    blocks = []
    for words in sentences:
        blocks.append("\n".join(f"{i}\t{form}\t{form}\t{upos}\t_\t_\t{head}\t{rel}\t_\t_"
                                for i, (form, upos, head, rel) in enumerate(words, start=1)))
    return "\n\n".join(blocks) + "\n"


PARSE_TRAIN = conllu([("the", "DET", 2, "det"), ("cat", "NOUN", 3, "nsubj"), ("sleeps", "VERB", 0, "root"),
                      (".", "PUNCT", 3, "punct")],
                     [("dogs", "NOUN", 2, "nsubj:pass"), ("bark", "VERB", 0, "root")])
PARSE_TEST = conllu([("the", "DET", 3, "det"), ("big", "ADJ", 3, "amod"), ("cat", "NOUN", 4, "nsubj"),
                     ("sleeps", "VERB", 0, "root"), (".", "PUNCT", 4, "punct")],
                    [("dogs", "NOUN", 2, "nsubj"), ("bark", "VERB", 0, "root")],
                    [("eat", "VERB", 0, "root"), ("fish", "NOUN", 1, "obj"), ("!", "PUNCT", 1, "punct")])


def test_parse_next_and_previous_word_heads_by_hand(tmp_path):
    train, test = write(tmp_path / "train.conllu", PARSE_TRAIN), write(tmp_path / "test.conllu", PARSE_TEST)
    result = compute_baselines("parse", ("en", train), [("en", test)])
    # Relations by UPOS from training: DET det, NOUN nsubj (nsubj:pass counts as nsubj), VERB root;
    # ADJ unseen -> the most frequent overall (nsubj and root 2 each: nsubj, alphabetically first).
    # 8 scored words (the two PUNCT are not scored).
    # next:     s1 heads 2 3 4 5 -> big, cat right (cat's nsubj too); s2 2 0 both right with labels;
    #           s3 2 3 wrong.            UAS 4/8, LAS 3/8
    # previous: s1 0 1 2 3 wrong; s2 0 1 wrong; s3 0 1 right (eat root right; fish nsubj, gold obj).
    #                                    UAS 2/8, LAS 1/8
    counts = {"scored_words": 8.0, "cut_words": 0.0}
    assert result.scores["en"]["next word is the head"] == {"las": 37.5, "uas": 50.0, **counts}
    assert result.scores["en"]["previous word is the head"] == {"las": 12.5, "uas": 25.0, **counts}
    assert result.best()["en"] == {"name": "next word is the head", "score": 37.5, "metric": "las"}
    assert "(else nsubj)" in result.descriptions["next word is the head"]

    # Task options change the scoring as in `xlt finetune`: every word scored (10; the two PUNCT wrong).
    every = compute_baselines("parse", ("en", train), [("en", test)], {"punct_upos": ""})
    assert every.scores["en"]["next word is the head"] == {"las": 30.0, "uas": 40.0, "scored_words": 10.0,
                                                           "cut_words": 0.0}
    assert every.settings == {"punct_upos": ""}


# ---- the command ------------------------------------------------------------------------------------
def test_the_command_writes_the_file_and_prints_the_table(tmp_path):
    train, test = write(tmp_path / "train.conllu", PARSE_TRAIN), write(tmp_path / "test.conllu", PARSE_TEST)
    out = tmp_path / "parse.json"
    res = run_xlt("baselines", "parse", "--train", "en", train, "--eval", "en", test, "--eval", "fr", test, "-o", out)
    assert res.returncode == 0, res.stderr
    assert "| en | next word is the head (best) | 37.50 | 50.00 | 8 | 0 |" in res.stdout
    data = json.loads(out.read_text())
    assert data["format"] == BASELINES_FORMAT and data["task"] == "parse" and data["metric"] == "las"
    assert data["train"]["lang"] == "en" and data["train"]["path"] == train and len(data["train"]["sha256"]) == 64
    assert data["eval"]["fr"]["path"] == test
    assert data["scores"]["fr"]["previous word is the head"] == {"las": 12.5, "uas": 25.0, "scored_words": 8.0,
                                                                 "cut_words": 0.0}
    assert data["best"] == {lang: {"name": "next word is the head", "score": 37.5, "metric": "las"}
                            for lang in ("en", "fr")}
    assert "Example" in run_xlt("baselines", "--help").stdout


def test_bad_input_is_one_error_line_and_nothing_is_written(tmp_path, capsys):
    train = write(tmp_path / "train", NER_TRAIN)
    test = write(tmp_path / "test", NER_TEST)
    out = tmp_path / "out.json"

    def fails(*args, fragments):
        # in this process: one torch import, not one a refusal (~4 s each); the first is a real process below
        res = run_in_process(capsys, "baselines", *map(str, args), "-o", out)
        assert_one_line_error(res, "xlt baselines: error:", *fragments)
        assert not out.exists()

    res = run_xlt("baselines", "pos", "--train", "en", train, "--eval", "en", test, "-o", out)
    assert_one_line_error(res, "xlt baselines: error:", "unknown task 'pos'", "xnli, ner, parse")
    assert not out.exists()
    fails("ner", "--train", "en", tmp_path / "nope", "--eval", "en", test,
          fragments=[f"{tmp_path / 'nope'}: no such file"])
    bad = write(tmp_path / "bad", NER_TEST.replace("Times\tI-ORG", "Times\tS-ORG"))
    fails("ner", "--train", "en", train, "--eval", "en", bad, fragments=[f"{bad}:9:", "IOBES"])
    unseen = write(tmp_path / "unseen", NER_TEST.replace("slept\tO", "slept\tB-MISC"))
    fails("ner", "--train", "en", train, "--eval", "en", unseen, fragments=[f"{unseen}:14:", "not seen in training"])
    fails("ner", "--train", "en", train, "--eval", "en", test, "--eval", "en", test, fragments=["--eval en given twice"])
    fails("parse", "--train", "en", write(tmp_path / "t.conllu", "1\tx\n"), "--eval", "en", test,
          fragments=["t.conllu:1:", "expected 10 tab-separated columns"])
    fails("ner", "--train", "en", train, "--eval", "en", test, "--task-option", "f1_mode", "loose",
          fragments=["f1_mode must be one of"])
    # a setting of the fine-tuned model changes no baseline's score, yet would be recorded as the file's
    for option, value in (("dropout", "0.2"), ("window_owner", "first")):
        fails("ner", "--train", "en", train, "--eval", "en", test, "--task-option", option, value,
              fragments=[f"--task-option {option}: a setting of the fine-tuned ner model",
                         "that change their scores: postprocess, f1_mode"])
    res = run_in_process(capsys, "baselines", "ner", "--train", "en", train, "--eval", "en", test, "-o",
                         tmp_path / "no" / "x.json")
    assert_one_line_error(res, "output directory does not exist")
    fails("ner", "--train", "en", train, fragments=["Missing option '--eval'"])
