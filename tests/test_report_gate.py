"""Table 1's findings skip the cells of models that did not learn their source language (English)."""

from __future__ import annotations

import json
import math
import re
from typing import Optional

import pytest

from report_files import cell, finding
from test_report_noise import write_cell
from xlt.finetune.selection import summarize
from xlt.report import paper, table1
from xlt.report.findings import FAILS, HOLDS, INCONCLUSIVE, Inconclusive, Verdict
from xlt.report.noise import Noise, Spread
from xlt.report.table1_findings import (EnglishScores, deeper_separation_hurts, extra_anchors_help, no_anchors_close,
                                        sep_emb_l16_collapses, unlearned)

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
    assert failed[COLLAPSE].verdict == INCONCLUSIVE, failed[COLLAPSE].detail
    # the separation claim is decided on the chain that is left (Sep L1-3 > Sep L1-6), naming the other
    assert failed[SEPARATION].verdict == HOLDS, failed[SEPARATION].detail
    assert failed[SEPARATION].detail.startswith("xnli: sep-l1-3 66.8 > sep-l1-6 47.6; ner: ")
    assert "left out: no language has ner scores for all of sep-emb, sep-emb+l1-3, sep-emb+l1-6" in failed[SEPARATION].detail
    for claim in (SEPARATION, COLLAPSE):
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


# ---- rows fine-tuned with their language-specific layers frozen (the paper's protocol) -------------------
LEARNED_FIT = (151.0, 1278.0, 20000)   # English dev perplexity, unigram floor, step
PLATEAU_FIT = (1215.0, 1278.0, 5000)


def test_a_row_that_froze_more_than_the_control_is_judged_by_its_pretraining():
    # Sep Emb + L1-6 parses English worse than the fully trained control (35 < 40): with its bottom six
    # layers frozen that caps its score, and says nothing about whether its pretraining learned English.
    english = english_scores(80.0, 40.0, sep_emb_l1_6=35.0)
    cells = [("sep-emb+l1-6", task, lang) for task in TASKS for lang in LANGS]
    english.frozen_more = {c: LEARNED_FIT for c in cells}
    assert unlearned(english) == {}
    english.frozen_more = {c: PLATEAU_FIT for c in cells}
    english.values["sep-emb+l1-6"] = english_scores(80.0, 40.0).values["sep-emb+l1-6"]
    assert unlearned(english)[("sep-emb+l1-6", "ner", "fr")] == (
        "sep-emb+l1-6 en-fr model (English dev perplexity 1,215, not below 0.9 x the unigram floor's 1,278)")
    # no floor recorded: its English score against the control's, as for every other row
    english = english_scores(80.0, 40.0, sep_emb_l1_6=35.0)
    english.frozen_more = {c: None for c in cells}
    assert set(unlearned(english)) == set(cells)


def test_claims_keep_a_frozen_row_that_learned_and_say_how_it_was_judged():
    theirs = paper_values()
    english = english_scores(80.0, 40.0, sep_emb_l1_6=35.0)
    english.frozen_more = {("sep-emb+l1-6", task, lang): LEARNED_FIT for task in TASKS for lang in LANGS}
    kept = by_claim(table1.findings(theirs, theirs, english))
    for claim in (SEPARATION, COLLAPSE):
        assert kept[claim].verdict == HOLDS, kept[claim].detail
        assert "sep-emb+l1-6: judged learned by English dev perplexity below 0.9 x the unigram floor" in kept[claim].detail
        assert "left out" not in kept[claim].detail


def write_finetune(path, task: str, lang: str, target: float, en: float, frozen: int, model: str) -> None:
    """A results.json in the runner's format with three seeds' runs (0.3 apart: std 0.3), its
    encoder-parameter counts and model."""
    metric = {"xnli": "accuracy", "ner": "f1", "parse": "las"}[task]
    runs = [{"grid_point": {"batch_size": 32, "encoder_lr": 1e-3, "head_lr": 1e-3}, "seed": seed, "status": "done",
             "source_dev": en + d, "shift_alpha": {},
             "results": {"plain": {"en": {s: {metric: en + d} for s in ("dev", "test")},
                                   lang: {s: {metric: target + d} for s in ("dev", "test")}}}}
            for seed, d in ((12, -0.3), (156, 0.0), (78, 0.3))]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": "xlt-finetune-results/1", "task": task, "model": model, "source": "en",
                                "targets": [lang], "complete": True, "counts": {"done": 3, "busy": 0, "failed": 0},
                                "encoder_parameters": {"trained": 1_000_000 - frozen, "frozen": frozen},
                                "summary": summarize(runs, metric, "en", [lang]), "runs": runs}))


def write_pretraining_run(run_dir, en_ppl: float, en_floor: float):
    """A pretraining run directory whose last evaluation is ``en_ppl`` against the unigram ``en_floor``."""
    run_dir.mkdir(parents=True)
    (run_dir / "metrics.jsonl").write_text(
        json.dumps({"step": 500, "lang": "en", "loss": 6.0}) + "\n"
        + json.dumps({"step": 20000, "valid_en_mlm_ppl": en_ppl, "valid_fr_mlm_ppl": 80.0,
                      "valid_en_unigram_ppl": en_floor, "valid_fr_unigram_ppl": 1274.0, "best_step": 20000}) + "\n")
    return run_dir


def test_the_report_reads_frozen_counts_and_the_pretraining_floor_from_the_files(tmp_path):
    models = {row: write_pretraining_run(tmp_path / "models" / row, ppl, 1278.0)
              for row, ppl in (("default", 139.0), ("sep-emb+l1-6", 151.0), ("sep-l1-6", 1250.0))}
    # The cpu scale's parsing numbers (docs/reproduce.md); XNLI at chance (Default does not transfer: skipped)
    scores = {"default": (8.8, 74.4, 0), "control": (2.6, 69.9, 0), "sep-emb+l1-6": (0.2, 48.4, 950_000),
              "sep-l1-6": (1.9, 67.5, 400_000), "sep-l1-3": (8.5, 72.3, 200_000)}
    for row, (fr, en, frozen) in scores.items():
        for task, target in (("parse", fr), ("ner", 4 * fr), ("xnli", 33.4)):
            write_finetune(tmp_path / "table1" / row / "en-fr" / task / "results.json", task, "fr", target, en,
                           frozen, str(models.get(row, tmp_path / "models" / "none")))
    t = table1.build(str(tmp_path / "table1"), ["fr"])
    english = dict(t.sections[0].rows)
    labels = [group for group, _ in t.sections[0].columns]
    parse = english["Sep Emb + L1-6"][labels.index("Parsing (LAS)")]
    assert parse.value == 48.4 and parse.note == ("fine-tuned with its language-specific layers frozen (trained "
                                                  "0.05M of 1.00M encoder parameters; the control 1.00M of 1.00M)")
    assert english["Default"][labels.index("Parsing (LAS)")].note is None
    found = {f.claim.split(":")[0]: f for f in t.findings}
    collapse = found["Sep Emb + L1-6 falls towards no pretraining"]
    assert collapse.verdict == HOLDS and "sep-emb+l1-6: judged learned by English dev perplexity" in collapse.detail
    # Sep L1-6's run sits on the plateau (1,250 of 1,278): left out; Sep L1-3 recorded no floor (no run
    # directory), so its English 72.3 is read against the control's 69.9 and it is kept.
    separation = found[SEPARATION]
    assert separation.verdict == INCONCLUSIVE
    # named once for the model, not once per task
    assert separation.detail.count("sep-l1-6 en-fr model (English dev perplexity 1,250, not below 0.9") == 1
    assert "sep-l1-3 parse fr" not in separation.detail


def test_a_row_is_judged_learned_only_when_every_pretraining_seed_s_model_left_the_plateau(tmp_path):
    models = {name: write_pretraining_run(tmp_path / "models" / name, ppl, 1200.0)
              for name, ppl in (("default", 139.0), ("sep-l1-3", 150.0), ("sep-l1-3-seed1", 1150.0))}
    cells = {("default", "en-fr"): (20.0, 47.0, 0, "default"), ("control", "en-fr"): (10.0, 33.0, 0, None),
             ("sep-l1-3", "en-fr"): (25.0, 46.0, 200_000, "sep-l1-3"),
             ("sep-l1-3", "en-fr-seed1"): (24.0, 44.0, 200_000, "sep-l1-3-seed1")}
    for (row, pair), (fr, en, frozen, model) in cells.items():
        write_finetune(tmp_path / "table1" / row / pair / "ner" / "results.json", "ner", "fr", fr, en, frozen,
                       str(models[model]) if model else str(tmp_path / "models" / "none"))
    t = table1.build(str(tmp_path / "table1"), ["fr"])
    # seed 0's model learned English (150 of 1,200); seed 1's did not (1,150): the row is left out, by the worse
    assert "sep-l1-3 en-fr model (English dev perplexity 1,150, not below 0.9" in "".join(f.detail for f in t.findings)


def test_a_task_not_run_is_left_out_of_a_claim_with_a_note():
    # A partial run (the cpu scale's decisive rows have no XNLI): claims are checked on the other tasks.
    theirs = paper_values()
    ours = {row: {task: cells for task, cells in tasks.items() if task != "xnli"} for row, tasks in theirs.items()}
    found = by_claim(table1.findings(ours, theirs, english_scores(80.0, 40.0)))
    assert found[SEPARATION].verdict == HOLDS and found[COLLAPSE].verdict == found[COLLAPSE].paper_verdict
    assert "left out: no xnli results" in found[SEPARATION].detail
    assert found[COLLAPSE].detail.startswith("share of Default's margin over chance lost: ner ")
    domain = found["Domain mismatch (Wiki-CC) costs NER more than XNLI and parsing (§4.1)."]
    assert domain.verdict == INCONCLUSIVE and domain.detail == "no xnli results"   # it compares all three


def scores(**rows: dict) -> dict:
    """values[row][task][lang] from ``rows``: row -> {task: {lang: score}} (other tasks without scores);
    a row's name as a keyword: sep_emb_l1_3 for sep-emb+l1-3."""
    def key(name: str) -> str:
        return name.replace("emb_l1", "emb+l1").replace("_", "-")
    return {key(row): {task: dict(cells.get(task, {})) for task in TASKS} for row, cells in rows.items()}


def test_no_anchors_far_above_default_is_not_within_three_points_of_it():
    def verdict(no_anchors: float, spread: Optional[float] = None):
        values = scores(default={"ner": {"fr": 30.0}}, no_anchors={"ner": {"fr": no_anchors}})
        noise = None if spread is None else Noise({(r, "ner", "fr"): Spread(spread, 3) for r in values})
        try:
            return no_anchors_close(values, noise)
        except Inconclusive as reason:
            return Verdict(INCONCLUSIVE, str(reason))

    assert verdict(45.0).verdict == FAILS and "ner +15.0" in verdict(45.0).detail   # 15 points above
    assert verdict(26.0).verdict == FAILS and verdict(32.0).verdict == HOLDS
    # with seeds (2 SE of the gap 2 sqrt(2 x 0.36 / 3) = 0.98): +15 fails, +1 holds, +2.5 is not decided
    assert [verdict(x, 0.6).verdict for x in (45.0, 31.0, 32.5)] == [FAILS, HOLDS, INCONCLUSIVE]


def test_a_comparison_over_languages_where_default_does_not_transfer_is_left_out_and_languages_are_named():
    # Default transfers on fr NER (40 F1) but not on zh (1.0), the one language the other rows have
    values = scores(default={"ner": {"fr": 40.0, "zh": 1.0}}, no_anchors={"ner": {"zh": 0.5}},
                    sep_l1_3={"ner": {"zh": 0.8}}, sep_l1_6={"ner": {"zh": 0.4}}, sep_emb={"ner": {"zh": 0.9}}, sep_emb_l1_3={"ner": {"zh": 0.2}}, sep_emb_l1_6={"ner": {"zh": 0.5}},
                    extra_anchors={"ner": {"zh": 3.0}}, default_anchors={"ner": {"zh": 1.0}})
    gate = "Default less than 5 points above chance on ner over zh (+1.0)"
    for rule in (no_anchors_close, deeper_separation_hurts, extra_anchors_help, sep_emb_l16_collapses):
        with pytest.raises(Inconclusive, match=re.escape(gate)):
            rule(values)
    # where the compared rows have fr too, the comparison is over fr and zh, and says which it leaves out
    values = scores(default={"ner": {"fr": 40.0, "ru": 30.0, "zh": 20.0}},
                    no_anchors={"ner": {"fr": 39.0, "zh": 19.0}})
    verdict = no_anchors_close(values)
    assert verdict.verdict == HOLDS and "ner over fr, zh only (ru: a cell of default, no-anchors missing" in verdict.detail


def test_a_score_that_is_not_a_number_is_a_gap_with_its_reason_not_a_silent_hole(tmp_path):
    write_cell(tmp_path, "default", "ner", [30.0, math.nan, 32.0])
    write_cell(tmp_path, "no-anchors", "ner", [20.0, 21.0, 22.0])
    for row in ("default", "no-anchors"):
        write_cell(tmp_path, row, "parse", [30.0, 31.0, 32.0])
    t = table1.build(str(tmp_path), ["fr"])
    gap = cell(t, "Default", "NER (F1)", "fr").gap
    assert gap.startswith("damaged result file") and gap.endswith("the fr test score is not a number")
    close = finding(t, "No anchors stays within")
    assert close.verdict == HOLDS and "left out: no xnli, ner results" in close.detail and "nan" not in close.detail
