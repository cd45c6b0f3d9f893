"""Table 1's verdicts against the fine-tuning seeds' noise: a margin beyond twice the standard error
holds or fails, a smaller one is inconclusive with the margin and the noise in its text, a one-seed
cell takes the measured cross-CPU floor (NER) or has no noise estimate; cells show mean ± std (n)."""

from __future__ import annotations

import csv
import json
import math
import statistics
from pathlib import Path

import pytest

from report_files import METRIC, cell, finding, run_record, write_baselines, write_results
from xlt.report import table1, table1_fake
from xlt.report.findings import FAILS, HOLDS, INCONCLUSIVE, Inconclusive
from xlt.report.noise import SINGLE_SEED_SD, Estimate, Noise, Spread, estimate, judge
from xlt.report.render import write_report
from xlt.report.table1_findings import EnglishScores, sep_emb_l16_collapses

SEEDS = (12, 156, 78, 37, 8)


def seeded(task: str, target: str, scores: list[float], en: float = 60.0) -> list[dict]:
    """One setting's runs, seed i scoring ``scores[i]`` on the target test set (English at ``en``)."""
    m = METRIC[task]
    return [run_record({"batch_size": 32, "encoder_lr": 1e-3, "head_lr": 1e-3}, seed, en,
                       {"en": {"dev": {m: en}, "test": {m: en}}, target: {"dev": {m: x}, "test": {m: x}}})
            for seed, x in zip(SEEDS, scores)]


def write_cell(root: Path, row: str, task: str, scores: list[float], lang: str = "fr", en: float = 60.0) -> None:
    write_results(root / row / f"en-{lang}" / task / "results.json", task, lang, seeded(task, lang, scores, en))


def textbook_two_se(a: list[float], b: list[float]) -> float:
    """2 x SE_diff = 2 sqrt(sd_a^2/n_a + sd_b^2/n_b), sample standard deviations."""
    return 2 * math.sqrt(statistics.stdev(a) ** 2 / len(a) + statistics.stdev(b) ** 2 / len(b))


def test_a_margin_beyond_two_standard_errors_holds_or_fails_and_a_smaller_one_is_inconclusive(tmp_path):
    default, control = [30.0, 34.0, 27.5], [10.0, 12.5, 9.0]
    write_cell(tmp_path, "default", "ner", default)
    write_cell(tmp_path, "control", "ner", control)
    # parsing: Default below the control by more than the noise
    write_cell(tmp_path, "default", "parse", [5.0, 6.0, 5.5])
    write_cell(tmp_path, "control", "parse", [9.0, 8.0, 9.5])
    # XNLI: a margin of 5 inside a noise of 2 SE = 5.5
    write_cell(tmp_path, "default", "xnli", [20.0, 28.0, 24.0])
    write_cell(tmp_path, "control", "xnli", [18.0, 22.0, 17.0])
    t = table1.build(str(tmp_path), ["fr"])

    ner = finding(t, "Pretraining beats no pretraining on NER")
    two_se = textbook_two_se(default, control)
    assert ner.verdict == HOLDS
    assert f"Default 30.5, No pretraining 10.5 (+20.0, 2 SE {two_se:.1f})" in ner.detail
    parse = finding(t, "Pretraining beats no pretraining on Parsing")
    two_se = textbook_two_se([5.0, 6.0, 5.5], [9.0, 8.0, 9.5])
    assert parse.verdict == FAILS and f"(-3.3, 2 SE {two_se:.1f})" in parse.detail and two_se < 3.3
    xnli = finding(t, "Pretraining beats no pretraining on XNLI")
    assert textbook_two_se([20.0, 28.0, 24.0], [18.0, 22.0, 17.0]) == pytest.approx(5.54, abs=0.01)
    assert xnli.verdict == INCONCLUSIVE and "Default 24.0, No pretraining 19.0 (+5.0, 2 SE 5.5)" in xnli.detail
    assert xnli.detail.endswith("; not decided, within 2 SE of the threshold or without a noise estimate")

    # the same margin with seeds that agree stands clear of them
    write_cell(tmp_path, "default", "xnli", [23.9, 24.0, 24.1])
    write_cell(tmp_path, "control", "xnli", [18.9, 19.0, 19.1])
    assert finding(table1.build(str(tmp_path), ["fr"]), "Pretraining beats no pretraining on XNLI").verdict == HOLDS


def test_one_seed_takes_the_cross_cpu_floor_on_ner_and_has_no_noise_estimate_elsewhere(tmp_path):
    floor = SINGLE_SEED_SD["ner"]
    assert floor == pytest.approx(28.6 - 21.8)     # the measured spread between two CPU kinds
    write_cell(tmp_path, "default", "ner", [40.0])
    write_cell(tmp_path, "control", "ner", [20.0])
    write_cell(tmp_path, "default", "parse", [30.0, 31.0, 29.0])   # three seeds against one
    write_cell(tmp_path, "control", "parse", [10.0])
    t = table1.build(str(tmp_path), ["fr"])
    ner = finding(t, "Pretraining beats no pretraining on NER")
    two_se = 2 * math.sqrt(2) * floor             # 19.2: two one-seed cells at the floor
    assert ner.verdict == HOLDS and f"(+20.0, 2 SE {two_se:.1f}, one-seed cells at the cross-CPU floor)" in ner.detail
    parse = finding(t, "Pretraining beats no pretraining on Parsing")
    assert parse.verdict == INCONCLUSIVE      # a 20-point margin, but no noise estimate for the one-seed side
    assert "(+20.0, no noise estimate: one fine-tuning seed for control parse fr)" in parse.detail

    write_cell(tmp_path, "default", "ner", [35.0])    # 15 points: inside the floor's noise
    ner = finding(table1.build(str(tmp_path), ["fr"]), "Pretraining beats no pretraining on NER")
    assert ner.verdict == INCONCLUSIVE and f"(+15.0, 2 SE {two_se:.1f}" in ner.detail


def test_the_noise_of_a_mean_over_languages_and_of_a_share_of_a_margin():
    # Terms of a mean over two languages: each cell's variance sd^2/n, weighted by (1/2)^2.
    noise = Noise({("a", "ner", "fr"): Spread(2.0, 4), ("a", "ner", "ru"): Spread(4.0, 4)})
    values = {"a": {"ner": {"fr": 10.0, "ru": 20.0}}}
    e = estimate(values, noise, {("a", "ner", "fr"): 0.5, ("a", "ner", "ru"): 0.5}, constant=-1.0)
    assert e.value == 14.0 and e.se == pytest.approx(math.sqrt(0.25 * 4 / 4 + 0.25 * 16 / 4))
    assert judge(Estimate(3.0, 1.4)) is True and judge(Estimate(3.0, 1.5)) is None and judge(Estimate(-3.1, 1.5)) is False
    assert judge(Estimate(0.0, exact=True), strict=False) is True and judge(Estimate(0.0, exact=True)) is False
    assert judge(Estimate(50.0, None, ("x ner fr",))) is None

    # "loses at least half of Default's margin over chance": (Default - row) - Default / 2 >= 0 on NER
    rows = {"default": 40.0, "sep-emb+l1-6": 16.0}
    values = {row: {"ner": {"fr": v}, "xnli": {"fr": None}, "parse": {"fr": None}} for row, v in rows.items()}
    spreads = {("default", "ner", "fr"): Spread(3.0, 3), ("sep-emb+l1-6", "ner", "fr"): Spread(2.0, 3)}
    se = math.sqrt(0.25 * 9 / 3 + 4 / 3)           # Var(0.5 Default - row) from the two cells' spreads
    verdict = sep_emb_l16_collapses(values, noise=Noise(spreads))
    assert verdict.verdict == HOLDS and f"ner 60% (lost - half the margin: +4.0, 2 SE {2 * se:.1f})" in verdict.detail
    spreads[("sep-emb+l1-6", "ner", "fr")] = Spread(6.0, 3)
    with pytest.raises(Inconclusive, match=r"ner 60% \(lost - half the margin: \+4.0, 2 SE 7.1\)"):
        sep_emb_l16_collapses(values, noise=Noise(spreads))
    assert sep_emb_l16_collapses(values).verdict == HOLDS     # exact numbers (the paper's): as they are

    # Default transfers on fr but not on zh, the one language Sep Emb + L1-6 has: no share of a margin
    # that is not there (it divided by 0, or called -300 % "at least half")
    for zh, score in ((0.0, 0.0), (30.0, 20.0)):
        task = "ner" if zh == 0.0 else "xnli"
        values = {"default": {"xnli": {}, "ner": {}, "parse": {}}, "sep-emb+l1-6": {"xnli": {}, "ner": {}, "parse": {}}}
        values["default"][task] = {"fr": 70.0, "zh": zh}
        values["sep-emb+l1-6"][task] = {"zh": score}
        with pytest.raises(Inconclusive, match=f"Default less than 5 points above chance on {task} over zh"):
            sep_emb_l16_collapses(values)


def test_the_table_renders_mean_std_and_n_where_several_seeds_ran(tmp_path):
    write_cell(tmp_path, "default", "ner", [30.0, 34.0, 27.5])
    write_cell(tmp_path, "control", "ner", [14.7])
    t = table1.build(str(tmp_path), ["fr"])
    c = cell(t, "Default", "NER (F1)", "fr")
    assert c.value == pytest.approx(30.5) and c.n == 3 and c.std == pytest.approx(statistics.stdev([30.0, 34.0, 27.5]))
    one = cell(t, "No pretraining", "NER (F1)", "fr")
    assert (one.value, one.n, one.std) == (14.7, 1, None)
    paths = write_report(t, str(tmp_path / "report"))
    md = Path(paths["markdown"]).read_text()
    assert "| 30.5 ± 3.3 (n=3) (79.8) |" in md and "| 14.7 |" in md
    assert "mean ± sample std over n fine-tuning seeds" in md and "more than 2 standard errors" in md
    assert r"30.5 $\pm$ 3.3 (n=3) (79.8)" in Path(paths["latex"]).read_text()
    lines = list(csv.DictReader(Path(paths["csv"]).open()))
    default = next(r for r in lines if r["model"] == "Default" and r["group"] == "NER (F1)" and r["column"] == "fr")
    assert float(default["std"]) == pytest.approx(3.2787, abs=1e-4) and default["n"] == "3"
    data = json.loads(Path(paths["json"]).read_text())
    assert data["rows"][0]["cells"][2]["n"] == 3 and data["rows"][0]["cells"][2]["column"] == "fr"


def test_fake_english_findings_use_the_same_noise(tmp_path):
    # Default and the separated rows over three seeds; Sep L1-6 a point under Sep L1-3 with seeds 4 apart
    scores = {"default": 40.0, "control": 5.0, "extra-anchors": 42.0, "sep-emb": 30.0, "sep-emb+l1-3": 20.0,
              "sep-emb+l1-6": 5.0, "sep-l1-3": 30.0, "sep-l1-6": 29.0}
    for row, x in scores.items():
        for task in ("xnli", "ner", "parse"):
            spread = 4.0 if row in ("sep-l1-3", "sep-l1-6") else 0.5
            write_cell(tmp_path, row, task, [x + 40 * (task == "xnli") - spread, x + 40 * (task == "xnli"),
                                             x + 40 * (task == "xnli") + spread], lang="fake",
                       en=50.0 if row == "control" else 70.0)
    for task, (en, fake) in {"xnli": (35.0, 35.0), "ner": (20.0, 0.0), "parse": (10.0, 10.0)}.items():
        write_baselines(tmp_path / "baselines" / "en-fake" / f"{task}.json", task,
                        {"en": ("baseline", en), "fake": ("baseline", fake)})
    t = table1.build(str(tmp_path), ["fake"])
    more = finding(t, "Fake-English: More separation hurts more")
    assert more.verdict == INCONCLUSIVE
    # sep-l1-3 - sep-l1-6: 1.0 against 2 SE = 2 sqrt(16/3 + 16/3) = 6.5
    assert "sep-l1-3 30.0 > sep-l1-6 29.0 (sep-l1-3 - sep-l1-6: +1.0, 2 SE 6.5)" in more.detail
    assert more.detail.endswith("not decided, within 2 SE of the threshold or without a noise estimate: "
                                "xnli sep-l1-3 > sep-l1-6, "
                                "ner sep-l1-3 > sep-l1-6, parse sep-l1-3 > sep-l1-6")
    assert finding(t, "Fake-English: Pretraining transfers without").verdict == HOLDS
    anchors = finding(t, "Fake-English: Anchors added by code-switching")
    assert anchors.verdict == HOLDS and "mean over tasks: +2.00 (2 SE 0.47)" in anchors.detail
    assert finding(t, "Fake-English: Separated embeddings or layers").verdict == HOLDS

    # the table's zero-shot and English cells carry their seeds
    fake = t if t.part == "fake" else t.sections[-1]
    assert cell(fake, "Sep L1-6", "NER (F1)", "zero-shot").std == pytest.approx(4.0)
    # the same rule on exact numbers (no noise given) decides on the difference alone
    values = {row: {task: {"fake": x} for task in ("xnli", "ner", "parse")} for row, x in scores.items()}
    values["baselines"] = {"xnli": {"fake": 0.0}, "ner": {"fake": 0.0}, "parse": {"fake": 0.0}}
    exact = table1_fake.findings(values, EnglishScores())
    assert next(f for f in exact if "More separation" in f.claim).verdict == HOLDS


def write_separated_ner(root: Path, scores: dict[str, float], spread: float = 1.0) -> None:
    """Fake-English NER cells only, three seeds ``spread`` apart, over an all-O baseline of 0."""
    for row, x in scores.items():
        write_cell(root, row, "ner", [x - spread, x, x + spread], lang="fake", en=50.0 if row == "control" else 70.0)
    write_baselines(root / "baselines" / "en-fake" / "ner.json", "ner", {"en": ("baseline", 20.0), "fake": ("baseline", 0.0)})


def test_an_undecided_link_between_two_rows_at_the_floor_is_left_out_of_more_separation(tmp_path):
    # the Sep Emb rows (2.0-3.0) transfer next to nothing over the baseline's 0: their differences are
    # noise, not separation, so the claim is read on Sep L1-3 > Sep L1-6
    base = {"default": 25.0, "control": 5.0, "sep-l1-3": 12.0, "sep-l1-6": 3.0,
            "sep-emb": 2.5, "sep-emb+l1-3": 2.0, "sep-emb+l1-6": 3.0}
    claim = "Fake-English: More separation hurts more"

    def verdict(name: str, scores: dict, spread: float = 1.0):
        write_separated_ner(tmp_path / name, scores, spread)
        return finding(table1.build(str(tmp_path / name), ["fake"]), claim)

    more = verdict("floor", base)
    assert more.verdict == HOLDS
    assert "left out: ner sep-emb vs sep-emb+l1-3 (both under 5 over the best trivial baseline: +2.5, +2.0)" in more.detail
    assert "left out: ner sep-emb+l1-3 vs sep-emb+l1-6 (both under 5 over the best trivial baseline: +2.0, +3.0)" in more.detail
    assert "sep-l1-3 - sep-l1-6: +9.0, 2 SE 1.6" in more.detail

    # Sep L1-3 at the floor too: nothing is left to decide on, and the verdict says why
    more = verdict("none", {**base, "sep-l1-3": 3.5})
    assert more.verdict == INCONCLUSIVE and "every link is between two rows at the floor" in more.detail

    # a row at the floor above one that is not: the link is no tie at the floor, and stays undecided
    more = verdict("above", {**base, "sep-l1-3": 2.5, "sep-l1-6": 14.0}, spread=12.0)
    assert more.verdict == INCONCLUSIVE and "left out: ner sep-l1-3 vs sep-l1-6" not in more.detail
    # links decided either way count, however little their rows transfer
    more = verdict("decided", {**base, "sep-emb": 4.5, "sep-emb+l1-3": 0.5, "sep-emb+l1-6": 0.2}, spread=0.1)
    assert more.verdict == HOLDS and "left out: ner sep-emb vs" not in more.detail
    more = verdict("reversed", {**base, "sep-emb+l1-3": 4.5}, spread=0.5)
    assert more.verdict == FAILS and "sep-emb 2.5 <= sep-emb+l1-3 4.5 > sep-emb+l1-6 3.0" in more.detail


def test_seeds_that_agree_exactly_at_the_floor_are_no_exact_number(tmp_path):
    # two rows at 0.0 F1 on every seed: an sd of 0 because F1 cannot go lower, not because the rows
    # have no noise; the link between them is a tie at the floor, left out as for any spread
    write_separated_ner(tmp_path, {"default": 25.0, "control": 5.0, "sep-l1-3": 12.0, "sep-l1-6": 3.0,
                                   "sep-emb": 8.0})
    for row in ("sep-emb+l1-3", "sep-emb+l1-6"):
        write_cell(tmp_path, row, "ner", [0.0, 0.0, 0.0], lang="fake", en=70.0)
    more = finding(table1.build(str(tmp_path), ["fake"]), "Fake-English: More separation hurts more")
    assert more.verdict == HOLDS
    assert "left out: ner sep-emb+l1-3 vs sep-emb+l1-6 (both under 5 over the best trivial baseline: +0.0, +0.0)" in more.detail
    # the rule itself: SE 0 from seeds decides a margin off the threshold and leaves one on it undecided;
    # numbers without noise (the paper's) are compared as they are
    assert judge(Estimate(0.5, 0.0)) is True and judge(Estimate(-0.5, 0.0)) is False
    assert judge(Estimate(0.0, 0.0)) is None and judge(Estimate(0.0, 0.0), strict=False) is None
    assert judge(Estimate(0.0, exact=True), strict=False) is True and judge(Estimate(0.0, exact=True)) is False


def test_a_figure_judged_against_a_threshold_is_never_printed_as_the_threshold():
    from xlt.report.table1_scores import figure, usable_tasks

    assert figure(4.96, 5) == "+4.96" and figure(4.94, 5) == "+4.9" and figure(5.0, 5) == "+5.0"
    assert figure(49.6, 50, 0, "") == "49.6" and figure(62.4, 50, 0, "") == "62"
    with pytest.raises(Inconclusive, match=r"less than 5 points above chance \(ner \+4\.96\)"):
        usable_tasks({"ner": 4.96}, "chance")


def test_a_margin_and_its_noise_are_never_printed_alike_on_opposite_sides():
    # 5.04 against 2 SE 4.96 holds, 4.96 against 5.04 does not: "+5.0, 2 SE 5.0" would read the same
    decided, undecided = Estimate(5.04, 2.48), Estimate(4.96, 2.52)
    assert judge(decided) is True and judge(undecided) is None
    assert decided.beside() == "+5.04, 2 SE 4.96" and undecided.beside() == "+4.96, 2 SE 5.04"
    assert Estimate(3.0, 1.0).beside() == "+3.0, 2 SE 2.0"            # one decimal where it tells them apart
    # against a threshold: No anchors' -0.52 gap is 2.48 above -3, its 2 SE 2.52
    assert Estimate(-0.52, 1.26).after("ner ", threshold=-3.0) == "ner -0.52 (2 SE 2.52)"
    assert Estimate(1.0, exact=True).after("ner ") == "ner +1.0"
