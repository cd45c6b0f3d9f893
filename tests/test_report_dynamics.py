"""`xlt report dynamics`: "emerges at" on synthetic curves (checked against a literal restatement of the
rule), the ordering line, and the report end to end on hand-written tracking records."""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest

from conftest import assert_one_line_error, run_in_process, run_xlt
from xlt.report.dynamics_emergence import AT, FIRST, NEVER, NO_BOUND, UNCONFIRMED, RunDynamics, emergence
from xlt.report.dynamics_records import Curve, EmergenceRule, Point, Run, read_records
from xlt.utils.errors import XltError

STEPS = list(range(0, 5001, 500))   # 0, 500, ..., 5,000: eleven snapshots
RULE = EmergenceRule()


def curve(values, bound=0.2, higher_is_better=True, steps=STEPS, measure="cka", layer=None, lang=None) -> Curve:
    bounds = bound if isinstance(bound, list) else [bound] * len(values)
    return Curve(measure, lang, layer, higher_is_better,
                 [Point(f"step-{s}", s, float(v), b) for s, v, b in zip(steps, values, bounds)])


def rise_at(step: int, low=0.2, high=0.6, steps=STEPS) -> list[float]:
    return [low if s < step else high for s in steps]


# ---- "emerges at" ------------------------------------------------------------------------------------
def test_a_curve_that_rises_at_2000_emerges_at_2000():
    found = emergence(curve(rise_at(2000)), RULE)
    assert (found.status, found.step, found.text()) == (AT, 2000, "2,000")


def test_a_slow_rise_emerges_where_its_margin_passes_a_fifth_of_the_largest_one():
    values = [0.20, 0.21, 0.23, 0.26, 0.31, 0.40, 0.50, 0.60, 0.70, 0.70, 0.70]   # margins up to 0.5: needs > 0.1
    assert emergence(curve(values), RULE).step == 2000   # 0.31 is the first margin above 0.1


def test_a_blip_that_falls_back_is_not_emergence():
    values = rise_at(3000)
    values[STEPS.index(1000)] = 0.6
    assert emergence(curve(values), RULE).step == 3000
    # the same curve with a one-snapshot rule takes the blip: persistence is what rules it out
    assert emergence(curve(values), EmergenceRule(persist=1)).step == 1000


def test_noise_around_the_bound_and_a_curve_below_it_never_emerge():
    noise = [0.2 + (0.002 if i % 3 == 0 else -0.001) for i in range(len(STEPS))]
    assert emergence(curve(noise), RULE).status == NEVER
    assert emergence(curve([0.1] * len(STEPS)), RULE).status == NEVER
    assert emergence(curve([0.1] * len(STEPS)), RULE).text() == "never"


def test_a_curve_already_above_its_bound_at_the_first_snapshot_says_so():
    found = emergence(curve([0.6] * 3, steps=[500, 1000, 1500]), RULE)
    assert (found.status, found.step) == (FIRST, 500)
    assert found.text() == "at the first snapshot (500)"


def test_lower_is_better_emerges_where_it_falls_clearly_below_the_bound():
    ppl = [1300, 1298, 1290, 1250, 900, 600, 450, 400, 360, 340, 335]
    found = emergence(curve(ppl, bound=1300.0, higher_is_better=False, measure="dev_ppl"), RULE)
    assert (found.status, found.step) == (AT, 2000)   # 1,250 is 50 below: under a fifth of 965
    # the same numbers read as higher-is-better never rise above the bound
    assert emergence(curve(ppl, bound=1300.0), RULE).status == NEVER


def test_a_rise_at_the_last_snapshot_only_is_unconfirmed_and_no_bound_is_said():
    found = emergence(curve(rise_at(5000)), RULE)
    assert (found.status, found.step) == (UNCONFIRMED, 5000)
    assert emergence(curve(rise_at(2000), bound=None), RULE).status == NO_BOUND


def test_a_bound_that_varies_between_snapshots_widens_the_margin_needed():
    bounds = [0.2, 0.5] * 5 + [0.2]    # the bound's own spread (0.3) is larger than a fifth of the rise
    values = rise_at(2000, high=0.6)
    values[STEPS.index(4000):] = [0.95] * 3
    found = emergence(curve(values, bound=bounds), RULE)
    assert found.threshold == pytest.approx(0.3)
    assert found.step == 4000


def brute_force(values, bounds, higher, rule):
    """The rule as docs/dynamics.md states it, with nothing shared with the implementation."""
    sign = 1 if higher else -1
    margin = [sign * (v - b) for v, b in zip(values, bounds)]
    need = max(rule.fraction * max(margin), rule.floor * max(map(abs, values + bounds)), max(bounds) - min(bounds))
    if max(margin) <= need:
        return None
    for i in range(len(values) - rule.persist + 1):
        if all(m > need for m in margin[i:i + rule.persist]):
            return STEPS[i]
    return None


def test_emergence_matches_the_rule_restated_on_random_curves():
    rng = random.Random(0)
    for trial in range(400):
        higher = rng.random() < 0.5
        values = [rng.choice([0.2, 0.25, 0.5, 0.9]) + rng.random() * 0.05 for _ in STEPS]
        bounds = [0.3 + (rng.random() * 0.02 if trial % 2 else 0.0) for _ in STEPS]
        rule = EmergenceRule(persist=rng.choice([1, 2, 3]))
        found = emergence(curve(values, bound=bounds, higher_is_better=higher), rule)
        expected = brute_force(values, bounds, higher, rule)
        assert (found.step if found.emerged else None) == expected, (values, bounds, higher, rule)


# ---- ordering ----------------------------------------------------------------------------------------
def test_the_ordering_line_puts_perplexity_alignment_transfer_and_layers_in_order():
    curves = [curve([1300, 1300, 1290, 700, 500, 400, 350, 340, 335, 335, 335], bound=1300.0,
                    higher_is_better=False, measure="dev_ppl", lang="fr"),
              curve(rise_at(3000), layer=1, lang="fr"),
              curve(rise_at(2000), layer=2, lang="fr"),
              curve([0.2] * len(STEPS), layer=3, lang="fr"),
              curve(rise_at(4000, low=10.0, high=40.0), bound=10.0, measure="ner_f1", lang="fr"),
              curve([0.01] * len(STEPS), bound=0.01, measure="word_p1", lang="fr", layer=0)]
    run = Run("runs/default/en-fr", "Default", curves)
    d = RunDynamics(run, [emergence(c, RULE) for c in curves])
    assert d.ordering() == ("first: dev_ppl (fr) at step 1,500, then cka (fr, layer 2) at 2,000, "
                            "then ner_f1 (fr) at 4,000; never: word_p1 (fr)")
    assert d.layers() == ["cka (fr): layer 2 at 2,000, then layer 1 at 3,000; not: layer 3",
                          "word_p1 (fr): no layer emerges"]


def test_the_ordering_line_names_what_holds_at_the_first_snapshot():
    curves = [curve([0.9] * len(STEPS), measure="lang_id", layer=4), curve(rise_at(1000), layer=4)]
    d = RunDynamics(Run("r", "R", curves), [emergence(c, RULE) for c in curves])
    assert d.ordering() == "first: lang_id (layer 4) already at the first snapshot (step 0), then cka (layer 4) at 1,000"


def test_the_ordering_line_tells_never_from_unconfirmed_and_no_bound():
    curves = [curve([0.2] * len(STEPS), measure="word_p1", layer=0), curve(rise_at(5000), measure="sentence_p1", layer=1),
              curve(rise_at(5000), measure="sentence_p1", layer=2), curve(rise_at(1000), measure="lang_id", bound=None)]
    d = RunDynamics(Run("r", "R", curves), [emergence(c, RULE) for c in curves])
    assert d.ordering() == "nothing emerges; never: word_p1; unconfirmed: sentence_p1; no bound: lang_id"


# ---- records ------------------------------------------------------------------------------------------
def record(run="runs/default/en-fr", label="Default", step=0, measure="cka", value=0.2, bound=0.2, lang="fr",
           layer=None, higher=True, **extra) -> dict:
    snapshot = "random" if step is None else f"step-{step}"
    return {"run": run, "label": label, "snapshot": snapshot, "step": step, "measure": measure, "lang": lang,
            "layer": layer, "value": value, "bound": bound, "higher_is_better": higher, "seconds": 0.1, **extra}


def synthetic_records(run="runs/default/en-fr", label="Default", shift=0) -> list[dict]:
    """A tiny tracked run: dev_ppl (en, fr), cka per layer 0..2, ner_f1 (fr), over 0..2,500."""
    steps, out = range(0, 2501, 500), []
    for step in steps:
        for lang, start in (("en", 900.0), ("fr", 1000.0)):
            ppl = start if step < 1000 + shift else 300.0 + 10 * lang.count("f")
            out.append(record(run, label, step, "dev_ppl", ppl, start, lang, higher=False))
        for layer, at in ((0, 2500), (1, 1500), (2, 1000)):
            out.append(record(run, label, step, "cka", 0.61 if step >= at + shift else 0.22, None, "fr", layer))
        out.append(record(run, label, step, "ner_f1", 45.5 if step >= 2000 else 5.0, 5.0, "fr", extra_field=[1]))
    out += [record(run, label, None, "cka", 0.22, None, "fr", layer) for layer in range(3)]
    # the random encoder's own perplexity is far above the unigram one, which is dev_ppl's bound
    out += [record(run, label, None, "dev_ppl", 30000.0, start, lang, higher=False)
            for lang, start in (("en", 900.0), ("fr", 1000.0))]
    return out


def write_records(path: Path, records: list[dict], extra_lines: tuple[str, ...] = ()) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + "".join(line + "\n" for line in extra_lines))
    return path


def test_records_read_the_random_snapshot_as_the_bound_and_tolerate_extra_fields(tmp_path):
    [run] = read_records([str(write_records(tmp_path / "records.jsonl", synthetic_records()))])
    cka = [c for c in run.curves if c.measure == "cka"]
    assert [c.layer for c in cka] == [0, 1, 2] and all(c.random == 0.22 for c in cka)
    assert [c.measure for c in run.curves][:2] == ["dev_ppl", "dev_ppl"] and run.curves[-1].measure == "ner_f1"
    assert [emergence(c, RULE).status for c in cka] == [UNCONFIRMED, AT, AT]   # layer 0 rises at the last snapshot
    assert [emergence(c, RULE).step for c in cka] == [2500, 1500, 1000]


def test_records_without_a_label_take_the_run_dirs_last_two_parts_and_two_runs_one_label_differ(tmp_path):
    records = [dict(record(step=s), label=None) for s in (0, 500)]
    records += [record("other/en-fr", "default/en-fr", step=s) for s in (0, 500)]
    records.append(dict(record("./runs/default/en-fr/", step=1000), label=None))   # the first run, spelt otherwise
    runs = read_records([str(write_records(tmp_path / "r.jsonl", records))])
    assert [run.label for run in runs] == ["default/en-fr (runs/default/en-fr)", "default/en-fr (other/en-fr)"]
    assert [p.step for p in runs[0].curves[0].points] == [0, 500, 1000]


# ---- the command ---------------------------------------------------------------------------------------
def test_report_end_to_end_files_values_and_determinism(tmp_path, capsys):
    records = write_records(tmp_path / "track" / "records.jsonl", synthetic_records())
    res = run_in_process(capsys, "report", "dynamics", "--records", records, "-o", tmp_path / "out")
    assert res.returncode == 0, res.stderr
    assert "first: dev_ppl (en) and dev_ppl (fr) and cka (fr, layer 2) at step 1,000, then ner_f1 (fr) at 2,000" \
        in res.stdout
    assert "cka (fr): layer 2 at 1,000, then layer 1 at 1,500; not: layer 0" in res.stdout
    out = tmp_path / "out"
    names = sorted(p.name for p in out.iterdir())
    assert names == ["dynamics-cka-fr.png", "dynamics-dev_ppl-en.png", "dynamics-dev_ppl-fr.png",
                     "dynamics-emergence.csv", "dynamics-ner_f1-fr.png", "dynamics.csv", "dynamics.json",
                     "dynamics.md"]
    for png in out.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "dynamics.md").read_text()
    assert "| 1,000 | 0.220 | 0.220 | **0.610** |" in md and "| bound | 0.220 | 0.220 | 0.220 |" in md
    assert "| 2,000 | **45.50** |" in md and "![dynamics-cka-fr](dynamics-cka-fr.png)" in md
    rows = list(csv.DictReader((out / "dynamics.csv").open()))
    assert {"label": "Default", "measure": "ner_f1", "lang": "fr", "step": "2000", "value": "45.5", "bound": "5.0"}.items() \
        <= next(r for r in rows if r["measure"] == "ner_f1" and r["step"] == "2000").items()
    assert len(rows) == 6 * 6 + 5   # six values per snapshot, and the random encoder's five records
    emerged = {(r["measure"], r["lang"], r["layer"]): (r["status"], r["step"])
               for r in csv.DictReader((out / "dynamics-emergence.csv").open())}
    assert emerged[("cka", "fr", "0")] == (UNCONFIRMED, "2500") and emerged[("dev_ppl", "en", "")] == (AT, "1000")
    data = json.loads((out / "dynamics.json").read_text())
    assert data["format"] == "xlt-dynamics-report/1" and data["runs"][0]["label"] == "Default"
    ner = next(c for c in data["runs"][0]["curves"] if c["measure"] == "ner_f1")
    assert [p["value"] for p in ner["points"]] == [5.0] * 4 + [45.5] * 2 and ner["emerges"]["step"] == 2000
    # the same records again: the same bytes, every file
    again = run_in_process(capsys, "report", "dynamics", "--records", records, "-o", tmp_path / "again")
    assert again.returncode == 0 and again.stdout == res.stdout
    for name in names:
        assert (tmp_path / "again" / name).read_bytes() == (out / name).read_bytes(), name


def test_two_runs_are_overlaid_in_one_figure_each_and_duplicates_keep_the_last(tmp_path, capsys):
    default = write_records(tmp_path / "a.jsonl", synthetic_records())
    late = synthetic_records("runs/sep-emb+l1-6/en-fr", "Sep Emb + L1-6", shift=500)
    late.append(record("runs/sep-emb+l1-6/en-fr", "Sep Emb + L1-6", 2500, "ner_f1", 5.0, 5.0))   # re-evaluated
    separated = write_records(tmp_path / "b.jsonl", late)
    res = run_in_process(capsys, "report", "dynamics", "--records", default, "--records", separated,
                         "-o", tmp_path / "out")
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("repeat an earlier one's run, snapshot, measure, lang and layer") == 1
    assert "1 record(s)" in res.stderr and f"{separated}:" in res.stderr
    data = json.loads((tmp_path / "out" / "dynamics.json").read_text())
    assert [r["label"] for r in data["runs"]] == ["Default", "Sep Emb + L1-6"]
    sep = data["runs"][1]
    # shifted by 500 steps; its NER re-evaluated at 2,500 (5.0, the last record) so its rise is a blip
    assert sep["ordering"] == ("first: dev_ppl (en) and dev_ppl (fr) and cka (fr, layer 2) at step 1,500; "
                               "never: ner_f1 (fr)")
    assert sep["layers"] == ["cka (fr): layer 2 at 1,500, then layer 1 at 2,000; not: layer 0"]
    ner = next(c for c in sep["curves"] if c["measure"] == "ner_f1")
    assert ner["points"][-1]["value"] == 5.0 and ner["emerges"]["status"] == NEVER
    assert len(list((tmp_path / "out").glob("*.png"))) == 4    # one per measure and language, not per run
    assert res.stdout.index("## Default") < res.stdout.index("## Sep Emb + L1-6")


def test_an_unfinished_last_line_is_left_out_while_a_cut_line_before_it_is_an_error(tmp_path, capsys):
    records = write_records(tmp_path / "r.jsonl", synthetic_records())
    with records.open("a") as f:
        f.write('{"run": "runs/default/en-fr", "snapshot": "step-3000", "st')   # xlt track appending right now
    res = run_in_process(capsys, "report", "dynamics", "--records", records, "-o", tmp_path / "out")
    assert res.returncode == 0, res.stderr
    assert f"{records}:42: an unfinished last line (being written?) is left out" in res.stderr
    with records.open("a") as f:
        f.write('\n' + json.dumps(record(step=3000)))   # the cut line now has its newline: broken input
    assert_one_line_error(run_in_process(capsys, "report", "dynamics", "--records", records, "-o", tmp_path / "x"),
                          f"{records}:42: not a JSON line")


def test_records_from_stdin_and_a_new_label_for_a_tracked_run(tmp_path):
    records = [record(step=s, value=0.2 if s < 1000 else 0.6) for s in STEPS[:5]]
    records[-1]["label"] = "Default (relabelled)"
    res = run_xlt("report", "dynamics", "--records", "-", "-o", tmp_path / "out",
                  input="".join(json.dumps(r) + "\n" for r in records))
    assert res.returncode == 0, res.stderr
    assert "## Default (relabelled)" in res.stdout and "| cka | fr |  | 0.200 | 1,000 |" in res.stdout
    assert sorted(p.name for p in (tmp_path / "out").glob("*.png")) == ["dynamics-cka-fr.png"]


@pytest.mark.parametrize("lines, fragment", [
    (['{"run": "r", "snapshot": "step-0"'], "b.jsonl:2: not a JSON line"),
    (['[1, 2]'], "b.jsonl:2: not a tracking record"),
    (['{"run": "r", "snapshot": "step-0", "step": 0, "measure": "cka", "value": 0.3}'],
     "b.jsonl:2: not a tracking record: no 'higher_is_better' field"),
    ([json.dumps(record(step=0, value="high"))], "b.jsonl:2: not a tracking record: 'value' is 'high'"),
    ([json.dumps(dict(record(step=0), snapshot="step-0", step=None))], "b.jsonl:2: not a tracking record: snapshot"),
])
def test_malformed_records_are_one_error_line_naming_file_and_line(tmp_path, capsys, lines, fragment):
    good = write_records(tmp_path / "a.jsonl", synthetic_records())
    bad = write_records(tmp_path / "b.jsonl", [record(step=0)], tuple(lines))
    res = run_in_process(capsys, "report", "dynamics", "--records", good, "--records", bad, "-o", tmp_path / "out")
    assert_one_line_error(res, fragment)
    assert not (tmp_path / "out").exists()


def test_missing_file_empty_records_and_a_bad_rule_are_one_error_line(tmp_path, capsys):
    res = run_in_process(capsys, "report", "dynamics", "--records", tmp_path / "none.jsonl", "-o", tmp_path / "out")
    assert_one_line_error(res, "none.jsonl: no such records file")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    assert_one_line_error(run_in_process(capsys, "report", "dynamics", "--records", empty, "-o", tmp_path / "out"),
                          "no tracking records in")
    good = write_records(tmp_path / "a.jsonl", synthetic_records())
    assert_one_line_error(run_in_process(capsys, "report", "dynamics", "--records", good, "--persist", "0",
                                         "-o", tmp_path / "out"), "--persist must be at least 1")
    flipped = write_records(tmp_path / "c.jsonl", [record(step=0), record(step=500, higher=False)])
    assert_one_line_error(run_in_process(capsys, "report", "dynamics", "--records", flipped, "-o", tmp_path / "out"),
                          "c.jsonl:2: cka of runs/default/en-fr is higher_is_better True")
    assert not (tmp_path / "out").exists()


def test_read_records_raises_xlt_error_for_two_snapshots_at_one_step(tmp_path):
    path = write_records(tmp_path / "r.jsonl", [record(step=500), dict(record(step=500), snapshot="checkpoint-500")])
    with pytest.raises(XltError, match="both claim step 500"):
        read_records([str(path)])


# ---- on a real tiny run ----------------------------------------------------------------------------------
@pytest.mark.usefixtures("one_torch_thread")
def test_report_on_records_xlt_track_wrote_for_a_real_tiny_run(tiny_run, tmp_path, capsys):
    """xlt track on a tiny pretrained run (its best and last checkpoints standing in for two snapshots), then
    the report on what it wrote: every value reaches the tables, and each curve gets its verdict."""
    import shutil

    import synthetic

    run = tmp_path / "models" / "default" / "en-fr"
    shutil.copytree(tiny_run, run)
    for name, step in (("best", 5), ("last", 10)):
        shutil.copy(run / "checkpoints" / f"{name}.pt", run / "checkpoints" / f"step-{step}.pt")
    en, fr = synthetic.write_corpus(tmp_path, n=40, seed=5)
    tracked = run_in_process(capsys, "-q", "track", "--run", run, "--label", "Default", "-o", tmp_path / "track",
                             "--device", "cpu", "--parallel", en, fr, "--measures", "dev_ppl", "--measures", "cka")
    assert tracked.returncode == 0, tracked.stderr
    records_file = tmp_path / "track" / "records.jsonl"
    res = run_in_process(capsys, "report", "dynamics", "--records", records_file, "-o", tmp_path / "out")
    assert res.returncode == 0, res.stderr
    written = [json.loads(line) for line in records_file.read_text().splitlines()]
    data = json.loads((tmp_path / "out" / "dynamics.json").read_text())
    [run_data] = data["runs"]
    assert run_data["label"] == "Default"
    reported = {(c["measure"], c["lang"], c["layer"], p["step"]): p["value"]
                for c in run_data["curves"] for p in c["points"]}
    expected = {(r["measure"], r["lang"], r["layer"], r["step"]): r["value"]
                for r in written if r["snapshot"] != "random" and r["value"] is not None}
    assert reported == expected and {step for *_, step in expected} == {5, 10}
    assert {c["measure"] for c in run_data["curves"]} == {"dev_ppl", "cka"}
    assert all(c["emerges"]["status"] in (AT, FIRST, NEVER, UNCONFIRMED, NO_BOUND) for c in run_data["curves"])
    assert all(c["points"][0]["bound"] is not None for c in run_data["curves"])   # the random encoder's bounds
    for png in ("dynamics-cka-fr.png", "dynamics-dev_ppl-en.png", "dynamics-dev_ppl-fr.png"):
        assert (tmp_path / "out" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "## Default" in res.stdout and "- Order: " in res.stdout
