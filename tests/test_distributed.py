"""Two-process torchrun on CPU (gloo): gradients are averaged, and a run matches one process."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from pretrain_fixtures import build_inputs, tiny_args

HERE = Path(__file__).parent


def torchrun(*args: str, monitor_interval: float = 0.1) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(HERE.parent), "XLT_DEVICE": "cpu"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "--monitor-interval", str(monitor_interval), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)


def test_two_processes_match_one_process_on_the_combined_batch(tmp_path):
    single, double = tmp_path / "single.pt", tmp_path / "double.pt"
    subprocess.run([sys.executable, str(HERE / "ddp_worker.py"), str(single)], check=True,
                   env={**os.environ, "PYTHONPATH": str(HERE.parent)})
    res = torchrun(str(HERE / "ddp_worker.py"), str(double), "--shard")
    assert res.returncode == 0, res.stderr[-3000:]
    a, b = torch.load(single), torch.load(double)
    changed = 0
    for name in a:
        assert torch.allclose(a[name], b[name], atol=1e-6, rtol=1e-5), name
        changed += int(not torch.equal(a[name], torch.zeros_like(a[name])))
    assert changed > 0


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return build_inputs(tmp_path_factory.mktemp("ddp-inputs"))


@pytest.mark.parametrize("mixing", [[], ["--langs-per-step", "3"]])
def test_xlt_pretrain_under_torchrun(inputs, tmp_path, mixing):
    # Several one-language batches per step: several backward passes, each leaving the other
    # language's Sep Emb table unused, before one optimizer step.
    run = tmp_path / "run"
    res = torchrun("-m", "xlt", "pretrain", "--run-dir", str(run), *inputs["args"], *tiny_args(6),
                   "--sharing", "sep-emb", *mixing)
    assert res.returncode == 0, res.stderr[-3000:]
    last = torch.load(run / "checkpoints" / "last.pt", weights_only=False)
    assert last["step"] == 6 and len(last["per_rank"]) == 2
    assert json.loads((run / "config.json").read_text())["processes"] == 2   # the batch per step is 2 x --batch-size
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert metrics and all(m["step"] <= 6 for m in metrics)


def test_a_nan_loss_on_one_rank_stops_every_rank(inputs, tmp_path):
    # torchrun looks at its workers only every 5 s here, so it cannot end rank 0 for rank 1: rank 0
    # reports the stop itself only if the ranks decide it together (else it waits in the all-reduce).
    run = tmp_path / "run"
    res = torchrun(str(HERE / "nan_worker.py"), "pretrain", "--run-dir", str(run), *inputs["args"], *tiny_args(8),
                   monitor_interval=5)
    assert res.returncode != 0
    stops = [line for line in res.stderr.splitlines() if "loss is not finite at step 4" in line]
    assert len(stops) == 2, res.stderr[-3000:]
    assert any("(here: nan)" in line for line in stops) and any("(here: nan)" not in line for line in stops)


def test_the_logged_loss_is_the_whole_steps(inputs, tmp_path):
    run = tmp_path / "run"
    res = torchrun(str(HERE / "constant_loss_worker.py"), "pretrain", "--run-dir", str(run), *inputs["args"],
                   *tiny_args(4))
    assert res.returncode == 0, res.stderr[-3000:]
    losses = [json.loads(line)["loss"] for line in (run / "metrics.jsonl").read_text().splitlines() if '"loss"' in line]
    assert losses == [1.5, 1.5], losses   # rank 0's 1.0 was logged as the step's
    assert res.stderr.count(f"{run}: step 4, best") == 1   # the summary once, from rank 0


def test_a_refusal_on_rank_0_stops_every_rank_with_one_line(inputs, tmp_path):
    # rank 0 alone checks the run directory: its refusal left rank 1 in a broadcast, which printed
    # gloo's 52-line "connection closed" traceback when rank 0 exited
    run = tmp_path / "run"
    assert torchrun("-m", "xlt", "pretrain", "--run-dir", str(run), *inputs["args"], *tiny_args(3)).returncode == 0
    res = torchrun("-m", "xlt", "pretrain", "--run-dir", str(run), *inputs["args"], *tiny_args(3, lr="2e-3"),
                   monitor_interval=5)
    errors = [line for line in res.stderr.splitlines() if line.startswith("xlt pretrain: error:")]
    assert len(errors) == 1 and "other settings (lr: 0.001 -> 0.002)" in errors[0], res.stderr[-3000:]
    assert "[rank1]" not in res.stderr, res.stderr[-3000:]
    # Every rank refuses with status 2, but torchrun ends a rank still shutting down when it sees the
    # other one gone (SIGTERM, -15: seen once on a loaded machine); a crash would show another status.
    codes = re.findall(r"exitcode\s+:\s*(-?\d+)", res.stderr)   # the summary's, not the log line's
    assert len(codes) == 2 and "2" in codes and set(codes) <= {"2", "-15"}, res.stderr[-3000:]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_nodes_of_one_process_equal_one_node_of_two(inputs, tmp_path):
    """The multi-node path (rank != local rank, rendezvous over TCP) trains exactly what one node does."""
    one_node = tmp_path / "one-node"
    args = [*inputs["args"], *tiny_args(6), "--sharing", "sep-emb"]
    assert torchrun("-m", "xlt", "pretrain", "--run-dir", str(one_node), *args).returncode == 0
    two_nodes = tmp_path / "two-nodes"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(HERE.parent), "XLT_DEVICE": "cpu"}
    endpoint = f"127.0.0.1:{free_port()}"
    nodes = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
                               "--nproc_per_node", "1", "--rdzv_backend", "c10d", "--rdzv_endpoint", endpoint,
                               "--rdzv_id", "xlt-test", "-m", "xlt", "pretrain", "--run-dir", str(two_nodes), *args],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
             for _ in range(2)]
    for node in nodes:
        _, stderr = node.communicate(timeout=300)
        assert node.returncode == 0, stderr[-3000:]
    a = torch.load(one_node / "checkpoints" / "last.pt", weights_only=False)
    b = torch.load(two_nodes / "checkpoints" / "last.pt", weights_only=False)
    assert len(b["per_rank"]) == 2
    for name in a["model"]:
        assert torch.equal(a["model"][name], b["model"][name]), name


def test_sigterm_to_torchrun_stops_every_rank_at_the_same_step_with_a_checkpoint(inputs, tmp_path):
    import re
    import signal
    import time

    run = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(HERE.parent), "XLT_DEVICE": "cpu"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "--monitor-interval", "0.1", "-m", "xlt", "pretrain", "--run-dir", str(run), *inputs["args"],
           *tiny_args(100000, eval_every="100000", save_every="100000", log_every="100000")]
    # Nothing logged or saved for 100,000 steps: the ranks must still meet to decide the stop (torchrun
    # kills its workers 30 s after passing SIGTERM on, so the next log step would come too late).
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + 120
    while not (run / "config.json").exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)  # to the agent, as a scheduler would; it passes it on to the workers
    _, stderr = proc.communicate(timeout=120)
    steps = {int(m) for m in re.findall(r"stopped by SIGTERM after step (\d+)", stderr)}
    assert len(re.findall("stopped by SIGTERM", stderr)) == 2 and len(steps) == 1, stderr[-3000:]
    last = torch.load(run / "checkpoints" / "last.pt", weights_only=False)
    assert last["step"] == steps.pop() > 0 and len(last["per_rank"]) == 2
