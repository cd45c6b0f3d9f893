"""The fine-tuning runner beside other processes: a run another process holds is left to it, and a
grid whose unfinished runs are all another process's encodes nothing (cron's overlapping calls).

The real runner in-process on test_finetune_runner.py's tiny en/fr model and toy task.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from finetune_toy import build_toy_world
from test_finetune_runner import config, experiment

from xlt.finetune.runner import EXIT_BUSY, EXIT_OK, Experiment, finetune
from xlt.utils.rundir import exclusive_lock, held_elsewhere

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_toy_world(tmp_path_factory.getbasetemp() / "finetune-world")


def grid_with_a_run_held_elsewhere(world, tmp_path):
    """(a finished copy of the grid to take runs from, the grid's config, its first run's folder, that
    run's lock held as by another process) for two overlapping calls on a two-run grid."""
    done = tmp_path / "done"
    finetune(config(world, done, batch_size=[8, 16]))
    cfg = config(world, tmp_path / "out", batch_size=[8, 16])
    exp = experiment(cfg)
    run_dir = exp.run_dir(exp.plan.grid[0])
    os.makedirs(run_dir)
    lock = exclusive_lock(os.path.join(run_dir, "lock"))
    lock.__enter__()
    return done, cfg, run_dir, lock


def test_a_locked_run_is_left_to_its_owner(world, tmp_path):
    cfg = config(world, tmp_path / "out", batch_size=[8, 16])
    exp = experiment(cfg)
    busy_dir = exp.run_dir(exp.plan.grid[0])
    os.makedirs(busy_dir)
    with exclusive_lock(os.path.join(busy_dir, "lock")):
        outcome = finetune(cfg)
    assert outcome.exit_code == EXIT_BUSY and outcome.counts == {"done": 1, "busy": 1, "failed": 0}
    assert not outcome.results["complete"] and not os.path.exists(os.path.join(busy_dir, "train.json"))
    # the Markdown says so too (it showed a selection from one seed as if the grid were done)
    assert "**Incomplete:** 1 of 2 runs done (1 busy in another process, 0 failed)" in outcome.markdown
    outcome = finetune(cfg)
    assert outcome.exit_code == EXIT_OK and outcome.results["complete"] and "Incomplete" not in outcome.markdown
    assert [r["worked"] for r in outcome.results["runs"]] == [True, False]


def test_a_grid_left_to_other_processes_encodes_nothing(world, tmp_path, monkeypatch):
    """Cron's overlapping calls: when every run still to train is another process's, the command
    reports them busy without encoding the splits (a paper-scale grid's minutes of tokenizing)."""
    encoded = []
    monkeypatch.setattr(Experiment, "encode_splits", lambda self: encoded.append(True))
    cfg = config(world, tmp_path / "out")
    exp = experiment(cfg)
    lock = os.path.join(exp.run_dir(exp.plan.grid[0]), "lock")
    assert not held_elsewhere(lock)   # no lock file yet
    os.makedirs(os.path.dirname(lock))
    with exclusive_lock(lock):
        assert held_elsewhere(lock)
        outcome = finetune(cfg)
    assert outcome.exit_code == EXIT_BUSY and outcome.counts["busy"] == 1 and encoded == []
    assert not held_elsewhere(lock)   # released, the file left behind
    monkeypatch.undo()
    outcome = finetune(cfg)
    assert outcome.exit_code == EXIT_OK and outcome.results["runs"][0]["worked"]


def test_whoever_writes_the_summary_last_writes_every_run_finished_by_then(world, tmp_path):
    """Two overlapping calls on one grid, each training one run: the run the other process held when
    this one passed it has finished by the time this one writes results.json, which must say so
    (it said busy, and the last writer left the grid incomplete with every run done)."""
    done, cfg, busy_dir, lock = grid_with_a_run_held_elsewhere(world, tmp_path)
    finished_elsewhere = []

    def meanwhile(_):   # while this call trains the second run, the other process finishes the first
        if not finished_elsewhere:
            source = done / os.path.relpath(busy_dir, tmp_path / "out")
            shutil.copytree(source, busy_dir, dirs_exist_ok=True, ignore=shutil.ignore_patterns("lock"))
            lock.__exit__(None, None, None)
            finished_elsewhere.append(True)

    outcome = finetune(cfg, on_epoch_end=meanwhile)
    assert finished_elsewhere
    assert outcome.exit_code == EXIT_OK and outcome.results["complete"]
    assert outcome.counts == {"done": 2, "busy": 0, "failed": 0}
    assert [r["worked"] for r in outcome.results["runs"]] == [False, True]
    assert json.loads((tmp_path / "out" / "results.json").read_text())["complete"]


def test_runs_another_process_failed_or_finished_are_written_as_they_stand(world, tmp_path, monkeypatch):
    """Under the output lock every unfinished run is read again: one the other process failed and let go
    of is failed (exit 1, not busy's 75: cron's "read error.txt"), and one that failed here and that
    another process has since finished is done (the last writer wrote it failed, the grid incomplete)."""
    from xlt.finetune import runner

    done, cfg, run0, lock = grid_with_a_run_held_elsewhere(world, tmp_path)

    def fails_elsewhere(_):
        if not held_elsewhere(os.path.join(run0, "lock")):
            return
        Path(run0, "error.txt").write_text("Traceback ...\nRuntimeError: CUDA out of memory\n")
        lock.__exit__(None, None, None)

    outcome = finetune(cfg, on_epoch_end=fails_elsewhere)
    assert outcome.counts == {"done": 1, "busy": 0, "failed": 1} and outcome.exit_code == runner.EXIT_FAILED
    assert outcome.results["runs"][0]["error"] == "in another process: RuntimeError: CUDA out of memory"

    cfg = config(world, tmp_path / "again", batch_size=[8, 16])
    again = experiment(cfg)
    run0 = again.run_dir(again.plan.grid[0])
    train = runner.RunTrainer.train

    def flaky(self, *args, **kwargs):   # run 0 fails here (a transient failure)
        if self.settings.batch_size == 8:
            raise RuntimeError("transient failure")
        return train(self, *args, **kwargs)

    def finished_elsewhere(_):   # while run 1 trains, another process retries run 0 and finishes it
        if os.path.exists(os.path.join(run0, "error.txt")):
            shutil.copytree(done / os.path.relpath(run0, tmp_path / "again"), run0, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("lock"))
            os.unlink(os.path.join(run0, "error.txt"))

    monkeypatch.setattr(runner.RunTrainer, "train", flaky)
    outcome = finetune(cfg, on_epoch_end=finished_elsewhere)
    assert outcome.counts == {"done": 2, "busy": 0, "failed": 0} and outcome.exit_code == EXIT_OK
