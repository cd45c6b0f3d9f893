"""Table 1's findings skip the cells of models that did not learn their source language (English)."""

from __future__ import annotations

import json

from xlt.report import paper, table1
from xlt.report.findings import FAILS, HOLDS, INCONCLUSIVE
from xlt.report.table1_findings import EnglishScores, unlearned

LANGS = ["fr", "ru", "zh"]
ROWS = ["default", "wiki-cc", "default-anchors", "no-anchors", "extra-anchors",
        "sep-emb", "sep-emb+l1-3", "sep-emb+l1-6", "sep-l1-3", "sep-l1-6"]
TASKS = ("xnli", "ner", "parse")
SEPARATION = "Separating more bottom layers hurts more"
COLLAPSE = "Sep Emb + L1-6 falls towards chance"


def paper_values() -> dict:
    rows = paper.table1_rows(paper.load())
    return {row: {task: {lang: rows[row][task][lang] for lang in LANGS} for task in TASKS} for row in ROWS}


def english_scores(score: float, control: float, **rows: float) -> EnglishScores:
    """Every row at ``score`` on every English test set, the control at ``control``, ``rows`` overriding."""
    scores = {row: rows.get(row.replace("-", "_").replace("+", "_"), score) for row in ROWS}
    values = {row: {task: {lang: s for lang in LANGS} for task in TASKS} for row, s in scores.items()}
    values["control"] = {task: {lang: control for lang in LANGS} for task in TASKS}
    return EnglishScores(values)


def by_claim(findings) -> dict:
    return {f.claim.split(":")[0]: f for f in findings}


def test_unlearned_cells_are_those_not_a_tie_above_the_control():
    english = english_scores(50.0, 40.0, sep_emb=30.0, sep_l1_6=40.9)
    cells = unlearned(english)
    assert set(cells) == {(row, task, lang) for row in ("sep-emb", "sep-l1-6") for task in TASKS for lang in LANGS}
    assert cells[("sep-emb", "ner", "fr")] == "sep-emb ner fr (English 30.0 vs 40.0)"
    assert unlearned(english_scores(50.0, 40.0)) == {}
    # no control scores: nothing to judge against
    assert unlearned(EnglishScores({"sep-emb": {"ner": {"fr": 1.0}}})) == {}


def test_claims_skip_rows_that_did_not_learn_english_and_say_so():
    theirs = paper_values()
    learned = by_claim(table1.findings(theirs, theirs, english_scores(80.0, 40.0)))
    assert learned[SEPARATION].verdict == HOLDS and learned[COLLAPSE].verdict == HOLDS

    # Sep Emb + L1-6 did not learn English: its collapse says nothing about sharing.
    failed = by_claim(table1.findings(theirs, theirs, english_scores(80.0, 40.0, sep_emb_l1_6=35.0)))
    for claim in (SEPARATION, COLLAPSE):
        assert failed[claim].verdict == INCONCLUSIVE, failed[claim].detail
        assert "sep-emb+l1-6 ner fr (English 35.0 vs 40.0)" in failed[claim].detail
        assert failed[claim].paper_verdict == learned[claim].paper_verdict     # the paper's numbers as they are
    # claims that do not read that row are decided as before, without the note
    anchors = "More anchors help"
    assert failed[anchors].verdict == learned[anchors].verdict and "English" not in failed[anchors].detail

    # Only some languages unlearned: the claim is decided on the others, naming what it left out.
    english = english_scores(80.0, 40.0)
    english.values["sep-emb+l1-6"]["ner"]["zh"] = 10.0
    partial = by_claim(table1.findings(theirs, theirs, english))[COLLAPSE]
    assert partial.verdict in (HOLDS, FAILS) and "sep-emb+l1-6 ner zh (English 10.0 vs 40.0)" in partial.detail


def test_without_english_scores_nothing_is_left_out():
    theirs = paper_values()
    worse = json.loads(json.dumps(theirs))
    worse["sep-emb+l1-6"] = json.loads(json.dumps(theirs["default"]))
    assert by_claim(table1.findings(worse, theirs))[COLLAPSE].verdict == FAILS
    assert by_claim(table1.findings(worse, theirs, EnglishScores()))[COLLAPSE].verdict == FAILS
