"""Task metrics against hand-made cases and brute-force span counting."""

from __future__ import annotations

import random

import pytest

from xlt.finetune.metrics import accuracy, attachment_scores, postprocess_tags, span_f1, strip_subtype


def test_accuracy_in_percent():
    assert accuracy(["a", "b", "a", "c"], ["a", "b", "c", "c"]) == 75.0
    assert accuracy([], []) == 0.0
    with pytest.raises(ValueError):
        accuracy(["a"], [])


@pytest.mark.parametrize("tags, repaired", [
    (["I-X"], ["B-X"]),                                              # standalone I-X -> B-X
    (["B-X", "I-Y", "I-Z"], ["B-Z", "I-Z", "I-Z"]),                  # the final type wins
    (["O", "I-X", "I-Y", "O"], ["O", "B-Y", "I-Y", "O"]),
    (["B-X", "B-Y", "I-Y"], ["B-X", "B-Y", "I-Y"]),                  # B always opens a chunk
    (["B-X", "I-X", "I-Y", "B-Z"], ["B-Y", "I-Y", "I-Y", "B-Z"]),
    (["I-X", "B-X", "I-Y"], ["B-X", "B-Y", "I-Y"]),
    (["O", "O"], ["O", "O"]),
    ([], []),
])
def test_postprocessing_rules(tags, repaired):
    assert postprocess_tags(tags) == repaired


def random_tags(rng, n, types="XYZ"):
    return [rng.choice(["O", "O"] + [f"{p}-{t}" for p in "BI" for t in types]) for _ in range(n)]


def test_postprocessing_gives_valid_iob2_and_keeps_entity_positions():
    rng = random.Random(0)
    for _ in range(500):
        tags = random_tags(rng, rng.randint(0, 12))
        out = postprocess_tags(tags)
        assert [t == "O" for t in out] == [t == "O" for t in tags]
        for i, t in enumerate(out):
            if t.startswith("I-"):
                assert i > 0 and out[i - 1] != "O" and out[i - 1][2:] == t[2:], out
        assert postprocess_tags(out) == out


def conlleval_spans(tags):
    """Brute force spans as the CoNLL script reads tags: I-X after anything but X opens a chunk."""
    spans, start = set(), None
    for i, tag in enumerate(tags + ["O"]):
        kind = None if tag == "O" else tag[2:]
        opens = tag.startswith("B-") or (tag.startswith("I-") and (start is None or tags[i - 1][2:] != kind))
        if start is not None and (tag == "O" or opens):
            spans.add((start, i, tags[start][2:]))
            start = None
        if kind is not None and start is None:
            start = i
    return spans


def brute_force_f1(gold, predicted):
    tp = n_gold = n_pred = 0
    for s, (g, p) in enumerate(zip(gold, predicted)):
        gs, ps = conlleval_spans(g), conlleval_spans(p)
        tp += len(gs & ps)
        n_gold += len(gs)
        n_pred += len(ps)
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_gold if n_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if tp else 0.0
    return 100 * precision, 100 * recall, 100 * f1


def test_span_f1_matches_brute_force_counting():
    rng = random.Random(1)
    for _ in range(40):
        gold = [postprocess_tags(random_tags(rng, rng.randint(1, 10))) for _ in range(8)]
        predicted = [random_tags(rng, len(g)) for g in gold]
        for i in range(0, 8, 3):
            predicted[i] = list(gold[i])                     # some exact matches, so F1 is rarely 0
        scores = span_f1(gold, predicted)
        assert (scores["precision"], scores["recall"], scores["f1"]) == pytest.approx(brute_force_f1(gold, predicted))


def test_strict_and_conlleval_differ_only_on_ill_formed_predictions():
    gold = [["B-PER", "I-PER", "O", "B-LOC"]]
    ill_formed = [["I-PER", "I-PER", "O", "B-LOC"]]
    assert span_f1(gold, ill_formed)["f1"] == 100.0
    assert span_f1(gold, ill_formed, "strict")["f1"] == pytest.approx(100 * 2 / 3)     # P 1/1, R 1/2
    repaired = [postprocess_tags(ill_formed[0])]
    assert span_f1(gold, repaired, "strict") == span_f1(gold, repaired) == {"precision": 100.0, "recall": 100.0,
                                                                            "f1": 100.0}
    with pytest.raises(ValueError):
        span_f1(gold, gold, "iob1")


def test_no_entities_anywhere_scores_zero_without_warnings():
    assert span_f1([["O"]], [["O"]]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}


def test_strip_subtype():
    assert strip_subtype("nsubj:pass") == "nsubj"
    assert strip_subtype("obl:tmod") == "obl" and strip_subtype("root") == "root"


# Two hand-made sentences: "She was seen ." and "Yes !".
GOLD_HEADS = [[3, 3, 0, 3], [0, 1]]
GOLD_RELS = [["nsubj:pass", "aux:pass", "root", "punct"], ["root", "punct"]]
UPOS = [["PRON", "AUX", "VERB", "PUNCT"], ["INTJ", "SYM"]]


def test_attachment_scores_skip_punctuation_and_strip_subtypes():
    heads = [[3, 1, 0, 1], [0, 1]]                      # "was" attached wrongly; punctuation wrong too
    rels = [["nsubj", "aux:pass", "root", "punct"], ["root", "punct"]]
    scores = attachment_scores(GOLD_HEADS, GOLD_RELS, UPOS, heads, rels)
    # scored words: She, was, seen, Yes -> heads right: She, seen, Yes; labels right (subtypes stripped): all 3
    assert scores == {"uas": 75.0, "las": 75.0, "scored_words": 4.0, "cut_words": 0.0}
    kept = attachment_scores(GOLD_HEADS, GOLD_RELS, UPOS, heads, rels, strip_subtypes=False)
    assert kept["las"] == 50.0                           # nsubj != nsubj:pass
    everything = attachment_scores(GOLD_HEADS, GOLD_RELS, UPOS, heads, rels, exclude_upos=())
    assert everything == pytest.approx({"uas": 100 * 4 / 6, "las": 100 * 4 / 6, "scored_words": 6.0, "cut_words": 0.0})
    only_punct = attachment_scores(GOLD_HEADS, GOLD_RELS, UPOS, heads, rels, exclude_upos=("PUNCT",))
    assert only_punct["scored_words"] == 5.0             # SYM ("!" tagged SYM here) now counts


def test_missing_predictions_are_wrong_and_lengths_must_agree():
    heads = [[3, 3, 0, None], [0, None]]
    rels = [["nsubj", "aux", "root", None], ["root", None]]
    scores = attachment_scores(GOLD_HEADS, GOLD_RELS, UPOS, heads, rels, exclude_upos=())
    assert scores["uas"] == scores["las"] == pytest.approx(100 * 4 / 6) and scores["cut_words"] == 2.0
    with pytest.raises(ValueError):
        attachment_scores(GOLD_HEADS, GOLD_RELS, UPOS, [[3, 3, 0], [0, 1]], rels)
    assert attachment_scores([[]], [[]], [[]], [[]], [[]])["scored_words"] == 0.0
