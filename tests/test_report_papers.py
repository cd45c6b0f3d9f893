"""xlt report: Figure 7, Liu et al.'s Tables 2 and 4, the alignment report, every command's CLI, rendering."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import assert_one_line_error, run_xlt
from report_files import LANGS, cell, one_point, run_record, write_cka, write_results, write_translation
from xlt.report import figure7, liu
from xlt.report.findings import FAILS, HOLDS, INCONCLUSIVE
from xlt.report.render import latex_escape
from xlt.utils.errors import XltError


# ---- Figure 7 ---------------------------------------------------------------------------------------
def test_figure7_table_gaps_findings_and_plot(tmp_path):
    for lang, base, step in (("fr", 0.7, 0.1), ("ru", 0.6, 0.15)):   # the ru gap is the larger one
        for column, shift in (("Bilingual", 0.0), ("Monolingual", -step), ("Random", -2 * step)):
            write_cka(tmp_path / f"en-{lang}.{column}.json", f"en-{lang}", column, [base + shift] * 9)
    write_cka(tmp_path / "en-zh.bi.json", "en-zh", "Bilingual", [0.3] * 9)
    write_cka(tmp_path / "en-zh.mono.json", "en-zh", "Monolingual", [0.4] * 9)   # out of order
    t, plot = figure7.build(str(tmp_path), LANGS)
    plot(str(tmp_path / "out"))
    assert (tmp_path / "out" / "figure7.png").read_bytes()[:4] == b"\x89PNG"
    assert cell(t, "L0", "en-fr", "Bilingual").value == pytest.approx(0.7) and cell(t, "L0", "en-fr", "Bilingual").paper == 0.61
    assert cell(t, "AVER", "en-ru", "Random").paper == 0.41
    assert "en-zh Random" in cell(t, "L3", "en-zh", "Random").gap
    order, gap = t.findings
    assert order.verdict == INCONCLUSIVE and "en-zh Random" in order.detail and order.paper_verdict == HOLDS
    assert gap.verdict == FAILS and "fr +0.10, ru +0.15, zh -0.10" in gap.detail and gap.paper_verdict == HOLDS


def test_figure7_compares_one_measure_over_the_same_layers(tmp_path):
    # a column over other layers, or of another estimator, made AVER compare different means: the
    # order read "does not hold" where every shared layer held it
    write_cka(tmp_path / "bi.json", "en-fr", "Bilingual", [0.5, 0.45, 0.4])
    write_cka(tmp_path / "mono.json", "en-fr", "Monolingual", [0.9, 0.8, 0.7, 0.35, 0.3, 0.25, 0.2])
    with pytest.raises(XltError, match=r"layers \[0, 1, 2, 3, 4, 5, 6\] differ from .*: one table compares") as err:
        figure7.build(str(tmp_path), ["fr"])
    assert err.value.path.endswith(("bi.json", "mono.json"))
    write_cka(tmp_path / "mono.json", "en-fr", "Monolingual", [0.35, 0.3, 0.25])
    t, _ = figure7.build(str(tmp_path), ["fr"])
    assert t.remarks[0].startswith("Linear CKA of sentences pooled by mean over subwords, specials excluded")
    debiased = json.loads((tmp_path / "mono.json").read_text())
    (tmp_path / "mono.json").write_text(json.dumps({**debiased, "estimator": "debiased"}))
    with pytest.raises(XltError, match="estimator debiased differs from"):
        figure7.build(str(tmp_path), ["fr"])


# ---- Liu et al. ------------------------------------------------------------------------------------
def test_liu_table2_uses_relative_depth_and_checks_the_convert_rate(tmp_path):
    write_translation(tmp_path / "en-fr" / "en-fr.translate.json", "en", "fr", {1.0: 0.2, 2.0: 0.5, 3.0: 0.9})
    write_translation(tmp_path / "en-fr" / "fr-en.translate.json", "fr", "en", {1.0: 0.3, 2.0: 0.2, 3.0: 0.4})
    t = liu.build_table2(str(tmp_path), languages=["fr"])
    bleu_row = next(label for label, _ in t.rows if label.startswith("BLEU-1"))
    assert "layer=7" in bleu_row
    assert cell(t, bleu_row, "", "en→fr").value == pytest.approx(73.0) and cell(t, bleu_row, "", "en→fr").paper == 12.18
    cr3 = next(label for label, _ in t.rows if "α=3" in label and "convert" in label)
    assert cell(t, cr3, "", "fr→en").value == pytest.approx(0.4) and cell(t, cr3, "", "fr→en").paper == 0.731
    rising, most = t.findings
    assert rising.verdict == FAILS and "fr-en" in rising.detail and rising.paper_verdict == HOLDS
    assert most.verdict == FAILS and most.paper_verdict == HOLDS


def test_liu_table2_reads_every_direction_at_the_same_layers(tmp_path):
    # fr->en swept over layers 1-4 only: its cells were read at 3 and 2 under the label "layer=7"
    write_translation(tmp_path / "en-fr.translate.json", "en", "fr", {1.0: 0.2, 2.0: 0.5, 3.0: 0.9})
    short = json.loads((tmp_path / "en-fr.translate.json").read_text())
    short.update(src="fr", tgt="en", grid=[r for r in short["grid"] if r["layer"] <= 4])
    (tmp_path / "fr-en.translate.json").write_text(json.dumps(short))
    t = liu.build_table2(str(tmp_path), languages=["fr"])
    bleu_row = next(label for label, _ in t.rows if label.startswith("BLEU-1"))
    assert "layer=7" in bleu_row and cell(t, bleu_row, "", "en→fr").value == pytest.approx(73.0)
    assert cell(t, bleu_row, "", "fr→en").value is None and "no result at this layer" in cell(t, bleu_row, "", "fr→en").gap
    rising = t.findings[0]
    assert "not swept at this layer: fr-en" in rising.detail


def test_liu_table4_rows_from_plain_and_shift_variants(tmp_path):
    m = "accuracy"
    point = {"batch_size": 32, "encoder_lr": 1e-4, "head_lr": 1e-3}
    write_results(tmp_path / "table1" / "default" / "en-fr" / "xnli" / "results.json", "xnli", "fr",
                  one_point("xnli", "fr", 50.0, en=70.0))
    plain = {"en": {"dev": {m: 72.0}, "test": {m: 72.0}}, "fr": {"dev": {m: 52.0}, "test": {m: 53.0}}}
    runs = [run_record(point, 12, 72.0, plain, shift={"fr": 1.5})]
    runs[0]["results"]["shift"] = {"fr": {"dev": {m: 54.0}, "test": {m: 55.0}}}
    write_results(tmp_path / "liu" / "en-fr" / "xnli-mds" / "results.json", "xnli", "fr", runs)
    t = liu.build_table4(str(tmp_path / "liu"), str(tmp_path / "table1"), ["fr", "ru"])
    labels = [label for label, _ in t.rows]
    assert labels[1] == "fine-tune above layer 4 (bottom frozen)" and labels[2].endswith("MDS after layer 4")
    assert cell(t, labels[0], "XNLI test accuracy", "fr").value == 50.0
    assert cell(t, labels[1], "XNLI test accuracy", "fr").value == 53.0
    assert cell(t, labels[2], "XNLI test accuracy", "fr").value == 55.0
    assert cell(t, labels[2], "XNLI test accuracy", "en").gap == "the source language is not shifted"
    assert cell(t, labels[1], "XNLI test accuracy", "en").value == 72.0
    assert cell(t, labels[3], "XNLI test accuracy", "fr").value == 1.5
    assert cell(t, labels[3], "XNLI test accuracy", "fr").paper == 0.7
    assert cell(t, labels[1], "XNLI test accuracy", "ru").gap.startswith("not run yet")
    avg = cell(t, labels[2], "XNLI test accuracy", "avg w/o en")
    assert avg.value == 55.0 and avg.paper == 72.42      # the paper's over the same language (fr)
    # one seed a row: no noise to judge a 2-point gain against
    assert [f.verdict for f in t.findings] == [INCONCLUSIVE, INCONCLUSIVE]
    assert "no noise estimate: one fine-tuning seed for" in t.findings[0].detail
    assert [f.paper_verdict for f in t.findings] == [FAILS, HOLDS]   # the paper's fr numbers, as they are


def write_table4(root: Path, all_: float, top: float, mds: float, spread: float) -> None:
    """Table 4's three rows for en-fr over three seeds ``spread`` apart (mean as given)."""
    m, point = "accuracy", {"batch_size": 32, "encoder_lr": 1e-4, "head_lr": 1e-3}
    write_results(root / "table1" / "default" / "en-fr" / "xnli" / "results.json", "xnli", "fr",
                  one_point("xnli", "fr", all_, en=70.0, spread=spread))
    runs = []
    for seed, d in ((12, -spread), (156, 0.0), (78, spread)):
        plain = {"en": {"dev": {m: 72.0}, "test": {m: 72.0}}, "fr": {"dev": {m: top + d}, "test": {m: top + d}}}
        runs.append(run_record(point, seed, 72.0, plain, shift={"fr": 1.5}))
        runs[-1]["results"]["shift"] = {"fr": {"dev": {m: mds + d}, "test": {m: mds + d}}}
    write_results(root / "liu" / "en-fr" / "xnli-mds" / "results.json", "xnli", "fr", runs)


def test_liu_table4_findings_are_decided_beyond_the_seeds_noise(tmp_path):
    def verdicts(*scores: float, spread: float) -> list[str]:
        write_table4(tmp_path, *scores, spread=spread)
        t = liu.build_table4(str(tmp_path / "liu"), str(tmp_path / "table1"), ["fr"])
        return [f.verdict for f in t.findings], [f.detail for f in t.findings]

    # all 50, top 53, MDS 55, seeds 0.5 apart: 2 SE of a difference = 2 sqrt(2 x 0.25 / 3) = 0.82
    assert verdicts(50.0, 53.0, 55.0, spread=0.5)[0] == [HOLDS, HOLDS]
    # the same means with seeds 4 apart (2 SE 6.5): a tenth of a point either way decides nothing
    found, details = verdicts(50.0, 49.9, 50.0, spread=4.0)
    assert found == [INCONCLUSIVE, INCONCLUSIVE]
    assert "fr +0.10 (2 SE 6.53)" in details[0] and "top - all over fr: -0.10, 2 SE 6.53" in details[1]
    # beyond the noise the other way: both fail
    assert verdicts(50.0, 45.0, 43.0, spread=0.5)[0] == [FAILS, FAILS]


def test_liu_table4_of_one_model_counts_its_targets_as_one_fine_tunings_scores(tmp_path):
    """One model fine-tuned once per row with every target: a seed that does well on fr does well on de
    and es, so a mean over targets is as noisy as one target, not sqrt(3) times less (it read holds)."""
    from xlt.finetune.selection import summarize

    langs, m = ["fr", "de", "es"], "accuracy"
    top = {"fr": 70.0, "de": 60.0, "es": 65.0}

    def write(path, variants):
        runs = [{"grid_point": {"lr": 1}, "seed": seed, "status": "done", "source_dev": 80 + d, "shift_alpha": {},
                 "results": {v: {"en": {"dev": {m: 80 + d}, "test": {m: 80 + d}},
                                 **{l: {"dev": {m: base[l] + d}, "test": {m: base[l] + d}} for l in langs}}
                             for v, base in variants.items()}}
                for seed, d in ((12, -1.5), (156, 0.0), (78, 1.5))]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"format": "xlt-finetune-results/1", "task": "xnli", "source": "en",
                                    "targets": langs, "complete": True, "counts": {"done": 3, "busy": 0, "failed": 0},
                                    "config": {"freeze_bottom": 6, "shift_layer": 6},
                                    "summary": summarize(runs, m, "en", langs), "runs": runs}))

    write(tmp_path / "xnli-mds" / "results.json", {"plain": top, "shift": {l: v + 0.5 for l, v in top.items()}})
    write(tmp_path / "xnli-all" / "results.json", {"plain": {l: v - 2.0 for l, v in top.items()}})
    t = liu.build_table4(str(tmp_path), None, langs)
    # 2 SE of a difference of two means over 3 seeds of sd 1.5: 2 sqrt(2 x 2.25 / 3) = 2.45, as for one target
    assert t.findings[1].verdict == INCONCLUSIVE and "top - all over fr, de, es: +2.00, 2 SE 2.45" in t.findings[1].detail
    assert any("fully correlated" in r for r in t.remarks)


# ---- alignment, CLI and rendering --------------------------------------------------------------------
def test_every_report_command_runs_on_empty_results_and_has_an_example(tmp_path):
    (tmp_path / "empty").mkdir()
    for command in ("table1", "figure7", "alignment", "liu-table2"):
        res = run_xlt("report", command, "--results-dir", tmp_path / "none", "-o", tmp_path / "out")
        assert_one_line_error(res, "--results-dir", "does not exist")  # a typo, not a table of gaps
        res = run_xlt("report", command, "--results-dir", tmp_path / "empty", "--langs", "fr,x y", "-o", tmp_path / "o")
        assert_one_line_error(res, "--langs takes comma-separated language codes", "'x y'")
        res = run_xlt("report", command, "--results-dir", tmp_path / "empty", "--langs", "fr,frr", "-o", tmp_path / "o")
        assert_one_line_error(res, "unknown language 'frr' (accepted: ", " fr ")   # not a column of empty cells
        assert not (tmp_path / "o").exists()
        res = run_xlt("report", command, "--results-dir", tmp_path / "empty", "-o", tmp_path / "out")
        assert res.returncode == 0, res.stderr
        assert "—" in res.stdout and "not run yet" in res.stdout or "no `xlt" in res.stdout
    res = run_xlt("report", "liu-table4", "--results-dir", tmp_path, "--table1-dir", tmp_path, "-o", tmp_path / "out")
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if p.suffix == ".md") == [
        "alignment.md", "figure7.md", "liu-table2.md", "liu-table4.md", "table1.md"]
    for command in ("table1", "figure7", "alignment", "liu-table2", "liu-table4"):
        assert "Example" in run_xlt("report", command, "--help").stdout
    assert_one_line_error(run_xlt("report", "table1", "--results-dir", tmp_path, "--langs", ",", "-o", tmp_path),
                          "--langs needs at least one language")


def test_alignment_report_reads_the_three_levels(tmp_path):
    (tmp_path / "en-fr.word.json").write_text(json.dumps({"space": {"target_words": 2000}, "results": [
        {"layer": "embeddings", "queries": 300, "csls": {"p@1": 0.25}}]}))
    (tmp_path / "en-fr.sentence.json").write_text(json.dumps({"results": [
        {"layer": k, "p_at_1": 0.1 * k} for k in range(9)]}))
    res = run_xlt("report", "alignment", "--results-dir", tmp_path, "--langs", "fr", "-o", tmp_path / "out")
    assert res.returncode == 0, res.stderr
    assert "| L0 | 25.0 | — [1] | 0.0 |" in res.stdout and "| L8 |  | — [1] | 80.0 |" in res.stdout
    assert "**HOLDS**: Independently trained monolingual models align" in res.stdout
    assert (tmp_path / "out" / "alignment.png").exists()


def test_a_damaged_word_file_is_a_named_gap_not_a_blank_cell(tmp_path):
    from xlt.report.alignment import build

    (tmp_path / "en-fr.word.json").write_text(json.dumps({"space": {"target_words": 2000}, "results": [
        {"layer": "embeddings", "queries": 300, "csls": {"p@1": "0.25"}}]}))   # a string where P@1 was
    table, _ = build(str(tmp_path), ["fr"])
    word = table.rows[0][1][0]
    assert word.value is None and word.gap == "no word-level P@1 in the file"


def test_latex_escapes_specials():
    assert latex_escape("a_b & 50% #1 Δ") == r"a\_b \& 50\% \#1 $\Delta$"
