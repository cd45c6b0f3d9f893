"""Two-process torchrun on CPU (gloo): gradients are averaged, and a run matches one process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from pretrain_fixtures import build_inputs, tiny_args

HERE = Path(__file__).parent


def torchrun(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(HERE.parent), "XLT_DEVICE": "cpu"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", *args]
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


def test_xlt_pretrain_under_torchrun(inputs, tmp_path):
    run = tmp_path / "run"
    res = torchrun("-m", "xlt", "pretrain", "--run-dir", str(run), *inputs["args"], *tiny_args(6),
                   "--sharing", "sep-emb")
    assert res.returncode == 0, res.stderr[-3000:]
    last = torch.load(run / "checkpoints" / "last.pt", weights_only=False)
    assert last["step"] == 6 and len(last["per_rank"]) == 2
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert metrics and all(m["step"] <= 6 for m in metrics)
