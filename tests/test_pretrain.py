"""xlt pretrain: the run directory, exact resume (also after SIGKILL), NaN stop, bad inputs."""

from __future__ import annotations

import json
import math
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import assert_one_line_error, run_xlt
from pretrain_fixtures import build_inputs, tiny_args

from xlt.pretrain.schedule import inverse_sqrt_schedule
from xlt.utils.rundir import cpu_model


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    return build_inputs(tmp_path_factory.mktemp("pretrain-inputs"))


def weights(run_dir: Path, name: str = "last.pt") -> dict:
    return torch.load(run_dir / "checkpoints" / name, map_location="cpu", weights_only=False)["model"]


def assert_same_weights(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), f"{k} differs"


def test_inverse_sqrt_schedule():
    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.Adam([p], lr=1e-3)
    sched = inverse_sqrt_schedule(opt, lr=1e-3, warmup_steps=10, warmup_init_lr=1e-7)
    lrs = []
    for _ in range(40):
        lrs.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    assert lrs[0] == pytest.approx(1e-7)
    assert lrs[5] == pytest.approx(1e-7 + (1e-3 - 1e-7) * 0.5)
    assert lrs[10] == pytest.approx(1e-3)
    assert lrs[40 - 1] == pytest.approx(1e-3 * (10 / 39) ** 0.5)


def test_the_unigram_floor_counts_the_store_a_chunk_at_a_time_as_a_textbook_count(inputs, monkeypatch):
    # it copied up to 50M ids into memory as int64 (400 MB per language and rank)
    import numpy as np

    import xlt.pretrain.unigram as unigram
    from xlt.data.store import TokenStore
    from xlt.text.vocab import SPECIALS

    store, V = TokenStore.open(inputs["root"] / "en.train"), len(inputs["vocab"])
    ids = np.array(store.tokens[:1000], dtype=np.int64)
    counts = np.array([(ids == i).sum() for i in range(V)], dtype=np.float64)
    counts[:len(SPECIALS)] = 0
    textbook = np.log((counts + 1) / (counts.sum() + V - len(SPECIALS)))
    monkeypatch.setattr(unigram, "COUNT_CHUNK", 7)   # many chunks, the last one short
    assert np.array_equal(unigram.unigram_log_probs(store.tokens, V, limit=1000), textbook)


def test_run_directory_describes_itself(inputs, tmp_path):
    run = tmp_path / "run"
    res = run_xlt("pretrain", "--run-dir", run, *inputs["args"], *tiny_args(10))
    assert res.returncode == 0, res.stderr
    config = json.loads((run / "config.json").read_text())
    assert config["config"]["preset"] == "tiny" and config["config"]["max_steps"] == 10
    assert config["environment"]["torch"] == torch.__version__
    assert config["environment"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert config["environment"]["device"] == "cpu"   # --device auto resolved, on a machine without a GPU
    assert config["environment"]["cpu"] == cpu_model()
    assert config["inputs"]["vocab_sha256"] == inputs["vocab"].sha256 and config["processes"] == 1
    assert set(config["inputs"]["stores"]) == {"train/en", "train/fr", "dev/en", "dev/fr"}
    assert config["command"][:2] == ["xlt", "pretrain"] or "pretrain" in config["command"]
    assert (run / "vocab").read_text() == (inputs["root"] / "vocab").read_text()
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if "loss" in r]
    assert [r["step"] for r in train] == [2, 4, 6, 8, 10]
    assert all(r["tokens_per_s"] > 0 and r["lang"] in ("en", "fr") for r in train)
    # each record's rate is the one its step trained with: step s follows s - 1 scheduler steps
    # (--warmup-steps 5 --lr 1e-3: a linear warm-up from 1e-7, then 1e-3 sqrt(5 / (s - 1)))
    used = [1e-7 + (1e-3 - 1e-7) * (s - 1) / 5 if s - 1 < 5 else 1e-3 * math.sqrt(5 / (s - 1)) for s in (2, 4, 6, 8, 10)]
    assert [r["lr"] for r in train] == pytest.approx(used, rel=1e-9)
    evals = [r for r in records if "valid_en_mlm_ppl" in r]
    assert [r["step"] for r in evals] == [5, 10] and all("valid_fr_mlm_ppl" in r for r in evals)
    # the unigram floor beside each dev perplexity: same targets and counts, so the same at every evaluation
    for lang in ("en", "fr"):
        floors = {r[f"valid_{lang}_unigram_ppl"] for r in evals}
        assert len(floors) == 1 and 1 < floors.pop() < len(inputs["vocab"])
    best = torch.load(run / "checkpoints" / "best.pt", weights_only=False)
    assert "optimizer" not in best and best["model_config"]["n_layers"] == 2
    last = torch.load(run / "checkpoints" / "last.pt", weights_only=False)
    assert last["step"] == 10 and {"optimizer", "scheduler", "scaler", "sampler", "per_rank"} <= set(last)


def test_resume_equals_uninterrupted(inputs, tmp_path):
    straight, split = tmp_path / "straight", tmp_path / "split"
    run_xlt("pretrain", "--run-dir", straight, *inputs["args"], *tiny_args(14), check=True)
    run_xlt("pretrain", "--run-dir", split, *inputs["args"], *tiny_args(7), check=True)
    run_xlt("pretrain", "--run-dir", split, *inputs["args"], *tiny_args(14), check=True)
    assert_same_weights(weights(straight), weights(split))
    steps = [json.loads(l)["step"] for l in (split / "metrics.jsonl").read_text().splitlines() if "loss" in l]
    assert steps == sorted(set(steps)), "a resumed run must not log a step twice"
    # the description keeps how the run started and adds the resume: where, on what, what it changed
    first, last = (json.loads((run / "config.json").read_text()) for run in (straight, split))
    assert "resumes" not in first and last["config"] == first["config"] and last["command"][-1] == "7"
    (resume,) = last["resumes"]
    assert resume["step"] == 7 and resume["changed"] == {"max_steps": [7, 14]} and resume["command"][-1] == "14"
    assert resume["environment"]["cpu"] == cpu_model() and resume["environment"]["torch"] == torch.__version__


def test_a_run_whose_inputs_moved_resumes_and_one_whose_inputs_changed_does_not_even_under_the_same_paths(inputs, tmp_path):
    here = tmp_path / "here"
    shutil.copytree(inputs["root"], here)
    (here / "codes.en").write_text("t h 5\n", encoding="utf-8")

    def args_in(root: Path) -> list[str]:
        return [a.replace(str(inputs["root"]), str(root)) for a in inputs["args"]] + ["--codes", "en",
                                                                                      str(root / "codes.en")]
    straight, moved = tmp_path / "straight", tmp_path / "moved"
    run_xlt("pretrain", "--run-dir", straight, *args_in(here), *tiny_args(14), check=True)
    run_xlt("pretrain", "--run-dir", moved, *args_in(here), *tiny_args(7), check=True)
    # the work directory copied elsewhere: the same files under other paths
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(here, elsewhere)
    run_xlt("pretrain", "--run-dir", moved, *args_in(elsewhere), *tiny_args(14), check=True)
    assert_same_weights(weights(straight), weights(moved))
    assert json.loads((moved / "config.json").read_text())["config"]["vocab"] == str(elsewhere / "vocab")
    # moved again, but other codes, or other English dev text: not the inputs the run was trained on
    other_codes, other_dev = tmp_path / "other-codes", tmp_path / "other-dev"
    shutil.copytree(elsewhere, other_codes)
    (other_codes / "codes.en").write_text("t h 6\n", encoding="utf-8")
    shutil.copytree(elsewhere, other_dev)
    for path in other_dev.glob("en.train*"):
        shutil.copyfile(path, other_dev / path.name.replace("en.train", "en.dev"))
    for root, what in ((other_codes, "codes.en"), (other_dev, "dev/en")):
        res = run_xlt("pretrain", "--run-dir", moved, *args_in(root), *tiny_args(16))
        assert_one_line_error(res, f"run directory holds a run trained on other inputs ({what} changed)",
                              str(moved / "config.json"))
    # the same paths with other content: the English store binarized again from other text
    for path in elsewhere.glob("en.dev*"):
        path.unlink()
    for path in other_dev.glob("en.dev*"):
        shutil.copyfile(path, elsewhere / path.name)
    res = run_xlt("pretrain", "--run-dir", moved, *args_in(elsewhere), *tiny_args(16))
    assert_one_line_error(res, "trained on other inputs (dev/en changed)", str(moved / "config.json"))
    # a refused resume leaves the run as it was
    assert json.loads((moved / "config.json").read_text())["config"]["max_steps"] == 14
    assert torch.load(moved / "checkpoints" / "last.pt", weights_only=False)["step"] == 14


CURRICULUM = ["--short-stream-len", "4", "--short-stream-steps", "8", "--dropout", "0"]


def test_the_short_window_phase_then_long_windows_and_resume_across_the_switch(inputs, tmp_path, monkeypatch):
    from xlt.pretrain.config import PretrainConfig
    from xlt.pretrain.plan import resolve
    from xlt.pretrain.trainer import Pretrainer

    root = inputs["root"]
    cfg = PretrainConfig(vocab=str(root / "vocab"), train={l: str(root / f"{l}.train") for l in ("en", "fr")},
                         dev={l: str(root / f"{l}.dev") for l in ("en", "fr")}, preset="tiny", stream_len=16,
                         batch_size=4, short_stream_len=4, short_stream_steps=3, max_steps=5, dropout=0.0)
    trainer = Pretrainer(resolve(cfg), tmp_path / "shapes")
    shapes = []
    step = trainer._train_step
    monkeypatch.setattr(trainer, "_train_step", lambda batches, *a: shapes.extend(
        tuple(masked.input_ids.shape) for masked, _ in batches) or step(batches, *a))
    trainer.train()
    # Four times the windows of a quarter of the length: the same 64 tokens per step in both phases.
    assert shapes == [(16, 4)] * 3 + [(4, 16)] * 2
    assert trainer.model_config.dropout == 0 and trainer.model_config.attention_dropout == 0

    straight, split = tmp_path / "straight", tmp_path / "split"
    run_xlt("pretrain", "--run-dir", straight, *inputs["args"], *tiny_args(14), *CURRICULUM, check=True)
    run_xlt("pretrain", "--run-dir", split, *inputs["args"], *tiny_args(6), *CURRICULUM, check=True)
    run_xlt("pretrain", "--run-dir", split, *inputs["args"], *tiny_args(14), *CURRICULUM, check=True)
    assert_same_weights(weights(straight), weights(split))
    plain = tmp_path / "plain"
    run_xlt("pretrain", "--run-dir", plain, *inputs["args"], *tiny_args(14), "--dropout", "0", check=True)
    assert any(not torch.equal(a, b) for a, b in zip(weights(plain).values(), weights(straight).values()))


def test_a_run_written_before_the_curriculum_existed_still_resumes(inputs, tmp_path):
    straight, old = tmp_path / "straight", tmp_path / "old"
    run_xlt("pretrain", "--run-dir", straight, *inputs["args"], *tiny_args(12), check=True)
    run_xlt("pretrain", "--run-dir", old, *inputs["args"], *tiny_args(6), check=True)
    # As an earlier xlt left it: no curriculum or dropout settings, no short-window streams.
    description = json.loads((old / "config.json").read_text())
    for key in ("short_stream_len", "short_stream_steps", "dropout", "langs_per_step"):
        del description["config"][key]
    (old / "config.json").write_text(json.dumps(description))
    checkpoint = torch.load(old / "checkpoints" / "last.pt", weights_only=False)
    for rank in checkpoint["per_rank"]:
        del rank["short_streams"]
    torch.save(checkpoint, old / "checkpoints" / "last.pt")
    run_xlt("pretrain", "--run-dir", old, *inputs["args"], *tiny_args(12), check=True)
    assert_same_weights(weights(straight), weights(old))
    res = run_xlt("pretrain", "--run-dir", old, *inputs["args"], *tiny_args(12), "--dropout", "0")
    assert_one_line_error(res, "other settings (dropout: None -> 0.0,")


@pytest.mark.parametrize("options, message", [
    (["--short-stream-len", "16"], "--short-stream-len must be between 1 and --stream-len - 1 (15), got 16"),
    (["--short-stream-len", "4"], "--short-stream-steps must be at least 1 with --short-stream-len, got 0"),
    (["--short-stream-steps", "4"], "--short-stream-steps must be 0 without --short-stream-len, got 4"),
    (["--dropout", "1"], "--dropout must be in [0, 1), got 1"),
])
def test_curriculum_and_dropout_settings_are_checked(inputs, tmp_path, options, message):
    res = run_xlt("pretrain", "--run-dir", tmp_path / "r", *inputs["args"], *tiny_args(2), *options)
    assert_one_line_error(res, message)
    assert not (tmp_path / "r").exists() or not (tmp_path / "r" / "checkpoints" / "last.pt").exists()


def test_an_attempt_killed_before_its_first_checkpoint_starts_over_with_its_metrics(inputs, tmp_path):
    straight, restarted = tmp_path / "straight", tmp_path / "restarted"
    run_xlt("pretrain", "--run-dir", straight, *inputs["args"], *tiny_args(6), check=True)
    run_xlt("pretrain", "--run-dir", restarted, *inputs["args"], *tiny_args(6), check=True)
    (restarted / "checkpoints" / "last.pt").unlink()  # as if killed after logging, before saving
    run_xlt("pretrain", "--run-dir", restarted, *inputs["args"], *tiny_args(6), check=True)
    assert (restarted / "metrics.jsonl").read_text().count('"loss"') == 3  # steps 2, 4, 6 once each
    assert_same_weights(weights(straight), weights(restarted))


def test_sigkill_at_any_moment_then_resume_equals_uninterrupted(inputs, tmp_path):
    straight = tmp_path / "straight"
    run_xlt("pretrain", "--run-dir", straight, *inputs["args"], *tiny_args(24), check=True)
    expected = weights(straight)
    for delay in (0.3, 1.5):
        run = tmp_path / f"killed-{delay}"
        cmd = [sys.executable, "-m", "xlt", "pretrain", "--run-dir", str(run), *inputs["args"], *tiny_args(24)]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while not (run / "checkpoints" / "last.pt").exists() and time.time() < deadline and proc.poll() is None:
            time.sleep(0.02)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        run_xlt("pretrain", "--run-dir", run, *inputs["args"], *tiny_args(24), check=True)
        assert_same_weights(expected, weights(run))
        leftovers = [p.name for p in (run / "checkpoints").iterdir() if p.name.endswith(".tmp")]
        assert leftovers == []


def test_sigterm_saves_a_checkpoint_and_resuming_equals_uninterrupted(inputs, tmp_path):
    """A preempted job (SIGTERM, then a grace period) keeps every step it made, not only the last save."""
    settings = tiny_args(300, eval_every="100", save_every="200")
    straight, stopped = tmp_path / "straight", tmp_path / "stopped"
    run_xlt("pretrain", "--run-dir", straight, *inputs["args"], *settings, check=True)
    cmd = [sys.executable, "-m", "xlt", "pretrain", "--run-dir", str(stopped), *inputs["args"], *settings]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    metrics = stopped / "metrics.jsonl"
    while not (metrics.exists() and '"loss"' in metrics.read_text()) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)  # the loop is running (its first loss line is written at step 2)
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr  # 300 steps take seconds: the signal arrives long before the end
    lines = [line for line in stderr.splitlines() if "error:" in line]
    assert len(lines) == 1 and "stopped by SIGTERM after step" in lines[0], stderr
    saved = torch.load(stopped / "checkpoints" / "last.pt", weights_only=False)["step"]
    assert 0 < saved < 300, saved
    run_xlt("pretrain", "--run-dir", stopped, *inputs["args"], *settings, check=True)
    assert_same_weights(weights(straight), weights(stopped))


def test_nan_loss_stops_and_keeps_last_good_checkpoint(inputs, tmp_path, monkeypatch):
    from xlt.pretrain.config import PretrainConfig
    from xlt.pretrain.plan import resolve
    from xlt.pretrain.trainer import Pretrainer
    from xlt.utils.errors import XltError

    root = inputs["root"]
    cfg = PretrainConfig(vocab=str(root / "vocab"), train={l: str(root / f"{l}.train") for l in ("en", "fr")},
                         dev={l: str(root / f"{l}.dev") for l in ("en", "fr")}, preset="tiny", stream_len=16,
                         batch_size=4, max_steps=10, save_every=3, eval_every=100, warmup_steps=5)
    trainer = Pretrainer(resolve(cfg), str(tmp_path / "run"))
    real_forward = trainer.model.forward

    def poisoned(*args, **kwargs):
        loss = real_forward(*args, **kwargs)
        return loss * float("nan") if trainer.step >= 4 else loss

    monkeypatch.setattr(trainer.model, "forward", poisoned)
    with pytest.raises(XltError, match=r"loss is not finite at step 5 \(here: nan\)"):
        trainer.train()
    assert torch.load(tmp_path / "run" / "checkpoints" / "last.pt", weights_only=False)["step"] == 3


def test_the_loss_is_read_back_only_where_it_is_logged_or_a_file_is_written(inputs, tmp_path, monkeypatch):
    # On a GPU a read-back waits for every queued kernel: between such steps the CPU masks the next
    # batch while the device trains, so a step in between must not read anything back.
    from xlt.pretrain.config import PretrainConfig
    from xlt.pretrain.plan import resolve
    from xlt.pretrain.trainer import Pretrainer

    root = inputs["root"]
    cfg = PretrainConfig(vocab=str(root / "vocab"), train={l: str(root / f"{l}.train") for l in ("en", "fr")},
                         dev={l: str(root / f"{l}.dev") for l in ("en", "fr")}, preset="tiny", stream_len=16,
                         batch_size=4, max_steps=13, log_every=4, save_every=6, eval_every=10, snapshot_at=[7],
                         warmup_steps=5)
    trainer = Pretrainer(resolve(cfg), str(tmp_path / "run"))
    read_at, real = [], trainer._read_back

    def recording(pending, stop_requested):
        read_at.append((trainer.step, len(pending)))
        return real(pending, stop_requested)

    monkeypatch.setattr(trainer, "_read_back", recording)
    trainer.train()
    # logs 4, 8, 12; saves 6, 12; evaluation 10; snapshot 7; the last step 13: each reads the steps since
    assert read_at == [(4, 4), (6, 2), (7, 1), (8, 1), (10, 2), (12, 2), (13, 1)]


@pytest.mark.parametrize("sharing", [["--sharing", "sep-emb"], ["--separate-layers", "1", "1"],
                                     ["--sharing", "sep-emb", "--separate-layers", "1", "1"]])
def test_language_specific_parts_train_and_the_others_stay_put(inputs, tmp_path, sharing):
    run = tmp_path / "run"
    res = run_xlt("pretrain", "--run-dir", run, *inputs["args"], *tiny_args(6), *sharing)
    assert res.returncode == 0, res.stderr
    config = json.loads((run / "config.json").read_text())["config"]["model"]
    assert config["sharing"]["separate_embeddings"] == ("sep-emb" in sharing)


def test_equal_copies_init_starts_the_language_copies_equal_and_is_recorded(inputs, tmp_path):
    from xlt.pretrain.config import PretrainConfig
    from xlt.pretrain.plan import resolve
    from xlt.pretrain.trainer import Pretrainer

    root = inputs["root"]
    common = dict(vocab=str(root / "vocab"), train={l: str(root / f"{l}.train") for l in ("en", "fr")},
                  dev={l: str(root / f"{l}.dev") for l in ("en", "fr")}, preset="tiny", sharing="sep-emb",
                  stream_len=16, batch_size=4, max_steps=2)
    for equal in (False, True):
        trainer = Pretrainer(resolve(PretrainConfig(**common, equal_copies_init=equal)), tmp_path / f"run{equal}")
        positions = trainer.model.encoder.position_embeddings.by_lang
        assert torch.equal(positions["en"].weight, positions["fr"].weight) == equal
        trainer.train()
        assert json.loads((tmp_path / f"run{equal}" / "config.json").read_text())["config"]["equal_copies_init"] == equal
        # a random model like the run (the CKA bound, tracking's step 0) starts as the run started
        from xlt.model.xlt_run import PretrainedRun

        fresh = PretrainedRun.load(tmp_path / f"run{equal}", "last").random_encoder_like(0).encoder.position_embeddings
        assert torch.equal(fresh.by_lang["en"].weight, fresh.by_lang["fr"].weight) == equal


def test_compile_is_for_cuda_and_a_cpu_run_asked_for_it_trains_as_the_eager_one(inputs, tmp_path):
    """--compile is a CUDA speed-up (measured on an H200, bench/README.md); on the CPU torch 2.13's
    inductor code gave NaN losses under ATEN_CPU_CAPABILITY=avx2, so a CPU run says it trains eagerly
    and does, bit for bit, and the setting may change when a run resumes."""
    eager, asked = tmp_path / "eager", tmp_path / "asked"
    run_xlt("pretrain", "--run-dir", eager, *inputs["args"], *tiny_args(6), check=True)
    first = run_xlt("pretrain", "--run-dir", asked, *inputs["args"], *tiny_args(3), "--compile", check=True)
    assert "--compile applies to CUDA only" in first.stderr
    run_xlt("pretrain", "--run-dir", asked, *inputs["args"], *tiny_args(6), check=True)
    assert_same_weights(weights(eager), weights(asked))
    assert json.loads((asked / "config.json").read_text())["config"]["compile"] is False  # the last start's
