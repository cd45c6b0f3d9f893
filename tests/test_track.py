"""``xlt track``: records per snapshot and measure, idempotent, lock-safe, bounds once, dev perplexity
as pretraining computes it, missing data skipped, bad input one error line.

The tiny run is pretrained with ``--snapshot-every 5``; a snapshot at another step is a copy of its
``last.pt`` under that name (a full checkpoint holds every key a weight-only snapshot has). The data
are the synthetic grammar's (tests/synthetic.py).
"""

from __future__ import annotations

import json
import multiprocessing
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import synthetic
from conftest import assert_one_line_error, run_in_process, run_xlt
from finetune_hf_data import write_ner
from pretrain_fixtures import build_inputs, tiny_args

pytestmark = pytest.mark.usefixtures("one_torch_thread")

FIELDS = {"run", "label", "snapshot", "step", "measure", "lang", "layer", "value", "bound", "higher_is_better",
          "seconds", "run_id"}
LAYERS = [0, 1, 2]  # the tiny preset: embeddings and 2 layers
# (measure, lang, layer) of one snapshot with parallel sentences, a dictionary and Tatoeba
EXPECTED = {("dev_ppl", "en", None), ("dev_ppl", "fr", None)} | {
    (m, "fr", layer) for m in ("cka", "word_p1", "word_mrr", "sentence_p1", "lang_id") for layer in LAYERS}
RUN_STEPS = 10


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict:
    """A tiny run pretrained for 10 steps (dev perplexity evaluated at 5 and 10) and the data files."""
    root = tmp_path_factory.mktemp("track")
    inputs = build_inputs(root / "inputs")
    run = root / "run"
    run_xlt("pretrain", "--run-dir", run, *inputs["args"], *tiny_args(RUN_STEPS, snapshot_every="5"), check=True)
    data = root / "data"
    (data / "tatoeba").mkdir(parents=True)
    en, fr = synthetic.write_corpus(data, n=60, seed=5)
    tat_en, tat_fr = synthetic.write_corpus(data / "tatoeba", n=30, seed=7)
    dictionary = synthetic.write_dictionary(data / "dict.txt")
    ner = data / "tasks"
    for lang in ("en", "fr"):
        (ner / "ner" / "wikiann" / lang).mkdir(parents=True)
        for split, n, seed in (("train", 40, 1), ("dev", 12, 2), ("test", 12, 3)):
            write_ner(ner / "ner" / "wikiann" / lang / split, lang, n, seed)
    return {"root": root, "run": run, "parallel": [str(en), str(fr)], "tatoeba": [str(tat_en), str(tat_fr)],
            "dictionary": str(dictionary), "ner": str(ner)}


def fresh_run(world: dict, tmp_path: Path, steps: tuple[int, ...]) -> Path:
    """A copy of the tiny run with the snapshots of ``steps`` only (its own at 5 and 10, else copies)."""
    run = tmp_path / "models" / "default" / "en-fr"
    shutil.copytree(world["run"], run)
    for snapshot in (run / "checkpoints").glob("step-*.pt"):
        snapshot.unlink()
    for step in steps:
        add_snapshot(run, step, world["run"])
    return run


def add_snapshot(run: Path, step: int, original: Path | None = None) -> None:
    own = None if original is None else original / "checkpoints" / f"step-{step}.pt"
    source = own if own is not None and own.exists() else run / "checkpoints" / "last.pt"
    shutil.copy(source, run / "checkpoints" / f"step-{step}.pt")


def data_args(world: dict) -> list[str]:
    return ["--parallel", *world["parallel"], "--dictionary", world["dictionary"], "--tatoeba", *world["tatoeba"]]


def records(track_dir: Path) -> list[dict]:
    path = track_dir / "records.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def track(capsys, run: Path, out: Path, *extra: str):
    res = run_in_process(capsys, "track", "--run", run, "-o", out, "--device", "cpu", *extra)
    assert res.returncode == 0, res.stderr
    return res


def test_records_per_snapshot_and_measure_then_only_new_ones(world, tmp_path, capsys):
    run, out = fresh_run(world, tmp_path, (3, 10)), tmp_path / "track"
    track(capsys, run, out, *data_args(world))
    first = records(out)
    assert all(set(r) == FIELDS for r in first)
    by_snapshot = {}
    for r in first:
        by_snapshot.setdefault((r["snapshot"], r["step"]), []).append((r["measure"], r["lang"], r["layer"]))
    assert set(by_snapshot) == {("random", None), ("step-3", 3), ("step-10", 10)}
    for keys in by_snapshot.values():
        assert sorted(keys, key=str) == sorted(EXPECTED, key=str)  # each once
    assert {r["label"] for r in first} == {"default/en-fr"} and {r["run"] for r in first} == {str(run)}
    random = {(r["measure"], r["lang"], r["layer"]): r["value"] for r in first if r["snapshot"] == "random"}
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    unigram = next(m for m in metrics if "valid_en_unigram_ppl" in m)
    for r in first:
        assert r["higher_is_better"] is (r["measure"] not in ("dev_ppl", "lang_id"))
        assert r["seconds"] >= 0 and np.isfinite(r["value"])
        if r["measure"] == "dev_ppl":  # the unigram floor, as pretraining logs it
            assert r["bound"] == pytest.approx(unigram[f"valid_{r['lang']}_unigram_ppl"], rel=1e-4)
        elif r["snapshot"] != "random":
            assert r["bound"] == random[r["measure"], r["lang"], r["layer"]]
        else:
            assert r["bound"] is None
        if r["measure"] in ("cka", "word_p1", "word_mrr", "sentence_p1", "lang_id"):
            assert 0.0 <= r["value"] <= 1.0 + 1e-9

    track(capsys, run, out, *data_args(world))  # nothing new: nothing appended, no model loaded
    assert records(out) == first
    add_snapshot(run, 20)
    res = track(capsys, run, out, *data_args(world))
    added = records(out)[len(first):]
    assert {(r["snapshot"], r["step"]) for r in added} == {("step-20", 20)}
    assert sorted(((r["measure"], r["lang"], r["layer"]) for r in added), key=str) == sorted(EXPECTED, key=str)
    assert "3 snapshot(s), 1 with measures to compute" in res.stderr


def test_records_of_another_run_at_the_same_path_are_refused(world, tmp_path, capsys):
    # a run pretrained again at a path (other settings): its snapshots were taken as tracked by name
    from xlt.pretrain.run_files import run_identity

    run, out = fresh_run(world, tmp_path, (5,)), tmp_path / "track"
    track(capsys, run, out, "--measures", "cka", "--parallel", *world["parallel"])
    assert {r["run_id"] for r in records(out)} == {run_identity(str(run))}
    described = json.loads((run / "config.json").read_text())
    resumed = {**described, "config": {**described["config"], "max_steps": 99}, "resumes": [{"step": 10}]}
    (run / "config.json").write_text(json.dumps(resumed))   # a resume's changes are the same run
    track(capsys, run, out, "--measures", "cka", "--parallel", *world["parallel"])
    # a description from before a setting existed is the run at that setting's default
    older = {**described, "config": {k: v for k, v in described["config"].items() if k != "langs_per_step"}}
    (run / "config.json").write_text(json.dumps(older))
    assert run_identity(str(run)) == records(out)[0]["run_id"]
    # other inputs under the same settings (stores binarized again from other text): another run
    restored = {**described, "inputs": {**described["inputs"], "vocab_sha256": "0" * 64}}
    (run / "config.json").write_text(json.dumps(restored))
    assert run_identity(str(run)) != records(out)[0]["run_id"]
    (run / "config.json").write_text(json.dumps({**described, "config": {**described["config"], "lr": 3e-3}}))
    before = records(out)
    res = run_in_process(capsys, "track", "--run", run, "-o", out, "--device", "cpu", "--measures", "cka",
                         "--parallel", *world["parallel"])
    assert_one_line_error(res, f"{out / 'records.jsonl'}: its records of {run} are of another run")
    assert records(out) == before


def test_a_measure_asked_for_later_is_added_to_every_snapshot(world, tmp_path, capsys):
    run, out = fresh_run(world, tmp_path, (3, 10)), tmp_path / "track"
    track(capsys, run, out, "--parallel", *world["parallel"], "--measures", "cka")
    assert {r["measure"] for r in records(out)} == {"cka"}
    n = len(records(out))
    track(capsys, run, out, "--parallel", *world["parallel"], "--measures", "cka", "--measures", "lang_id")
    added = records(out)[n:]
    assert {r["measure"] for r in added} == {"lang_id"}
    assert Counter(r["snapshot"] for r in added) == {"random": 3, "step-3": 3, "step-10": 3}


def test_word_retrieval_reads_its_own_corpus_for_contextual_layers(world, tmp_path, capsys):
    run, out = fresh_run(world, tmp_path, (10,)), tmp_path / "track"
    track(capsys, run, out, "--dictionary", world["dictionary"], "--measures", "word_p1")
    assert sorted(r["layer"] for r in records(out) if r["snapshot"] == "step-10") == [0]  # no corpus: the table only
    out = tmp_path / "track2"
    track(capsys, run, out, "--dictionary", world["dictionary"], "--word-corpus", *world["tatoeba"],
          "--word-sentences", "20", "--measures", "word_p1", "--measures", "word_mrr")
    assert Counter((r["snapshot"], r["measure"]) for r in records(out)) == {
        (s, m): len(LAYERS) for s in ("random", "step-10") for m in ("word_p1", "word_mrr")}


def test_dev_ppl_equals_pretrainings_own_evaluation_of_each_snapshot(world, tmp_path, capsys):
    run, out = fresh_run(world, tmp_path, (5, RUN_STEPS)), tmp_path / "track"
    track(capsys, run, out, "--measures", "dev_ppl")
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    randoms = {r["lang"]: r["value"] for r in records(out) if r["snapshot"] == "random"}
    for step in (5, RUN_STEPS):  # pretraining evaluated the dev sets at steps 5 and 10
        logged = next(m for m in metrics if m["step"] == step and "valid_en_mlm_ppl" in m)
        ours = {r["lang"]: r["value"] for r in records(out) if r["snapshot"] == f"step-{step}"}
        assert set(ours) == {"en", "fr"}
        for lang, value in ours.items():  # metrics.jsonl rounds to 4 decimals
            assert value == pytest.approx(logged[f"valid_{lang}_mlm_ppl"], abs=1e-4)
            assert randoms[lang] > value  # a few steps beat a random encoder


def test_text_is_tokenized_once_across_snapshots(world, tmp_path, capsys, monkeypatch):
    from xlt.text.pipeline import TextPipeline

    run, out = fresh_run(world, tmp_path, (3,)), tmp_path / "track"
    track(capsys, run, out, *data_args(world))
    add_snapshot(run, 10)

    def refuse(*args, **kwargs):
        raise AssertionError("text tokenized again: the track cache should answer")

    for method in ("encode_lines", "encode_words", "subwords"):
        monkeypatch.setattr(TextPipeline, method, refuse)
    track(capsys, run, out, *data_args(world))
    assert {r["snapshot"] for r in records(out)} == {"random", "step-3", "step-10"}


def _track_in_child(run: str, out: str, barrier, queue) -> None:
    """A tracker whose CKA takes 1.5 s more, so that both trackers are busy at once."""
    import time

    import torch

    from xlt.track import measures
    from xlt.track.config import TrackConfig
    from xlt.track.tracker import track

    torch.set_num_threads(1)
    real = measures.MEASURE_FUNCTIONS["cka"]

    def slow(t, s):
        time.sleep(1.5)
        return real(t, s)

    measures.MEASURE_FUNCTIONS["cka"] = slow
    cfg = TrackConfig(runs=[run], output=out, parallel=tuple(WORLD_PARALLEL[run]), measures=["cka"], device="cpu")
    barrier.wait()
    summary = track(cfg)
    queue.put([snapshot for _, snapshot in summary.evaluated])


WORLD_PARALLEL: dict[str, list[str]] = {}


def test_two_trackers_at_once_take_one_snapshot_each(world, tmp_path):
    run, out = fresh_run(world, tmp_path, (5, 10)), tmp_path / "track"
    WORLD_PARALLEL[str(run)] = world["parallel"]  # inherited by the forked children
    context = multiprocessing.get_context("fork")
    barrier, queue = context.Barrier(2), context.Queue()
    children = [context.Process(target=_track_in_child, args=(str(run), str(out), barrier, queue)) for _ in range(2)]
    for child in children:
        child.start()
    done = [queue.get(timeout=120) for _ in children]
    for child in children:
        child.join(timeout=60)
        assert child.exitcode == 0
    steps = [sorted(s for s in evaluated if s != "random") for evaluated in done]
    assert sorted(steps) == [["step-10"], ["step-5"]], done  # one snapshot each
    assert sum("random" in evaluated for evaluated in done) == 1  # the bound computed once
    keys = Counter((r["snapshot"], r["measure"], r["lang"], r["layer"]) for r in records(out))
    assert set(keys.values()) == {1} and len(keys) == 3 * len(LAYERS)


def test_ner_f1_source_and_target_with_the_untrained_control_as_bound(world, tmp_path, capsys):
    run, out = fresh_run(world, tmp_path, (10,)), tmp_path / "track"
    track(capsys, run, out, "--ner-data-dir", world["ner"], "--ner-epochs", "1", "--max-sentences", "8")
    rows = {(r["snapshot"], r["lang"]): r for r in records(out)}
    assert set(rows) == {(s, lang) for s in ("random", "step-10") for lang in ("en", "fr")}
    assert {r["measure"] for r in rows.values()} == {"ner_f1"}
    for lang in ("en", "fr"):
        assert rows["step-10", lang]["bound"] == rows["random", lang]["value"]
        assert 0.0 <= rows["step-10", lang]["value"] <= 100.0
    test_file = out / "data" / "ner" / "wikiann" / "fr" / "test"  # prepared once: the first 8 sentences
    assert test_file.read_text().count("\n\n") == 8


def test_ner_waits_for_best_pt_without_holding_up_the_other_measures(world, tmp_path, capsys):
    run, out = fresh_run(world, tmp_path, (10,)), tmp_path / "track"
    best = run / "checkpoints" / "best.pt"
    best.rename(tmp_path / "best.pt")  # a run before its first evaluation: the untrained control has no architecture yet
    args = ("--ner-data-dir", world["ner"], "--ner-epochs", "1", "--max-sentences", "8", "--parallel", *world["parallel"],
            "--measures", "ner_f1", "--measures", "cka")
    res = track(capsys, run, out, *args)
    assert {r["measure"] for r in records(out)} == {"cka"}
    assert "ner_f1: 1 snapshot(s) wait for the random encoder's bound" in res.stderr
    (tmp_path / "best.pt").rename(best)
    track(capsys, run, out, *args)
    ner = [r for r in records(out) if r["measure"] == "ner_f1"]
    assert Counter(r["snapshot"] for r in ner) == {"random": 2, "step-10": 2}


def test_unreadable_dev_stores_leave_dev_ppl_for_later(world, tmp_path, capsys):
    run, out = fresh_run(world, tmp_path, (10,)), tmp_path / "track"
    config = json.loads((run / "config.json").read_text())
    config["config"]["dev"]["en"] = str(tmp_path / "moved" / "en.dev")  # run from elsewhere, or deleted
    (run / "config.json").write_text(json.dumps(config))
    res = track(capsys, run, out, "--parallel", *world["parallel"], "--measures", "dev_ppl", "--measures", "cka")
    assert {r["measure"] for r in records(out)} == {"cka"}
    assert "dev_ppl: later (the run's token stores cannot be read" in res.stderr


def test_a_failing_measure_is_said_and_the_others_go_on(world, tmp_path, capsys):
    run, out = fresh_run(world, tmp_path, (10,)), tmp_path / "track"
    foreign = tmp_path / "foreign.txt"
    foreign.write_text("zebra zèbre\nkettle bouilloire\n")  # no pair the run's vocabulary has
    res = run_in_process(capsys, "track", "--run", run, "-o", out, "--device", "cpu", "--parallel", *world["parallel"],
                         "--dictionary", foreign, "--measures", "cka", "--measures", "word_p1")
    assert res.returncode == 1, res.stderr
    assert "random word_p1: FAILED: " in res.stderr and "1 measure(s) FAILED" in res.stderr
    assert Counter(r["snapshot"] for r in records(out)) == {"random": len(LAYERS), "step-10": len(LAYERS)}
    assert {r["measure"] for r in records(out)} == {"cka"}


def test_a_measure_without_its_data_is_skipped_with_one_message(world, tmp_path, capsys):
    run, out = fresh_run(world, tmp_path, (10,)), tmp_path / "track"
    res = run_in_process(capsys, "track", "--run", run, "--run", run, "-o", out, "--device", "cpu",
                         "--measures", "cka", "--measures", "sentence_p1", "--parallel", *world["parallel"])
    assert res.returncode == 0, res.stderr
    assert res.stderr.count("sentence_p1: skipped") == 1 and "--tatoeba" in res.stderr
    assert {r["measure"] for r in records(out)} == {"cka"}


def test_no_measure_at_all_is_an_error(world, tmp_path, capsys):
    run = fresh_run(world, tmp_path, (10,))
    res = run_in_process(capsys, "track", "--run", run, "-o", tmp_path / "t", "--measures", "cka", "-q")
    assert_one_line_error(res, "no measure to compute")


@pytest.mark.parametrize("make, fragment", [
    (lambda p: p / "absent", "no such run directory"),
    (lambda p: (p / "empty").mkdir() or p / "empty", "not a pretraining run directory (no config.json)"),
    (lambda p: (p / "file").write_text("x") and p / "file", "not a directory"),
])
def test_bad_run_is_one_error_line(tmp_path, capsys, make, fragment):
    res = run_in_process(capsys, "track", "--run", make(tmp_path), "-o", tmp_path / "t")
    assert_one_line_error(res, fragment)
    assert not (tmp_path / "t" / "records.jsonl").exists()


def test_a_bad_data_file_is_one_error_line_before_the_tracking_directory_exists(world, tmp_path, capsys):
    run, out = fresh_run(world, tmp_path, (10,)), tmp_path / "track"
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"a\nb\n\xff\n")
    # without -q: the measures left out for want of data are said only once the inputs passed
    res = run_in_process(capsys, "track", "--run", run, "-o", out, "--device", "cpu",
                         "--parallel", bad, world["parallel"][1])
    assert_one_line_error(res, f"{bad}:3")
    assert not out.exists()


def test_labels_must_match_the_runs(world, tmp_path, capsys):
    run = fresh_run(world, tmp_path, (10,))
    res = run_in_process(capsys, "track", "--run", run, "--run", run, "--label", "A", "-o", tmp_path / "t")
    assert_one_line_error(res, "1 --label for 2 --run")


def test_only_whole_snapshot_files_are_listed(tmp_path):
    from xlt.track.snapshots import list_snapshots

    (tmp_path / "checkpoints").mkdir()
    for name in ("step-500.pt", "step-20.pt", "step-1000.pt.abc123.tmp", "best.pt", "last.pt", "step-07.pt",
                 "step-x.pt"):
        (tmp_path / "checkpoints" / name).write_bytes(b"")
    assert list_snapshots(str(tmp_path)) == [(20, "step-20"), (500, "step-500")]


def test_language_variance_share_against_a_loop():
    from xlt.track.measures import language_variance_share

    rng = np.random.default_rng(0)
    a, b = rng.normal(0, 1, (40, 5)), rng.normal(0.4, 1, (30, 5))
    rows = list(a) + list(b)
    grand = sum(rows) / len(rows)
    total = sum(float((x - grand) @ (x - grand)) for x in rows)
    within = sum(float((x - a.mean(0)) @ (x - a.mean(0))) for x in a) + \
        sum(float((x - b.mean(0)) @ (x - b.mean(0))) for x in b)
    assert language_variance_share(a, b) == pytest.approx(1 - within / total)  # between + within = total
    assert language_variance_share(np.ones((3, 4)), np.zeros((5, 4))) == 1.0
    assert language_variance_share(a, a) == pytest.approx(0.0, abs=1e-12)


def test_records_are_whole_lines_appended(tmp_path):
    from xlt.track.records import Record, append_records, read_records

    path = str(tmp_path / "records.jsonl")
    rows = [Record("r", "R", "step-1", 1, "cka", "fr", layer, 0.5, None, True, 1.0) for layer in range(3)]
    append_records(path, rows)
    with open(path, "a") as f:
        f.write('{"run": "r", "snapshot": "step-2"')  # a line still being written
    assert [r["layer"] for r in read_records(path)] == [0, 1, 2]
    other = str(tmp_path / "other.jsonl")
    append_records(other, [Record("r", "R", "step-1", 1, "dev_ppl", "en", None, float("nan"), 3.0, False, 1.0)])
    assert read_records(other)[0]["value"] is None  # JSON has no NaN


def test_a_setting_given_otherwise_than_the_records_were_made_with_is_refused(world, tmp_path, capsys):
    # records are found by (run, snapshot, measure): a changed setting would measure only new snapshots its way
    run, out = fresh_run(world, tmp_path, (5,)), tmp_path / "track"
    track(capsys, run, out, "--measures", "cka", "--parallel", *world["parallel"], "--max-sentences", "40")
    before = records(out)
    assert_one_line_error(run_in_process(capsys, "track", "--run", run, "-o", out, "--device", "cpu", "--measures",
                                         "cka", "--parallel", *world["parallel"], "--max-sentences", "30"),
                          f"{out / 'settings.json'}: --max-sentences 30: this tracking directory's records were made "
                          "with 40")
    other = tmp_path / "other.fr"
    other.write_text(Path(world["parallel"][1]).read_text().replace("a", "b"))
    assert_one_line_error(run_in_process(capsys, "track", "--run", run, "-o", out, "--device", "cpu", "--measures",
                                         "cka", "--parallel", world["parallel"][0], other, "--max-sentences", "40"),
                          "--parallel: this tracking directory's records were made with files of other content")
    assert records(out) == before
    # the same content elsewhere is the same file; a setting given for the first time is added
    moved = tmp_path / "moved.fr"
    shutil.copy(world["parallel"][1], moved)
    track(capsys, run, out, "--measures", "cka", "--measures", "word_p1", "--parallel", world["parallel"][0], moved,
          "--max-sentences", "40", "--dictionary", world["dictionary"])
    assert {r["measure"] for r in records(out)[len(before):]} == {"word_p1"}
    settings = json.loads((out / "settings.json").read_text())
    assert settings["max_sentences"] == 40 and settings["dictionary"] and settings["tatoeba"] is None
