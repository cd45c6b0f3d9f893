"""xlt report table1 with K et al.'s word-order control (the pair en-fakeperm): its three rows in the
Fake-English table, and whether permuting the words costs Default transfer, decided beyond the noise."""

from __future__ import annotations

from conftest import run_xlt
from test_report import cell, one_point, write_baselines, write_results
from test_report_fake import fill
from xlt.report import table1
from xlt.report.findings import FAILS, HOLDS, INCONCLUSIVE

CLAIM = "Fake-English: Transfer rests on word order"
# (zero-shot, English) of the permuted pair; the ordered pair's Default: xnli 60/70, ner 40/60, parse 30/50
PERMUTED = {"default": {"xnli": (50.0, 68.0), "ner": (25.0, 58.0), "parse": (12.0, 48.0)},
            "control": {"xnli": (34.0, 50.0), "ner": (5.0, 45.0), "parse": (3.0, 40.0)}}
# a permuted sentence's next word is seldom its head: the parsing baseline falls with the order
BASELINES = {"xnli": (("majority class", 35.0), ("majority class", 35.0)),
             "ner": (("training entities", 20.0), ("all O", 0.0)),
             "parse": (("next word is the head", 10.0), ("previous word is the head", 4.0))}


def fill_permuted(root, scores=PERMUTED, spread=0.5) -> None:
    for row, tasks in scores.items():
        for task, (zero_shot, english) in tasks.items():
            write_results(root / row / "en-fakeperm" / task / "results.json", task, "fakeperm",
                          one_point(task, "fakeperm", zero_shot, en=english, spread=spread))
    for task, (en, permuted) in BASELINES.items():
        write_baselines(root / "baselines" / "en-fakeperm" / f"{task}.json", task, {"en": en, "fakeperm": permuted})


def finding(t):
    return next(f for f in t.findings if f.claim.startswith(CLAIM))


def test_the_permuted_pair_adds_its_rows_and_decides_whether_order_matters(tmp_path):
    fill(tmp_path, spread=0.5)
    fill_permuted(tmp_path)
    t = table1.build(str(tmp_path), ["fake", "fakeperm"])
    assert t.title.startswith("Fake-English")
    labels = [label for label, _ in t.rows]
    assert labels[-3:] == ["Default, words permuted", "No pretraining, words permuted",
                           "Best trivial baseline, words permuted"]
    assert cell(t, "Default, words permuted", "NER (F1)", "zero-shot").value == 25.0
    # each pair's relative transfer over its own baselines: (12 - 4) / (48 - 10)
    assert cell(t, "Default, words permuted", "Parsing (LAS)", "relative").value == (12.0 - 4.0) / (48.0 - 10.0)
    assert cell(t, "Best trivial baseline, words permuted", "Parsing (LAS)", "zero-shot").value == 4.0
    assert cell(t, "Default", "NER (F1)", "zero-shot").value == 40.0          # the ordered rows unchanged
    found = finding(t)
    # margins over each pair's own baseline: xnli 25 vs 15, ner 40 vs 25, parse 20 vs 8
    assert found.verdict == HOLDS
    assert "ner: over the baseline +40.0 in order, +25.0 permuted (relative transfer 1.00 vs 0.66); lost +15.0" \
        in found.detail
    assert "parse: over the baseline +20.0 in order, +8.0 permuted" in found.detail
    res = run_xlt("report", "table1", "--results-dir", tmp_path, "--langs", "fake,fakeperm", "-o", tmp_path / "r")
    assert res.returncode == 0, res.stderr
    assert "| Default, words permuted | 50.0 ± 0.5 (n=3) |" in (tmp_path / "r" / "table1.md").read_text()


def test_order_matters_fails_where_permuted_transfer_is_no_smaller_and_waits_within_the_noise(tmp_path):
    fill(tmp_path, spread=0.5)
    same = {"default": {"xnli": (60.0, 70.0), "ner": (42.0, 60.0), "parse": (24.0, 50.0)},
            "control": PERMUTED["control"]}
    fill_permuted(tmp_path, same)
    found = finding(table1.build(str(tmp_path), ["fake", "fakeperm"]))
    # NER's margin is larger permuted (+42 against +40): refuted beyond 2 SE (0.8)
    assert found.verdict == FAILS and "ner: over the baseline +40.0 in order, +42.0 permuted" in found.detail

    fill(tmp_path / "noisy", spread=5.0)
    fill_permuted(tmp_path / "noisy", {"default": {"xnli": (59.0, 70.0), "ner": (38.0, 60.0), "parse": (25.0, 50.0)},
                                       "control": PERMUTED["control"]}, spread=5.0)
    found = finding(table1.build(str(tmp_path / "noisy"), ["fake", "fakeperm"]))
    assert found.verdict == INCONCLUSIVE and "2 SE" in found.detail


def test_a_task_default_does_not_transfer_in_order_is_left_out_by_name(tmp_path):
    fill(tmp_path, default={"xnli": (37.0, 70.0), "ner": (40.0, 60.0), "parse": (30.0, 50.0)}, spread=0.5)
    fill_permuted(tmp_path)
    found = finding(table1.build(str(tmp_path), ["fake", "fakeperm"]))
    assert found.verdict == HOLDS
    assert "xnli: Default +2.0 over the baseline in order, under 5: nothing to lose" in found.detail


def test_without_the_permuted_pair_the_table_has_no_word_order_rows(tmp_path):
    fill(tmp_path, spread=0.5)
    t = table1.build(str(tmp_path), ["fake"])
    assert not any("permuted" in label for label, _ in t.rows)
    assert not any(f.claim.startswith(CLAIM) for f in t.findings)
