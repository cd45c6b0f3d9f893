"""xlt report table1 with K et al.'s word-order control (the pair en-fakeperm): its table after the
Fake-English one, and whether permuting the words costs Default transfer, decided beyond the noise
and only on models that left the unigram plateau."""

from __future__ import annotations

import json

from conftest import assert_one_line_error, run_xlt
from report_files import cell, one_point, write_results
from test_report_fake import fill, write_pair
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
    write_pair(root, "fakeperm", scores, BASELINES, spread)


def finding(t):
    return next(f for f in t.findings if f.claim.startswith(CLAIM))


def test_the_permuted_pair_adds_its_rows_and_decides_whether_order_matters(tmp_path):
    fill(tmp_path, spread=0.5)
    fill_permuted(tmp_path)
    t = table1.build(str(tmp_path), ["fake", "fakeperm"])
    assert t.title.startswith("Fake-English") and not any("permuted" in label for label, _ in t.rows)
    [p] = t.sections
    assert p.part == "fakeperm" and p.title.startswith("Word order (K et al. 2020)")
    assert [label for label, _ in p.rows] == ["Default", "No pretraining", "Best trivial baseline"]
    assert cell(p, "Default", "NER (F1)", "zero-shot").value == 25.0
    # each pair's relative transfer over its own baselines: (12 - 4) / (48 - 10)
    assert cell(p, "Default", "Parsing (LAS)", "relative").value == (12.0 - 4.0) / (48.0 - 10.0)
    assert cell(p, "Best trivial baseline", "Parsing (LAS)", "zero-shot").value == 4.0
    assert cell(t, "Default", "NER (F1)", "zero-shot").value == 40.0          # the ordered table unchanged
    found = finding(t)
    # margins over each pair's own baseline: xnli 25 vs 15, ner 40 vs 25, parse 20 vs 8
    assert found.verdict == HOLDS
    assert "ner: over the baseline +40.0 in order, +25.0 permuted (relative transfer 1.00 vs 0.66); lost +15.0" \
        in found.detail
    assert "parse: over the baseline +20.0 in order, +8.0 permuted" in found.detail
    write_results(tmp_path / "default" / "en-fr" / "ner" / "results.json", "ner", "fr", one_point("ner", "fr", 30.0))
    res = run_xlt("report", "table1", "--results-dir", tmp_path, "--langs", "fr,fake,fakeperm", "-o", tmp_path / "r")
    assert res.returncode == 0, res.stderr
    assert "| Default | 50.0 ± 0.5 (n=3) | 68.0 ± 0.5 (n=3) |" in (tmp_path / "r" / "table1.md").read_text()
    # every table once, each line of the CSV saying which it is from
    csv = (tmp_path / "r" / "table1.csv").read_text().splitlines()[1:]
    assert {line.split(",")[0] for line in csv} == {"target", "en", "fake", "fakeperm"}
    assert sum(line.startswith('fakeperm,Default,NER (F1),zero-shot,25.0') for line in csv) == 1


def test_the_permuted_pairs_one_row_takes_the_pretraining_noise_of_the_ordered_pairs_rows(tmp_path):
    # the ordered pair's rows vary by pretraining seed (Default 40 and 28, ...); the permuted Default's two
    # models happen to agree (20.0, 20.4): its noise is not that one-row guess but the pooled spread
    fill(tmp_path, spread=0.5)
    fill_permuted(tmp_path)
    for row, second in (("default", 28.0), ("sep-l1-3", 26.0)):
        write_results(tmp_path / row / "en-fake-seed1" / "ner" / "results.json", "ner", "fake",
                      one_point("ner", "fake", second, en=60.0, spread=0.5))
    write_results(tmp_path / "default" / "en-fakeperm" / "ner" / "results.json", "ner", "fakeperm",
                  one_point("ner", "fakeperm", 20.0, en=58.0, spread=0.5))
    write_results(tmp_path / "default" / "en-fakeperm-seed1" / "ner" / "results.json", "ner", "fakeperm",
                  one_point("ner", "fakeperm", 20.4, en=58.0, spread=0.5))
    found = finding(table1.build(str(tmp_path), ["fake", "fakeperm"]))
    # lost: (34 - 0) - (20.2 - 0) = +13.8. Ordered Default: its own sd over its models, 8.5 (larger than
    # the pool); permuted Default: the sd pooled over the three pairs of models, 6.4, not its own 0.3.
    # 2 SE = 2 sqrt(8.5^2 / 2 + 6.4^2 / 2) = 15.0; with its own 0.3 it would be 12.0, and the claim would hold.
    assert "ner: over the baseline +34.0 in order, +20.2 permuted" in found.detail
    assert "lost +13.8 (2 SE 15.0, pretraining seeds counted)" in found.detail
    assert found.verdict == INCONCLUSIVE


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
    assert not t.sections and not any(f.claim.startswith(CLAIM) for f in t.findings)
    # the control alone compares with nothing
    assert_one_line_error(run_xlt("report", "table1", "--results-dir", tmp_path, "--langs", "fakeperm", "-o",
                                  tmp_path / "r"), "fakeperm is fake's word-order control")


def test_the_ordered_pairs_cells_keep_their_own_noise(tmp_path):
    # fake: Default's models 40 and 39, Sep L1-3's 36 and 26 (pooled sd 5.0); fakeperm: Default's 20 and 30
    fill(tmp_path, spread=0.5)
    fill_permuted(tmp_path)
    for row, lang, score in (("default", "fake", 39.0), ("sep-l1-3", "fake", 26.0), ("default", "fakeperm", 30.0)):
        write_results(tmp_path / row / f"en-{lang}-seed1" / "ner" / "results.json", "ner", lang,
                      one_point("ner", lang, score, en=60.0, spread=0.5))
    write_results(tmp_path / "default" / "en-fakeperm" / "ner" / "results.json", "ner", "fakeperm",
                  one_point("ner", "fakeperm", 20.0, en=58.0, spread=0.5))
    found = finding(table1.build(str(tmp_path), ["fake", "fakeperm"]))
    # lost 39.5 - 25 = 14.5; 2 SE = 2 sqrt(5.0^2 / 2 + 7.1^2 / 2) = 12.3 with the ordered Default at its own
    # pair's pooled sd (5.0); at the joint pool's (5.8, the permuted pair counted in) it would read 12.9
    assert "lost +14.5 (2 SE 12.3, pretraining seeds counted)" in found.detail


def plateau_run(root, name: str, ppl: float):
    run = root / "runs" / name
    run.mkdir(parents=True, exist_ok=True)
    (run / "metrics.jsonl").write_text(json.dumps({"step": 15000, "valid_en_mlm_ppl": ppl,
                                                   "valid_en_unigram_ppl": 1147.0}) + "\n")
    return run


def name_model(root, pair: str, run) -> None:
    """The model behind a pair's Default cells, as results files name it."""
    for task in ("xnli", "ner", "parse"):
        path = root / "default" / pair / task / "results.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "model": str(run)}))


def test_a_default_model_still_on_the_unigram_plateau_is_left_out_by_its_pretraining(tmp_path):
    # its English fine-tuning may edge past the control's, but its pretraining never left the unigram
    # floor: what it transfers says nothing about word order
    fill(tmp_path, spread=0.5)
    fill_permuted(tmp_path)
    run = plateau_run(tmp_path, "en-fakeperm", 1088.0)
    name_model(tmp_path, "en-fakeperm", run)
    found = finding(table1.build(str(tmp_path), ["fake", "fakeperm"]))
    assert found.verdict == INCONCLUSIVE
    assert f"{run} did not leave the unigram plateau: en dev perplexity 1,088 against the unigram floor's 1,147" \
        in found.detail
    plateau_run(tmp_path, "en-fakeperm", 190.0)
    assert finding(table1.build(str(tmp_path), ["fake", "fakeperm"])).verdict == HOLDS
    # the ordered pair's Default alike
    name_model(tmp_path, "en-fake", plateau_run(tmp_path, "en-fake", 1100.0))
    found = finding(table1.build(str(tmp_path), ["fake", "fakeperm"]))
    assert found.verdict == INCONCLUSIVE and "en-fake did not leave the unigram plateau" in found.detail


def test_where_only_the_permuted_pair_has_pretraining_seeds_the_ordered_default_counts_them_too(tmp_path):
    # PRETRAIN_SEEDS_fake="0", PRETRAIN_SEEDS_fakeperm="0 1": the permuted Default's models 20 and 26 measure
    # the pretraining variance (sd 4.24); the ordered Default, one model, counts it too, not only its
    # fine-tuning seeds' 0.5 / sqrt(3)
    fill(tmp_path, spread=0.5)
    fill_permuted(tmp_path)
    for seed, score in ((0, 20.0), (1, 26.0)):
        write_results(tmp_path / "default" / ("en-fakeperm" + (f"-seed{seed}" if seed else "")) / "ner" / "results.json",
                      "ner", "fakeperm", one_point("ner", "fakeperm", score, en=58.0, spread=0.5))
    found = finding(table1.build(str(tmp_path), ["fake", "fakeperm"]))
    # lost: (40 - 0) - (23 - 0) = +17.0; 2 SE = 2 sqrt(4.24^2 + 4.24^2 / 2) = 10.4 (ordered: one model, the
    # pooled variance whole; permuted: two models); counting the permuted side alone it was 6.0
    assert "ner: over the baseline +40.0 in order, +23.0 permuted" in found.detail
    assert "lost +17.0 (2 SE 10.4, pretraining seeds counted)" in found.detail
