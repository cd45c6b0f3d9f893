"""xlt report steps: Default's snapshots against pretraining steps, beside Table 1's control and
baselines, with each snapshot's dev perplexity and the first step that meets each target."""

from __future__ import annotations

import json

import pytest

from conftest import run_xlt
from report_files import cell, one_point, write_baselines, write_results
from xlt.report import steps

# (zero-shot, English) per snapshot and task. NER meets its targets from 10,000 steps (5,000: relative
# 13 / 40 = 0.33 and +8 over No pretraining); parsing stays under the next-word rule; XNLI's English
# leaves the majority class by less than 5 points at 5,000 steps (no relative transfer there).
SCORES = {5000: {"xnli": (34.0, 37.0), "ner": (13.0, 60.0), "parse": (15.0, 50.0)},
          10000: {"xnli": (36.0, 45.0), "ner": (30.0, 60.0), "parse": (20.0, 55.0)},
          20000: {"xnli": (38.0, 47.0), "ner": (34.0, 62.0), "parse": (22.0, 57.0)}}
CONTROL = {"xnli": (33.0, 35.0), "ner": (5.0, 35.0), "parse": (3.0, 39.0)}
BASELINES = {"xnli": (("majority class", 33.3), ("majority class", 33.3)),
             "ner": (("training entities", 20.0), ("all O", 0.0)),
             "parse": (("next word is the head", 25.0), ("next word is the head", 25.0))}
DEV_PPL = {5000: (1734.0, 1466.0), 10000: (329.0, 285.0), 20000: (150.0, 140.0)}


def fill(root, scores=SCORES, model=None):
    """The curve's cells (step-N/en-fake/<task>, each naming ``model``) and Table 1's control and baselines."""
    curve, table1 = root / "steps", root / "table1"
    for step, tasks in scores.items():
        for task, (zero_shot, english) in tasks.items():
            path = curve / f"step-{step}" / "en-fake" / task / "results.json"
            write_results(path, task, "fake", one_point(task, "fake", zero_shot, en=english))
            if model:
                data = json.loads(path.read_text())
                path.write_text(json.dumps({**data, "model": str(model)}))
    for task, (zero_shot, english) in CONTROL.items():
        write_results(table1 / "control" / "en-fake" / task / "results.json", task, "fake",
                      one_point(task, "fake", zero_shot, en=english, spread=1.0))
    for task, (en, fake) in BASELINES.items():
        write_baselines(table1 / "baselines" / "en-fake" / f"{task}.json", task, {"en": en, "fake": fake})
    return curve, table1


def run_dir(root):
    """A pretraining run whose metrics.jsonl holds DEV_PPL at its evaluations (and a training line)."""
    run = root / "run"
    run.mkdir()
    lines = [{"step": 100, "lang": "en", "loss": 7.0}]
    lines += [{"step": s, "valid_en_mlm_ppl": en, "valid_fake_mlm_ppl": fake, "valid_en_unigram_ppl": 1147.0,
               "valid_fake_unigram_ppl": 1049.0} for s, (en, fake) in DEV_PPL.items()]
    (run / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return run


def test_each_snapshot_is_a_row_in_step_order_with_its_dev_perplexity_scores_and_relative_transfer(tmp_path):
    curve, table1 = fill(tmp_path, model=run_dir(tmp_path))
    table, _ = steps.build(str(curve), str(table1), "fake")
    assert [label for label, _ in table.rows] == ["5,000 steps", "10,000 steps", "20,000 steps", "No pretraining",
                                                  "Best trivial baseline"]   # 10,000 after 5,000: by number
    for step, (en, fake) in DEV_PPL.items():
        label = f"{step:,} steps"
        assert cell(table, label, "dev perplexity", "en").value == en
        assert cell(table, label, "dev perplexity", "fake").value == fake
        for task, title in (("xnli", "XNLI (acc)"), ("ner", "NER (F1)"), ("parse", "Parsing (LAS)")):
            zero_shot, english = SCORES[step][task]
            assert cell(table, label, title, "zero-shot").value == pytest.approx(zero_shot)
            assert cell(table, label, title, "English").value == pytest.approx(english)
    # relative = (zero-shot - baseline on fake) / (English - baseline on English)
    assert cell(table, "10,000 steps", "NER (F1)", "relative").value == pytest.approx((30 - 0) / (60 - 20))
    assert cell(table, "20,000 steps", "Parsing (LAS)", "relative").value == pytest.approx((22 - 25) / (57 - 25))
    assert "too little English skill" in cell(table, "5,000 steps", "XNLI (acc)", "relative").gap
    assert cell(table, "No pretraining", "NER (F1)", "zero-shot").std == pytest.approx(1.0)
    assert cell(table, "No pretraining", "dev perplexity", "en").value is None


def test_the_first_snapshot_meeting_each_target_or_how_far_the_last_one_is(tmp_path):
    curve, table1 = fill(tmp_path)
    table, _ = steps.build(str(curve), str(table1), "fake")
    lines = {line.split(":")[0]: line for line in table.remarks[1:]}
    # NER at 5,000: relative 0.22, +8 over No pretraining (10 needed); at 10,000: 0.75 and +25
    assert lines["NER (F1)"].startswith("NER (F1): the targets (relative ≥ 0.5 and ≥ 10 over No pretraining) "
                                        "are met from 10,000 steps (relative 0.75, +25.0 over No pretraining)")
    assert "not met by 20,000 steps (there: relative -0.09, +19.0 over No pretraining; best relative -0.09 at " \
           "20,000 steps)" in lines["Parsing (LAS)"]
    # XNLI at 20,000: relative (38 - 33.3) / (47 - 33.3) = 0.34 < 0.5; +5.0 over No pretraining
    assert "not met by 20,000 steps (there: relative 0.34, +5.0 over No pretraining" in lines["XNLI (acc)"]
    # without a dev perplexity in the run the cells name the gap
    assert "no dev perplexity recorded at step 5,000" in cell(table, "5,000 steps", "dev perplexity", "en").gap


def test_a_snapshot_not_fine_tuned_on_a_task_is_a_gap_and_does_not_meet_its_target(tmp_path):
    scores = {5000: SCORES[5000], 10000: {"ner": SCORES[10000]["ner"]}}
    curve, table1 = fill(tmp_path, scores)
    table, _ = steps.build(str(curve), str(table1), "fake")
    assert "not run yet" in cell(table, "10,000 steps", "Parsing (LAS)", "zero-shot").gap
    assert "met from 10,000 steps" in next(r for r in table.remarks if r.startswith("NER"))
    assert "not met by 10,000 steps (there: undecided: " in next(r for r in table.remarks if r.startswith("Parsing"))


@pytest.mark.parametrize("row, title, name", [(None, "Default", "steps-fake"),
                                             ("sep-l1-3", "Sep L1-3", "steps-fake-sep-l1-3"),
                                             ("sep-l1", "Sep L1 (not in the paper)", "steps-fake-sep-l1")])
def test_the_command_writes_the_table_and_its_curves_titled_and_named_after_the_row(tmp_path, row, title, name):
    curve, table1 = fill(tmp_path, model=run_dir(tmp_path))
    out = tmp_path / "report"
    proc = run_xlt("report", "steps", "--results-dir", curve, "--table1-dir", table1, "--lang", "fake",
                   *(["--row", row] if row else []), "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"# {title} en-fake against pretraining steps")
    assert sorted(p.name for p in out.iterdir()) == [f"{name}.{ext}" for ext in ("csv", "json", "md", "png", "tex")]
    assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_one_language_and_a_known_row_or_one_error_line(tmp_path):
    curve, table1 = fill(tmp_path, model=run_dir(tmp_path))
    out = tmp_path / "report"
    proc = run_xlt("report", "steps", "--results-dir", curve, "--table1-dir", table1, "--lang", "fake,fr", "-o", out)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "xlt report steps: error: --lang takes one language code, got 'fake,fr'"]
    proc = run_xlt("report", "steps", "--results-dir", curve, "--table1-dir", table1, "--row", "sep-l1-4", "-o", out)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "xlt report steps: error: --row 'sep-l1-4' is not a Table 1 row (one of: default, wiki-cc, default-anchors, "
        "no-anchors, extra-anchors, sep-emb, sep-emb+l1-3, sep-emb+l1-6, sep-l1-3, sep-l1-6, sep-l1)"]


def test_a_curve_with_no_results_yet_is_drawn_without_a_warning(tmp_path):
    (tmp_path / "curve").mkdir()
    proc = run_xlt("report", "steps", "--results-dir", tmp_path / "curve", "--table1-dir", tmp_path / "curve",
                   "-o", tmp_path / "out")
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert (tmp_path / "out" / "steps-fake.png").exists()
