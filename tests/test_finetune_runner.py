"""The fine-tuning runner: zero-shot protocol, grid selection, resume, skip, test-time transforms
(locks: test_finetune_locks.py).

Everything runs the real runner in-process on a tiny pretrained en/fr model (language-specific
embeddings and layer 1) with the toy task of ``finetune_toy`` -- a task the runner knows only
through the contract in xlt.finetune.task.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from finetune_toy import ToyTask, build_toy_world

from xlt.finetune import ordering, selection
from xlt.finetune.config import FinetuneConfig, default_path
from xlt.finetune.plan import make_plan, resolve_grid
from xlt.finetune.registry import TASKS
from xlt.finetune.runner import EXIT_OK, Experiment, finetune
from xlt.finetune.trainer import frozen_parameter_names, lr_factor
from xlt.model.interventions import SHIFT_FORMAT, LanguageShift, load_map, load_shift
from xlt.model.checkpoint_io import load_checkpoint
from xlt.model.xlt_run import PretrainedRun
from xlt.text.pipeline import model_input
from xlt.utils.errors import XltError
from xlt.utils.rundir import cpu_model

TOY = "finetune_toy:ToyTask"


def write_shift(path: Path, target: str, source: str, mean_target: np.ndarray, mean_source: np.ndarray,
                step: int) -> Path:
    """A shift file as ``xlt shift-decode shift --src means.TARGET.npz --tgt means.SOURCE.npz`` writes it."""
    header = {"format": SHIFT_FORMAT, "src": target, "tgt": source, "run": "test", "step": step}
    LanguageShift(target, source, mean_target, mean_source, header).save(str(path))
    return path


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_toy_world(tmp_path_factory.getbasetemp() / "finetune-world")


# one torch thread, module fixtures included (conftest)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def config(world, output: Path, **overrides) -> FinetuneConfig:
    values = dict(task=TOY, model=str(world.run), output=str(output), checkpoint="last",
                  train=("en", str(world.split("en", "train"))), dev=("en", str(world.split("en", "dev"))),
                  eval={lang: (str(world.split(lang, "dev")), str(world.split(lang, "test"))) for lang in ("en", "fr")},
                  batch_size=[8], encoder_lr=[1e-4], head_lr=[1e-3], seeds=[1], epochs=2)
    values.update(overrides)
    return FinetuneConfig(**values)


def experiment(cfg: FinetuneConfig) -> Experiment:
    return Experiment(make_plan(cfg))


def run_files(output: Path) -> dict[str, Path]:
    return {p.name: p for p in sorted((output / "runs").iterdir())}


def brute_force_accuracy(world, run_dir: Path, lang: str, split: str) -> float:
    """Accuracy recomputed one example at a time, with no padding, from the pretrained run + saved weights."""
    pretrained = PretrainedRun.load(world.run, "last")
    train_json = json.loads((run_dir / "train.json").read_text())
    weights = load_checkpoint(run_dir / train_json["best_file"])
    encoder = pretrained.model.encoder
    encoder.load_state_dict({**encoder.state_dict(), **weights["encoder"]})
    task = ToyTask()
    head = task.make_head(encoder.config.d_model, weights["labels"])
    head.load_state_dict(weights["head"])
    correct = 0
    examples = task.read(str(world.split(lang, split)))
    with torch.no_grad():
        for ex in examples:
            ids = torch.tensor([model_input(pretrained.text(lang).encode_lines([ex.text])[0])])
            hidden = encoder(ids, lang, lang_embedding=lang).last_hidden_state
            correct += weights["labels"][head.linear(hidden[:, 0]).argmax(-1).item()] == ex.label
    return 100.0 * correct / len(examples)


def test_zero_shot_grid_end_to_end(world, tmp_path):
    out = tmp_path / "out"
    outcome = finetune(config(world, out, batch_size=[8, 16], seeds=[1, 2]))
    assert outcome.exit_code == EXIT_OK and outcome.counts == {"done": 4, "busy": 0, "failed": 0}
    results = json.loads((out / "results.json").read_text())
    assert results["complete"] and results["source"] == "en" and results["targets"] == ["fr"]
    assert len(results["runs"]) == 4 and len(run_files(out)) == 4
    # scores reproduce digit for digit on the same CPU kind only: results.json names it
    assert results["environment"]["cpu"] == cpu_model()
    assert results["environment"]["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert results["environment"]["device"] == "cpu"
    assert results["encoder_parameters"] == experiment(config(world, tmp_path / "again")).encoder_parameters()
    for run in results["runs"]:
        assert len(run["dev_curve"]) == 2 and run["source_dev"] == max(run["dev_curve"])
        assert set(run["results"]["plain"]) == {"en", "fr"}
        lines = (out / run["dir"] / "metrics.jsonl").read_text().splitlines()
        assert [json.loads(line)["epoch"] for line in lines] == [1, 2]
    # Selection uses the mean source dev over seeds only.
    means = {}
    for run in results["runs"]:
        means.setdefault(run["grid_point"]["batch_size"], []).append(run["source_dev"])
    best_bs = max(means, key=lambda bs: (sum(means[bs]) / 2, -bs))
    assert results["summary"]["selected"]["grid_point"]["batch_size"] == best_bs
    assert (out / "summary.md").read_text() == outcome.markdown and "mean of best two" in outcome.markdown
    # The target's test accuracy is what its own parts give, recomputed without batching or padding.
    run = results["runs"][0]
    for lang in ("en", "fr"):
        assert run["results"]["plain"][lang]["test"]["accuracy"] == pytest.approx(
            brute_force_accuracy(world, out / run["dir"], lang, "test"))


def test_results_count_the_encoder_parameters_fine_tuning_freezes(world, tmp_path):
    """The report compares a row's English score with the control's only when the row froze no more."""
    exp = experiment(config(world, tmp_path / "out"))
    encoder = exp.pretrained.model.encoder
    total = sum(p.numel() for p in encoder.parameters())
    specific = sum(p.numel() for _, p in encoder.language_specific_parameters())
    assert specific > 0 and exp.encoder_parameters() == {"trained": total - specific, "frozen": specific}
    bottom = experiment(config(world, tmp_path / "out1", freeze_bottom=1)).encoder_parameters()
    layer0 = sum(p.numel() for n, p in encoder.named_parameters() if n.startswith("layers.0.") and "by_lang" not in n)
    assert bottom["trained"] + bottom["frozen"] == total and bottom["frozen"] > specific + layer0


def test_frozen_parameters_do_not_change(world, tmp_path):
    from xlt.finetune.config import RunSettings
    from xlt.finetune.trainer import RunTrainer

    exp = experiment(config(world, tmp_path / "out", freeze_bottom=1, epochs=1))
    settings = exp.plan.grid[0]
    trainer = RunTrainer(exp.source_data(), settings, str(tmp_path / "run"))
    os.makedirs(trainer.run_dir)
    seen = []
    trainer.train(lambda record: seen.append(load_checkpoint(tmp_path / "run" / "state.pt")))
    original = dict(exp.pretrained.model.encoder.named_parameters())
    trained = dict(trainer.model.encoder.named_parameters())
    frozen = frozen_parameter_names(trainer.model.encoder, 1)
    specific = {n for n, _ in exp.pretrained.model.encoder.language_specific_parameters()}
    assert specific and specific < frozen and any(n.startswith("layers.0.") for n in frozen)
    assert any(n.startswith("token_embeddings.") for n in frozen)
    for name, param in trained.items():
        if name in frozen:
            assert not param.requires_grad and torch.equal(param, original[name]), name
        else:
            assert param.requires_grad
    assert any(not torch.equal(trained[n], original[n]) for n in trained if n.startswith("layers.1."))
    # The shared language-embedding table trains, but only the source's row: fr keeps its pretrained row.
    before = original["language_embeddings.weight"]
    assert "language_embeddings.weight" in frozen  # --freeze-bottom 1 includes the embeddings ...
    exp2 = experiment(config(world, tmp_path / "out2", epochs=1))
    trainer2 = RunTrainer(exp2.source_data(), exp2.plan.grid[0], str(tmp_path / "run2"))
    os.makedirs(trainer2.run_dir)
    trainer2.train()
    table = dict(trainer2.model.encoder.named_parameters())["language_embeddings.weight"]
    assert table.requires_grad  # ... without it the table trains, yet the target's row cannot move
    assert torch.equal(table[1], before[1]) and not torch.equal(table[0], before[0])
    in_optimizer = {id(p) for g in trainer.optimizer.param_groups for p in g["params"]}
    assert not any(id(trained[n]) in in_optimizer for n in frozen)
    assert set(seen[0]["weights"]["encoder"]) == set(trained) - frozen
    assert isinstance(settings, RunSettings)


def strip_times(path: Path) -> list[dict]:
    records = [json.loads(line) for line in path.read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in ("seconds", "examples_per_s")} for r in records]


def test_interrupted_run_resumes_and_equals_an_uninterrupted_one(world, tmp_path):
    finetune(config(world, tmp_path / "a", epochs=3))

    def stop_after_first(record):
        if record["epoch"] == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        finetune(config(world, tmp_path / "b", epochs=3), on_epoch_end=stop_after_first)
    (name, run_b), = run_files(tmp_path / "b").items()
    assert (run_b / "state.pt").exists() and not (run_b / "train.json").exists()
    # What a kill at a bad moment leaves: a half-written temporary file and best weights no state names.
    (run_b / "state.pt.abc.tmp").write_bytes(b"torn")
    (run_b / "best-epoch9.pt").write_bytes(b"stale")
    epochs = []
    outcome = finetune(config(world, tmp_path / "b", epochs=3), on_epoch_end=lambda r: epochs.append(r["epoch"]))
    assert outcome.exit_code == EXIT_OK and epochs == [2, 3]
    run_a = run_files(tmp_path / "a")[name]  # same inputs, same directory name
    assert strip_times(run_a / "metrics.jsonl") == strip_times(run_b / "metrics.jsonl")
    train_a, train_b = (json.loads((r / "train.json").read_text()) for r in (run_a, run_b))
    assert train_a == train_b
    wa, wb = (load_checkpoint(r / train_a["best_file"]) for r in (run_a, run_b))
    for part in ("encoder", "head"):
        assert wa[part].keys() == wb[part].keys()
        assert all(torch.equal(wa[part][k], wb[part][k]) for k in wa[part])
    assert sorted(p.name for p in run_b.glob("*.pt")) == [train_a["best_file"]]
    assert not list(run_b.glob("*.tmp"))
    # the description names the resume (a run carried on elsewhere is reproducible nowhere)
    config_a, config_b = (json.loads((r / "config.json").read_text()) for r in (run_a, run_b))
    assert "resumes" not in config_a and config_b["config"] == config_a["config"]
    (resume,) = config_b["resumes"]
    assert resume["epoch"] == 1 and resume["changed"] == {} and resume["environment"]["cpu"] == cpu_model()


def test_a_kill_after_the_epoch_state_is_written_loses_no_metrics_line(world, tmp_path, monkeypatch):
    """Killed right after epoch 2's state.pt landed: the resumed log equals an uninterrupted one (the
    line is written before the state; one written after it would be lost for good)."""
    import xlt.finetune.trainer as trainer

    finetune(config(world, tmp_path / "a", epochs=3))
    real_save = trainer.save_checkpoint

    def killed_at_epoch_2_state(path, state):
        real_save(path, state)
        if str(path).endswith("state.pt") and state["epoch"] == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(trainer, "save_checkpoint", killed_at_epoch_2_state)
    with pytest.raises(KeyboardInterrupt):
        finetune(config(world, tmp_path / "b", epochs=3))
    monkeypatch.setattr(trainer, "save_checkpoint", real_save)
    assert finetune(config(world, tmp_path / "b", epochs=3)).exit_code == EXIT_OK
    (name, run_b), = run_files(tmp_path / "b").items()
    records = strip_times(run_b / "metrics.jsonl")
    assert [r["epoch"] for r in records] == [1, 2, 3]
    assert records == strip_times(run_files(tmp_path / "a")[name] / "metrics.jsonl")


def test_finished_runs_are_skipped_and_new_evaluations_need_no_training(world, tmp_path):
    out = tmp_path / "out"
    finetune(config(world, out))
    evals = {p: p.stat().st_mtime_ns for p in out.glob("runs/*/eval/*.json")}
    epochs = []
    outcome = finetune(config(world, out), on_epoch_end=epochs.append)
    assert epochs == [] and [r["worked"] for r in outcome.results["runs"]] == [False]
    assert {p: p.stat().st_mtime_ns for p in out.glob("runs/*/eval/*.json")} == evals
    # A test-time variant asked later is evaluated from the kept weights, without training.
    shift = write_shift(tmp_path / "shift.npz", "fr", "en", np.ones((3, 64), np.float32),
                        np.zeros((3, 64), np.float32), step=10)
    outcome = finetune(config(world, out, shift=[str(shift)], shift_layer=1, shift_alpha=[0.0, 0.5]),
                       on_epoch_end=epochs.append)
    run = outcome.results["runs"][0]
    assert epochs == [] and run["worked"] and run["shift_alpha"]["fr"] in (0.0, 0.5)
    assert len(list(out.glob("runs/*/eval/fr-dev-shift-*.json"))) == 2


def test_test_time_transforms(world, tmp_path):
    """Identity map and alpha 0 change nothing; a known shift or map changes layer outputs exactly."""
    run = PretrainedRun.load(world.run, "last")
    encoder = run.model.encoder
    D, L = encoder.config.d_model, encoder.config.n_layers
    ids = torch.tensor([model_input(run.text("fr").encode_lines(["le chat voit un chien ."])[0])])
    plain = encoder(ids, "fr", output_hidden_states=True).hidden_states
    map_dir = tmp_path / "map"
    map_dir.mkdir()
    (map_dir / "map.json").write_text(json.dumps({"format": "xlt-layer-map/1", "source": "en", "target": "fr",
                                                  "layers": [0, 1, 2]}))
    for layer in range(3):
        np.save(map_dir / f"W_layer{layer}.npy", np.eye(D, dtype=np.float32) * (1.0 if layer == 1 else 2.0))
    identity = load_map(str(map_dir), 1, "en", D, L)
    assert torch.equal(encoder(ids, "fr", layer_hook=identity.hook()).last_hidden_state, plain[-1])
    with torch.autocast("cpu", dtype=torch.bfloat16):  # as on a GPU: the map itself is applied in fp32
        assert torch.equal(encoder(ids, "fr", layer_hook=identity.hook()).last_hidden_state,
                           encoder(ids, "fr").last_hidden_state)
    doubled = load_map(str(map_dir), 0, "en", D, L)
    expected = encoder.encode_from(plain[0] * 2.0, "fr", 0).last_hidden_state
    assert torch.allclose(encoder(ids, "fr", layer_hook=doubled.hook()).last_hidden_state, expected, atol=1e-5)
    rng = np.random.default_rng(0)
    # with the languages' means beside it the map turns the state about them: (x - m_fr) W + m_en
    pair = rng.normal(size=(2, D)).astype(np.float32)
    np.save(map_dir / "means_layer0.npy", pair)
    centred = load_map(str(map_dir), 0, "en", D, L)
    assert centred.identity != doubled.identity   # a different transform is a different evaluation
    expected = encoder.encode_from((plain[0] - torch.from_numpy(pair[0])) * 2.0 + torch.from_numpy(pair[1]),
                                   "fr", 0).last_hidden_state
    assert torch.allclose(encoder(ids, "fr", layer_hook=centred.hook()).last_hidden_state, expected, atol=1e-5)
    np.save(map_dir / "means_layer0.npy", pair[:1])
    with pytest.raises(XltError, match=r"shape \[2, "):
        load_map(str(map_dir), 0, "en", D, L)
    means = {"en": rng.normal(size=(L + 1, D)).astype(np.float32), "fr": rng.normal(size=(L + 1, D)).astype(np.float32)}
    shift_path = write_shift(tmp_path / "shift.npz", "fr", "en", means["fr"], means["en"], run.step)
    shift = load_shift(str(shift_path), 1, "en", D, L, run.step)
    assert shift.target == "fr"
    assert torch.equal(encoder(ids, "fr", layer_hook=shift.hook(0.0)).last_hidden_state, plain[-1])
    delta = torch.from_numpy(means["en"][1] - means["fr"][1])
    shifted = encoder(ids, "fr", output_hidden_states=True, layer_hook=shift.hook(1.5)).hidden_states
    assert torch.allclose(shifted[1], plain[1] + 1.5 * delta, atol=1e-6)
    assert torch.allclose(shifted[-1], encoder.encode_from(plain[1] + 1.5 * delta, "fr", 1).last_hidden_state,
                          atol=1e-5)
    assert not torch.allclose(shifted[-1], plain[-1])
    with pytest.raises(XltError, match="towards the source"):
        load_shift(str(write_shift(tmp_path / "wrong.npz", "en", "fr", means["en"], means["fr"], run.step)),
                   1, "en", D, L, run.step)
    with pytest.raises(XltError, match="step 3"):
        load_shift(str(write_shift(tmp_path / "old.npz", "fr", "en", means["fr"], means["en"], 3)), 1, "en", D, L,
                   run.step)
    # End to end: the identity map and alpha 0 reproduce the plain numbers; alpha is chosen on fr dev.
    out = tmp_path / "out"
    outcome = finetune(config(world, out, map_dir=[str(map_dir)], map_layer=1, shift=[str(shift_path)],
                              shift_layer=1, shift_alpha=[0.0, 3.0]))
    results = outcome.results["runs"][0]["results"]
    assert results["map"]["fr"] == results["plain"]["fr"]
    dev_files = {json.loads(p.read_text())["params"]["alpha"]: json.loads(p.read_text())["metrics"]["accuracy"]
                 for p in out.glob("runs/*/eval/fr-dev-shift-*.json")}
    assert dev_files[0.0] == results["plain"]["fr"]["dev"]["accuracy"]
    chosen = outcome.results["runs"][0]["shift_alpha"]["fr"]
    assert dev_files[chosen] == max(dev_files.values()) and results["shift"]["fr"]["dev"]["accuracy"] == dev_files[chosen]


def fake_run(bs: int, seed: int, dev: float, fr: float, ru: float) -> dict:
    return {"status": "done", "grid_point": {"batch_size": bs, "encoder_lr": 1e-5, "head_lr": 1e-5}, "seed": seed,
            "source_dev": dev, "results": {"plain": {"en": {"dev": {"acc": dev}, "test": {"acc": dev - 1}},
                                                     "fr": {"test": {"acc": fr}}, "ru": {"test": {"acc": ru}}}}}


def test_bf16_is_its_own_run(world, tmp_path):
    out = tmp_path / "out"
    assert finetune(config(world, out, epochs=1)).exit_code == EXIT_OK
    outcome = finetune(config(world, out, epochs=1, precision="bf16"))
    assert outcome.exit_code == EXIT_OK and outcome.counts["done"] == 1
    configs = [json.loads((path / "config.json").read_text())["config"] for path in run_files(out).values()]
    assert sorted(c.get("precision", "fp32") for c in configs) == ["bf16", "fp32"]  # two directories


def test_selection_and_mean_of_best_two_by_hand():
    runs = [fake_run(4, 1, 80, 70, 60), fake_run(4, 2, 82, 72, 64),     # mean dev 81
            fake_run(8, 1, 84, 74, 50), fake_run(8, 2, 84, 76, 52),     # mean dev 84: selected
            fake_run(16, 1, 70, 90, 90), fake_run(16, 2, 72, 90, 90),   # mean dev 71: never chosen
            {"status": "failed", "grid_point": {"batch_size": 32, "encoder_lr": 1e-5, "head_lr": 1e-5}, "seed": 1}]
    s = selection.summarize(runs, "acc", "en", ["fr", "ru"])
    assert s["selected"]["grid_point"]["batch_size"] == 8
    table = s["selected"]["variants"]["plain"]
    assert table["fr"]["test"]["mean"] == 75 and table["fr"]["test"]["std"] == pytest.approx(math.sqrt(2))
    assert table["avg_targets"]["test"]["mean"] == pytest.approx((62 + 64) / 2)  # seeds: (74+50)/2, (76+52)/2
    assert s["best_two"]["grid_points"] == [runs[2]["grid_point"], runs[0]["grid_point"]]
    two = s["best_two"]["variants"]["plain"]
    # per seed: fr (74+70)/2 = 72 and (76+72)/2 = 74 -> mean 73, std sqrt(2); ru (50+60)/2 = 55, (52+64)/2 = 58
    assert two["fr"]["test"]["mean"] == 73 and two["fr"]["test"]["std"] == pytest.approx(math.sqrt(2))
    assert two["ru"]["test"]["mean"] == 56.5 and two["ru"]["test"]["std"] == pytest.approx(math.sqrt(4.5))
    assert two["en"]["dev"]["mean"] == pytest.approx(82.5)
    assert [g["source_dev"]["mean"] for g in s["grid"]] == [81, 84, 71] and len(s["grid"]) == 3
    single = selection.summarize(runs[:1], "acc", "en", ["fr", "ru"])
    assert single["selected"]["source_dev"] == {"mean": 80, "std": None, "n": 1}
    assert single["best_two"]["variants"]["plain"]["fr"]["test"]["mean"] == 70


def test_epochs_buckets_and_lengths(world):
    assert sorted(ordering.epoch_order(10, 0, 3, None)) == list(range(10))
    passes = [i for e in range(5) for i in ordering.epoch_order(10, e, 3, 4)]  # 20 draws = 2 full passes
    assert sorted(passes) == sorted(list(range(10)) * 2) and sorted(passes[:10]) == list(range(10))
    assert ordering.epoch_order(10, 2, 3, 4) == ordering.epoch_order(10, 2, 3, 4) != ordering.epoch_order(10, 2, 4, 4)
    run = PretrainedRun.load(world.run, "last")
    task = ToyTask()
    examples = task.read(str(world.split("en", "train")))
    sizes = ordering.example_sizes(task, examples, run.text("en"), ["animal", "thing"], 64)
    lengths = sizes.lengths
    assert lengths == [len(model_input(run.text("en").encode_lines([ex.text])[0])) for ex in examples]
    assert sizes.rows == [1] * len(examples)
    order = ordering.epoch_order(len(examples), 0, 1, None)
    buckets = ordering.bucketed(order, lengths, 8, 1, 0)
    assert sorted(buckets) == sorted(order)
    assert ordering.padding_fraction(lengths, buckets, 8) < ordering.padding_fraction(lengths, order, 8)
    ids = [i for b in ordering.ordered_batches(task, examples, buckets, run.text("en"), ["animal", "thing"], 8, 64)
           for i in b.batch.example_ids]
    assert ids == buckets
    assert ordering.evaluation_order([3, 5, 5, 1]) == [1, 2, 0, 3]


def test_schedule_config_and_layout():
    assert all(f.metadata.get("help") for f in dataclasses.fields(FinetuneConfig))
    linear = lr_factor("linear", 0.1, 20)  # 2 warm-up steps
    assert [linear(s) for s in (0, 1, 2, 11, 20, 25)] == [0.0, 0.5, 1.0, 0.5, 0.0, 0.0]
    assert lr_factor("constant", 0.1, 20)(7) == 1.0
    xnli = FinetuneConfig(task="xnli", model="m", output="o")
    grid = resolve_grid(xnli, TASKS["xnli"].recipe)
    assert len(grid) == 18 and grid[0].schedule == "constant" and grid[0].epoch_size == 20000
    assert (grid[0].batch_size, grid[0].encoder_lr, grid[0].head_lr) == (4, 1.25e-6, 5e-6)
    ner = resolve_grid(FinetuneConfig(task="ner", model="m", output="o", seeds=[1, 2]), TASKS["ner"].recipe)
    assert len(ner) == 12 and all(s.head_lr == s.encoder_lr for s in ner) and ner[0].schedule == "linear"
    assert default_path("xnli", "data", "fr", "test") == os.path.join("data", "xnli/test-fr.tsv")
    assert default_path("parse", "d", "en", "train") == os.path.join("d", "ud/en_ewt/en_ewt-ud-train.conllu")
    assert default_path("ner", "d", "zh", "dev").endswith("zh_gsdsimp-ud-dev.iob2")


def test_the_untrained_control_has_the_runs_architecture_and_fresh_weights(world, tmp_path):
    """--checkpoint untrained: the same vocabulary, config and text pipelines, none of the pretrained
    weights; its runs are named apart from the pretrained model's."""
    pretrained = experiment(config(world, tmp_path / "a", checkpoint="best")).pretrained
    control = experiment(config(world, tmp_path / "b", checkpoint="untrained")).pretrained
    assert control.config == pretrained.config and control.vocab.sha256 == pretrained.vocab.sha256
    trained, fresh = pretrained.model.state_dict(), control.model.state_dict()
    assert trained.keys() == fresh.keys()
    assert all(not torch.equal(trained[k], fresh[k]) for k in trained if k.endswith("qkv.weight"))
    again = experiment(config(world, tmp_path / "c", checkpoint="untrained")).pretrained.model.state_dict()
    assert all(torch.equal(fresh[k], again[k]) for k in fresh)  # one fixed initialisation
    finetune(config(world, tmp_path / "b", checkpoint="untrained", epochs=1))
    finetune(config(world, tmp_path / "a", checkpoint="best", epochs=1))
    assert {p.name for p in (tmp_path / "a" / "runs").iterdir()}.isdisjoint(
        p.name for p in (tmp_path / "b" / "runs").iterdir())
    with pytest.raises(XltError, match="--checkpoint must be one of best, last, untrained"):
        config(world, tmp_path / "d", checkpoint="random").validate()
