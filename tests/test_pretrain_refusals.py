"""xlt pretrain's refusals: other settings in a run's folder, a run cut back or asked for a passed
snapshot, a folder that is not a run's, impossible sharing, bad inputs; each one error line, the
folder left as it was."""

from __future__ import annotations

import json

import pytest
from conftest import assert_one_line_error, run_xlt
from pretrain_fixtures import build_inputs, tiny_args


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return build_inputs(tmp_path_factory.mktemp("pretrain-inputs"))


def test_other_settings_in_the_same_run_dir_are_refused(inputs, tmp_path):
    run = tmp_path / "run"
    run_xlt("pretrain", "--run-dir", run, *inputs["args"], *tiny_args(3), check=True)
    res = run_xlt("pretrain", "--run-dir", run, *inputs["args"], *tiny_args(3, lr="5e-4"))
    assert_one_line_error(res, "other settings", "lr")


def test_a_run_is_never_cut_back_nor_asked_for_a_snapshot_it_has_passed(inputs, tmp_path):
    run = tmp_path / "run"
    run_xlt("pretrain", "--run-dir", run, *inputs["args"], *tiny_args(6), check=True)
    before = (run / "config.json").read_bytes()
    # fewer steps than the run has: its description said max_steps 4 beside a checkpoint at step 6
    assert_one_line_error(run_xlt("pretrain", "--run-dir", run, *inputs["args"], *tiny_args(4)),
                          "the run is at step 6, past --max-steps 4")
    # a snapshot of a passed step: the run went on without it, and its description listed it
    assert_one_line_error(run_xlt("pretrain", "--run-dir", run, *inputs["args"], *tiny_args(6, snapshot_at="4")),
                          "--snapshot-at 4: the run is at step 6 and has no such snapshot")
    # other dev batches: best.pt's perplexity and the new evaluations' would not be comparable
    assert_one_line_error(run_xlt("pretrain", "--run-dir", run, *inputs["args"], *tiny_args(8, eval_batches="1")),
                          "other settings (eval_batches: None -> 1)")
    assert (run / "config.json").read_bytes() == before and not (run / "checkpoints" / "step-4.pt").exists()
    # a series of snapshots is not refused for its passed steps, but they are named (tracking starts later)
    res = run_xlt("pretrain", "--run-dir", run, *inputs["args"], *tiny_args(8, snapshot_every="2"), check=True)
    assert "note: --snapshot-every 2: steps 2, 4, 6 passed before this start and have no snapshot" in res.stderr
    assert (run / "checkpoints" / "step-8.pt").exists()


def test_windows_longer_than_the_models_positions_are_refused_before_anything_is_written(inputs, tmp_path):
    for dry in ([], ["--dry-run"]):
        res = run_xlt("pretrain", "--run-dir", tmp_path / "run", *inputs["args"], *tiny_args(2), "--stream-len", "600",
                      *dry)
        assert_one_line_error(res, "--stream-len 600 is longer than the tiny model's 512 positions")
        assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("config", [{"config": {"format": "xlt-finetune/1", "task": "ner", "model": "m"}},
                                    {"model_type": "bert"}])
def test_a_folder_that_holds_something_else_is_refused_and_left_as_it_was(config, inputs, tmp_path):
    # a fine-tuning run's folder, a transformers model's: starting over overwrote their config.json
    # and emptied their metrics
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text(json.dumps(config))
    (other / "metrics.jsonl").write_text('{"epoch": 1}\n')
    res = run_xlt("pretrain", "--run-dir", other, *inputs["args"], *tiny_args(2))
    assert_one_line_error(res, f"{other / 'config.json'}: not a pretraining run's description")
    assert sorted(p.name for p in other.iterdir()) == ["config.json", "metrics.jsonl"]
    assert json.loads((other / "config.json").read_text()) == config


def test_a_folder_of_other_files_is_refused_and_what_a_killed_start_left_is_not(inputs, tmp_path):
    # files a run does not write, and no config.json: someone's folder, not a run's
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine\n")
    (other / "metrics.jsonl").write_text("keep\n")   # a run writes metrics only after its config.json
    assert_one_line_error(run_xlt("pretrain", "--run-dir", other, *inputs["args"], *tiny_args(2)),
                          f"{other}: not a pretraining run, and not empty (metrics.jsonl, notes.txt)")
    assert sorted(p.name for p in other.iterdir()) == ["metrics.jsonl", "notes.txt"]
    # a start killed before its description: the copies and the lock, which the next start takes over
    killed = tmp_path / "killed"
    (killed / "checkpoints").mkdir(parents=True)
    for name in ("vocab", "text.json", "codes.en", ".lock"):
        (killed / name).write_text("half\n")
    res = run_xlt("pretrain", "--run-dir", killed, *inputs["args"], *tiny_args(2))
    assert res.returncode == 0, res.stderr
    assert (killed / "config.json").exists() and (killed / "checkpoints" / "last.pt").exists()


def test_a_layer_range_that_leaves_no_shared_top_is_refused(inputs, tmp_path):
    res = run_xlt("pretrain", "--run-dir", tmp_path / "run", *inputs["args"], *tiny_args(2),
                  "--separate-layers", "1", "2")
    assert_one_line_error(res, "xlt pretrain: error:", "top one stays shared")


def test_bad_inputs_give_one_line_errors(inputs, tmp_path):
    root = inputs["root"]
    base = ["pretrain", "--run-dir", tmp_path / "r", *tiny_args(2)]
    stores = inputs["args"][2:]
    res = run_xlt(*base, "--vocab", root / "vocab", "--train", "en", root / "missing", "--dev", "en", root / "en.dev")
    assert_one_line_error(res, "missing")
    res = run_xlt(*base, "--vocab", root / "vocab", "--train", "en", root / "en.train", "--train", "fr",
                  root / "fr.train", "--dev", "en", root / "en.dev")
    assert_one_line_error(res, "'fr' has no dev set")
    other = tmp_path / "other.vocab"
    other.write_text("x 1\ny 1\n")
    res = run_xlt(*base, "--vocab", other, *stores)
    assert_one_line_error(res, "does not match")
    res = run_xlt(*base, *inputs["args"], "--preset", "enormous")
    assert_one_line_error(res, "enormous")
    assert not (tmp_path / "r" / "checkpoints" / "last.pt").exists()
