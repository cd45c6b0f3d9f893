"""Weight-only snapshots (xlt pretrain --snapshot-every/--snapshot-at) and --checkpoint step-N on the
commands that load a run: the steps, the contents, exact resume, and the errors."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import synthetic
import torch
from conftest import assert_one_line_error, run_in_process
from pretrain_fixtures import build_inputs, tiny_args

from xlt.model.xlt_run import PretrainedRun
from xlt.pretrain.snapshots import snapshot_due

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# tiny_args: eval every 5 steps (best.pt at 5 or 10), last.pt every 3 steps and at the end.
BOTH = {"snapshot_every": "4", "snapshot_at": "3"}
BOTH_ARGS = ["--snapshot-every", "4", "--snapshot-at", "3", "--snapshot-at", "4"]  # 4 twice: one file


def snapshot_args(max_steps: int, *extra: str) -> list[str]:
    return [*tiny_args(max_steps), *BOTH_ARGS, *extra]


def pretrain(*args) -> None:
    """``xlt pretrain ARGS`` in this process (a subprocess would spend seconds importing torch)."""
    from xlt.cli import main

    try:
        main(["pretrain", *map(str, args)])
    except SystemExit as stop:
        assert stop.code in (0, None), f"xlt pretrain exited with {stop.code}"


def load(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=False)


def snapshots(run: Path) -> list[str]:
    return sorted(p.name for p in (run / "checkpoints").glob("step-*"))


def assert_same_weights(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), f"{k} differs"


def same_state(a, b) -> bool:
    """Equal nested states: dicts, lists and tuples of tensors, arrays and plain values."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same_state(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same_state(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and np.array_equal(a, b)
    return a == b


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return build_inputs(tmp_path_factory.mktemp("snapshot-inputs"))


@pytest.fixture(scope="module")
def runs(inputs, tmp_path_factory) -> dict[str, Path]:
    """"both": 10 steps, snapshots every 4 steps and at 3 and 4; "every": the same run stopped after
    4 steps, a snapshot every 2 steps; "plain": 10 steps, no snapshots."""
    root = tmp_path_factory.mktemp("snapshot-runs")
    settings = {"both": snapshot_args(10), "every": [*tiny_args(4), "--snapshot-every", "2"], "plain": tiny_args(10)}
    for name, args in settings.items():
        pretrain("--run-dir", root / name, *inputs["args"], *args)
    return {name: root / name for name in settings}


def test_which_steps_are_snapshotted():
    due = lambda every, at: [s for s in range(1, 13) if snapshot_due(s, every, at)]  # noqa: E731
    assert due(0, []) == []
    assert due(4, []) == [4, 8, 12]
    assert due(0, [3, 10]) == [3, 10]
    assert due(4, [3, 4]) == [3, 4, 8, 12]


def test_snapshots_are_written_at_exactly_the_steps_asked_for(runs):
    assert snapshots(runs["both"]) == ["step-3.pt", "step-4.pt", "step-8.pt"]
    assert snapshots(runs["every"]) == ["step-2.pt", "step-4.pt"]
    assert snapshots(runs["plain"]) == []
    recorded = json.loads((runs["both"] / "config.json").read_text())["config"]
    assert recorded["snapshot_every"] == 4 and recorded["snapshot_at"] == [3, 4]


def test_a_snapshot_holds_the_weights_and_what_loading_needs_only(runs):
    checkpoints = runs["both"] / "checkpoints"
    last = load(checkpoints / "last.pt")
    for step in (3, 4, 8):
        state = load(checkpoints / f"step-{step}.pt")
        assert set(state) == {"model", "model_config", "vocab_sha256", "step"} and state["step"] == step
        assert state["model_config"] == last["model_config"] and state["vocab_sha256"] == last["vocab_sha256"]
        assert os.path.getsize(checkpoints / f"step-{step}.pt") < os.path.getsize(checkpoints / "last.pt")
        run = PretrainedRun.load(runs["both"], f"step-{step}")
        assert run.step == step
        assert_same_weights(run.model.state_dict(), state["model"])


def test_a_snapshot_holds_the_weights_after_its_step_and_snapshots_change_no_training(runs):
    # "every" is "both" stopped after 4 steps: its last.pt is the weights after step 4.
    after_4 = load(runs["every"] / "checkpoints" / "last.pt")["model"]
    assert_same_weights(load(runs["both"] / "checkpoints" / "step-4.pt")["model"], after_4)
    assert_same_weights(load(runs["every"] / "checkpoints" / "step-4.pt")["model"], after_4)
    step_3 = load(runs["both"] / "checkpoints" / "step-3.pt")["model"]
    assert any(not torch.equal(step_3[k], after_4[k]) for k in after_4)
    plain, both = (load(runs[name] / "checkpoints" / "last.pt") for name in ("plain", "both"))
    assert_same_weights(plain["model"], both["model"])
    # the same generators and stream positions afterwards: taking a snapshot draws no random number
    assert same_state(plain["per_rank"], both["per_rank"])


def test_a_resumed_run_writes_the_same_snapshots_and_leaves_written_ones_alone(inputs, runs, tmp_path):
    run, checkpoints = tmp_path / "resumed", tmp_path / "resumed" / "checkpoints"
    pretrain("--run-dir", run, *inputs["args"], *snapshot_args(6))
    # As an xlt from before snapshots left the run description: it still resumes.
    description = json.loads((run / "config.json").read_text())
    del description["config"]["snapshot_every"], description["config"]["snapshot_at"]
    (run / "config.json").write_text(json.dumps(description))
    after_6 = checkpoints / "after-6"
    shutil.copyfile(checkpoints / "last.pt", after_6)
    pretrain("--run-dir", run, *inputs["args"], *snapshot_args(9))
    assert snapshots(run) == ["step-3.pt", "step-4.pt", "step-8.pt"]
    # Killed after step 8's snapshot, before step 9's last.pt: the resume replays steps 7 to 10.
    os.replace(after_6, checkpoints / "last.pt")
    written = {name: os.stat(checkpoints / name) for name in snapshots(run)}
    pretrain("--run-dir", run, *inputs["args"], *snapshot_args(10))
    assert snapshots(run) == snapshots(runs["both"])
    for name, before in written.items():
        now = os.stat(checkpoints / name)
        assert (now.st_ino, now.st_mtime_ns, now.st_size) == (before.st_ino, before.st_mtime_ns, before.st_size)
        assert_same_weights(load(checkpoints / name)["model"], load(runs["both"] / "checkpoints" / name)["model"])
    assert_same_weights(load(checkpoints / "last.pt")["model"], load(runs["both"] / "checkpoints" / "last.pt")["model"])
    assert load(checkpoints / "last.pt")["optimizer"]["state"].keys() == \
        load(runs["both"] / "checkpoints" / "last.pt")["optimizer"]["state"].keys()


def test_a_run_started_over_drops_the_snapshots_of_the_attempt_before(inputs, tmp_path):
    run = tmp_path / "restarted"
    pretrain("--run-dir", run, *inputs["args"], *tiny_args(2), "--snapshot-at", "1")
    before = load(run / "checkpoints" / "step-1.pt")["model"]
    (run / "checkpoints" / "last.pt").unlink()  # as if killed before its first last.pt: nothing to resume
    (run / "checkpoints" / "step-2.pt").write_bytes(b"an attempt with other settings")
    pretrain("--run-dir", run, *inputs["args"], *tiny_args(2, seed="1"), "--snapshot-at", "1")
    assert snapshots(run) == ["step-1.pt"]
    after = load(run / "checkpoints" / "step-1.pt")["model"]
    assert any(not torch.equal(before[k], after[k]) for k in before)  # rewritten by the seed-1 run


@pytest.mark.parametrize("options, message", [
    (["--snapshot-every", "-1"], "--snapshot-every must be 0 (off) or more, got -1"),
    (["--snapshot-at", "0"], "--snapshot-at must be between 1 and --max-steps (10), got 0"),
    (["--snapshot-at", "3", "--snapshot-at", "11"], "--snapshot-at must be between 1 and --max-steps (10), got 11"),
])
def test_snapshot_settings_are_checked_before_any_work(inputs, tmp_path, capsys, options, message):
    res = run_in_process(capsys, "pretrain", "--run-dir", tmp_path / "r", *inputs["args"], *tiny_args(10), *options)
    assert_one_line_error(res, message)
    assert not (tmp_path / "r" / "checkpoints").exists()


# ---- --checkpoint step-N ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def text(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("snapshot-text") / "en.txt"
    path.write_text("\n".join(synthetic.corpus(12, seed=5)[0]) + "\n", encoding="utf-8")
    return path


def extracted(capsys, run: Path, checkpoint: str, text: Path, out: Path) -> np.ndarray:
    res = run_in_process(capsys, "extract", "--model", run, "--lang", "en", "--checkpoint", checkpoint, text, "-o", out)
    assert res.returncode == 0, res.stderr
    return np.load(f"{out}.npy")


def test_extract_from_a_snapshot_gives_that_steps_representations(runs, text, tmp_path, capsys):
    snapshot = extracted(capsys, runs["both"], "step-4", text, tmp_path / "snapshot")
    stopped_at_4 = extracted(capsys, runs["every"], "last", text, tmp_path / "stopped")
    best = extracted(capsys, runs["both"], "best", text, tmp_path / "best")
    np.testing.assert_array_equal(snapshot, stopped_at_4)
    assert np.abs(snapshot - best).max() > 1e-4
    header = json.loads((tmp_path / "snapshot.json").read_text())
    assert header["checkpoint"] == "step-4" and header["step"] == 4


def test_shift_decode_means_from_a_snapshot(runs, text, tmp_path, capsys):
    from xlt.model.interventions import load_means

    for run, checkpoint, out in ((runs["both"], "step-4", "snapshot"), (runs["every"], "last", "stopped"),
                                 (runs["both"], "best", "best")):
        res = run_in_process(capsys, "shift-decode", "means", "--model", run, "--lang", "en",
                             "--checkpoint", checkpoint, text, "-o", tmp_path / f"{out}.npz")
        assert res.returncode == 0, res.stderr
    (snapshot, header), (stopped, _), (best, _) = (load_means(str(tmp_path / f"{n}.npz"))
                                                   for n in ("snapshot", "stopped", "best"))
    assert header["step"] == 4
    np.testing.assert_array_equal(snapshot, stopped)
    assert np.abs(snapshot - best).max() > 1e-4


def _options(run: Path, tmp: Path, text: Path) -> dict[str, list]:
    """The options (all but --checkpoint) of each command that loads a run."""
    return {
        "extract": ["--model", run, "--lang", "en", text, "-o", tmp / "x"],
        "cka compare": ["--model-a", run, "--lang-a", "en", "--text-a", text, "--lang-b", "fr", "--text-b", text,
                        "-o", tmp / "c"],
        "shift-decode means": ["--model", run, "--lang", "en", text, "-o", tmp / "m.npz"],
        "shift-decode translate": ["--model", run, "--shift", tmp / "s.npz", "--input", text, "--reference", text,
                                   "-o", tmp / "t.json"],
        "export hf": [run, "-o", tmp / "hf"],
        "align sentence": ["--model", run, "--source-lang", "en", "--target-lang", "fr", "--train", text, text,
                           "--test", text, text, "-o", tmp / "a.json"],
    }


@pytest.mark.parametrize("command", ["extract", "cka compare", "shift-decode means", "shift-decode translate",
                                     "export hf", "align sentence"])
def test_every_command_that_loads_a_run_takes_step_n_and_refuses_a_bad_name(runs, text, tmp_path, capsys, command):
    options = _options(runs["both"], tmp_path, text)[command]
    res = run_in_process(capsys, *command.split(), "--checkpoint", "step-x", *options)
    assert_one_line_error(res, "--checkpoint must be one of best, last, step-N (N a step), got 'step-x'")
    res = run_in_process(capsys, *command.split(), "--help")
    shown = " ".join(res.stdout.split())  # as wrapped at any terminal width
    assert "--checkpoint [best|last|step-N] best (dev perplexity), last, or step-N (a snapshot" in shown


@pytest.mark.parametrize("command", ["extract", "export hf", "align sentence"])
def test_a_missing_snapshot_is_one_error_line_naming_its_file(runs, text, tmp_path, capsys, command):
    options = _options(runs["both"], tmp_path, text)[command]
    res = run_in_process(capsys, *command.split(), *options, "--checkpoint", "step-999")
    assert_one_line_error(res, str(runs["both"] / "checkpoints" / "step-999.pt"),
                          "no step-999 checkpoint in this run directory")
