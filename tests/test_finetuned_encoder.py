"""``--finetuned RUN``: the analyses read a fine-tuning run's encoder, and ``xlt align sentence --map
none`` measures one joint space as it is (how much of the languages' alignment fine-tuning leaves).

The fine-tuned encoder is checked against the run itself: with the run's saved head it must give the
predictions the run wrote, its frozen (language-specific) parts must be the pretrained ones, and the
trained ones must have moved.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import assert_one_line_error, run_in_process, run_xlt
from finetune_toy import build_toy_world, write_nli

from xlt.analysis.align_parallel import align_sentence
from xlt.analysis.align_settings import AlignSettings
from xlt.analysis.extract import sentence_vectors
from xlt.analysis.procrustes import iterative_normalization
from xlt.finetune.registry import get_task
from xlt.loader.finetuned import chosen_run, with_finetuned_encoder
from xlt.loader.text_model import load_text_model
from xlt.model.checkpoint_io import load_checkpoint
from xlt.utils.errors import XltError

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_toy_world(tmp_path_factory.getbasetemp() / "finetune-world")


@pytest.fixture(scope="module")
def nli(tmp_path_factory) -> dict[tuple[str, str], Path]:
    root = tmp_path_factory.mktemp("nli")
    return {(lang, split): write_nli(root / f"{split}-{lang}.tsv", n, seed, lang)
            for lang in ("en", "fr") for split, n, seed in (("train", 48, 20), ("dev", 12, 21), ("test", 30, 22))}


def finetune(world, nli, out: Path, checkpoint: str, seeds: str = "1") -> Path:
    """XNLI runs at a learning rate that moves the tiny encoder; the first seed's run directory. An epoch
    is one pass over the 48 pairs: XNLI's default epoch of 20,000 pairs made this module's set-up ~3 min."""
    res = run_xlt("finetune", "xnli", "--model", world.run, "-o", out, "--checkpoint", checkpoint,
                  "--train", "en", nli["en", "train"], "--dev", "en", nli["en", "dev"],
                  "--eval", "en", nli["en", "dev"], nli["en", "test"],
                  "--eval", "fr", nli["fr", "dev"], nli["fr", "test"], "--batch-size", "8",
                  "--encoder-lr", "1e-2", "--head-lr", "1e-2", "--epochs", "2", "--epoch-size", "48",
                  "--seeds", seeds)
    assert res.returncode == 0, res.stderr
    (run,) = (out / "runs").glob(f"*-seed{seeds.split(',')[0]}-*")
    return run


@pytest.fixture(scope="module")
def runs(world, nli, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("finetuned")
    first = finetune(world, nli, root / "last", "last")
    # a second invocation adds seed 2 and finds seed 1's run done earlier
    assert finetune(world, nli, root / "last", "last", seeds="1,2") == first
    return {"last": first, "untrained": finetune(world, nli, root / "untrained", "untrained")}


def test_the_encoder_and_the_runs_head_give_the_runs_own_predictions(world, nli, runs):
    run = runs["last"]
    model = load_text_model(str(world.run), "last", "cpu", finetuned=str(run))
    best_file = json.loads((run / "train.json").read_text())["best_file"]
    assert model.describe()["model"] == f"finetuned:{run.resolve()}/{best_file}"
    config = json.loads((run / "config.json").read_text())["config"]
    task = get_task("xnli")
    head = task.make_head(model.d_model, config["labels"])
    head.load_state_dict(load_checkpoint(run / json.loads((run / "train.json").read_text())["best_file"])["head"])
    head.eval()
    examples = task.read(str(nli["fr", "test"]))
    predicted = {}
    with torch.no_grad():
        for batch in task.batches(examples, model.text("fr"), config["labels"], 8, 128, False, None):
            hidden = model.model.encoder(batch.input_ids, "fr", batch.padding_mask).last_hidden_state
            for i, label in zip(batch.example_ids, head.decode(head(hidden, batch), batch)):
                predicted[i] = label
    written = [line.split("\t")[2] for line in (run / "predictions" / "test.fr.tsv").read_text().splitlines()[1:]]
    assert [predicted[i] for i in range(len(examples))] == written
    # The command's output directory reads as its selected setting's first seed: this run, also once a
    # later invocation has added a seed (and left this one "done earlier", not "worked").
    output = load_text_model(str(world.run), "last", "cpu", finetuned=str(run.parent.parent))
    assert output.describe() == model.describe()


def hypotheses(path: Path) -> list[str]:
    return [line.split("\t")[1] for line in path.read_text(encoding="utf-8").splitlines()]


def twin_hypotheses(nli) -> tuple[list[str], list[str]]:
    """The test hypotheses of both languages as retrieval reads them: repeated pairs once."""
    pairs = list(dict.fromkeys(zip(hypotheses(nli["en", "test"]), hypotheses(nli["fr", "test"]))))
    return [en for en, _ in pairs], [fr for _, fr in pairs]


def test_frozen_parts_are_the_pretrained_ones_and_trained_ones_moved(world, runs):
    """The toy run separates the token embeddings and layer 1, which fine-tuning leaves frozen: they are
    the pretrained model's (or, for the control, the random one's), every other tensor the run's."""
    pretrained = load_text_model(str(world.run), "last")
    for name, start in (("last", pretrained.model), ("untrained", pretrained.random_like(0).model)):
        run = runs[name]
        trained = load_checkpoint(run / json.loads((run / "train.json").read_text())["best_file"])["encoder"]
        finetuned = load_text_model(str(world.run), "best" if name == "untrained" else "last", finetuned=str(run))
        before = dict(start.encoder.named_parameters())
        after = dict(finetuned.model.encoder.named_parameters())
        frozen = set(after) - set(trained)
        assert frozen and {n for n, _ in start.encoder.language_specific_parameters()} == frozen
        assert all(torch.equal(after[n], before[n]) for n in frozen)
        assert all(torch.equal(after[n], trained[n]) for n in trained)
        assert any(not torch.equal(after[n], before[n]) for n in trained)


def test_a_run_that_does_not_fit_is_one_error_line(world, runs, tiny_run, tmp_path):
    run = runs["last"]
    with pytest.raises(XltError, match="give --checkpoint last"):
        load_text_model(str(world.run), "best", finetuned=str(run))
    with pytest.raises(XltError, match="fine-tuned from another model"):
        load_text_model(str(tiny_run), "last", finetuned=str(run))
    with pytest.raises(XltError, match="neither a run directory of xlt finetune"):
        load_text_model(str(world.run), "last", finetuned=str(world.run / "checkpoints"))
    unfinished = shutil.copytree(run, tmp_path / "unfinished")
    (unfinished / "train.json").unlink()
    with pytest.raises(XltError, match="has not finished training"):
        load_text_model(str(world.run), "last", finetuned=str(unfinished))
    dropped = shutil.copytree(run, tmp_path / "dropped")
    for best in dropped.glob("best-epoch*.pt"):
        best.unlink()
    with pytest.raises(XltError, match="weights were not kept"):
        load_text_model(str(world.run), "last", finetuned=str(dropped))


def test_extract_records_the_finetuned_encoder(world, nli, runs, tmp_path, capsys):
    text = tmp_path / "fr.txt"
    text.write_text("\n".join(hypotheses(nli["fr", "test"])) + "\n", encoding="utf-8")
    res = run_in_process(capsys, "extract", "--model", str(world.run), "--checkpoint", "last", "--lang", "fr",
                         "--finetuned", str(runs["last"]), str(text), "-o", str(tmp_path / "reps"))
    assert res.returncode == 0, res.stderr
    header = json.loads((tmp_path / "reps.json").read_text())
    assert header["model"].startswith(f"finetuned:{runs['last'].resolve()}/best-epoch")
    expected = sentence_vectors(load_text_model(str(world.run), "last", finetuned=str(runs["last"])), "fr",
                                hypotheses(nli["fr", "test"]))
    assert np.allclose(np.load(tmp_path / "reps.npy"), expected, atol=1e-6)
    res = run_in_process(capsys, "extract", "--model", str(world.run), "--lang", "fr", "--finetuned",
                         str(tmp_path), str(text), "-o", str(tmp_path / "other"))
    assert_one_line_error(res, "neither a run directory of xlt finetune")
    res = run_in_process(capsys, "extract", "--model", str(world.run), "--checkpoint", "last", "--lang", "fr",
                         "--finetuned", str(runs["last"]), "--random-init", "3", str(text), "-o", str(tmp_path / "r"))
    assert_one_line_error(res, "--random-init and --finetuned exclude each other")


def brute_force_p_at_1(x: np.ndarray, y: np.ndarray) -> float:
    """Target -> source P@1 by cosine after each side's iterative normalization, one query at a time."""
    x, y = iterative_normalization(x, 5), iterative_normalization(y, 5)
    hits = 0
    for i, query in enumerate(y):
        scores = [float(query @ row / (np.linalg.norm(query) * np.linalg.norm(row))) for row in x]
        hits += int(np.argmax(scores)) == i
    return hits / len(y)


def test_sentence_retrieval_without_a_map_is_the_brute_force_one(world, nli, runs):
    settings = AlignSettings(checkpoint="last", device="cpu", finetuned=str(runs["last"]))
    result = align_sentence(str(world.run), "en", "fr", [], str(nli["en", "test"]), str(nli["fr", "test"]),
                            layers=[0, 1, 2], settings=settings, map_kind="none", test_columns=(2,))
    assert result["source"]["model"] == result["target"]["model"] == f"finetuned:{runs['last'].resolve()}/" + \
        json.loads((runs["last"] / "train.json").read_text())["best_file"]
    en, fr = twin_hypotheses(nli)
    assert result["map"] == "none" and result["n_train"] == 0 and result["test"]["pairs"] == len(en) > 20
    model = load_text_model(str(world.run), "last", finetuned=str(runs["last"]))
    X = sentence_vectors(model, "en", en, layers=[0, 1, 2])
    Y = sentence_vectors(model, "fr", fr, layers=[0, 1, 2])
    expected = [brute_force_p_at_1(X[k], Y[k]) for k in range(3)]
    assert result["p_at_1"] == pytest.approx(expected)
    assert result["settings"]["finetuned"] == str(runs["last"])


def test_sentence_map_options_are_checked(world, nli, capsys):
    files = [str(nli["en", "test"]), str(nli["fr", "test"])]
    sides = ["align", "sentence", "--model", str(world.run), "--checkpoint", "last", "--source-lang", "en",
             "--target-lang", "fr"]
    res = run_in_process(capsys, *sides, "--test", *files)
    assert_one_line_error(res, "--map procrustes learns its map from --train pairs")
    res = run_in_process(capsys, *sides, "--map", "none", "--train", *files, "--test", *files)
    assert_one_line_error(res, "--map none learns no map")
    # One language against itself, no map: every sentence finds itself; .tsv test files give --test-columns.
    res = run_in_process(capsys, *sides[:-1], "en", "--map", "none", "--test-columns", "1,2", "--test", files[0],
                         files[0])
    assert res.returncode == 0, res.stderr
    result = json.loads(res.stdout)
    sentences = {part for line in nli["en", "test"].read_text().splitlines() for part in line.split("\t")[:2]}
    assert result["test"]["pairs"] == len(sentences) > 30 and result["p_at_1"] == [1.0] * len(result["layers"])
    res = run_in_process(capsys, "align", "word", "--emb-a", files[0], "--source-lang", "en", "--target-lang", "fr",
                         "--finetuned", str(world.run), "--test-dict", files[0])
    assert_one_line_error(res, "--finetuned goes with --model")
    # options an embedding file (or --no-csls) leaves unused are refused, not recorded as settings
    emb = ["align", "word", "--emb-a", files[0], "--source-lang", "en", "--target-lang", "fr", "--test-dict", files[0]]
    assert_one_line_error(run_in_process(capsys, *emb, "--checkpoint", "last"), "--checkpoint is for --model")
    assert_one_line_error(run_in_process(capsys, *emb, "--no-csls", "--csls-k", "3"),
                          "--csls-k is CSLS's neighbourhood and --no-csls leaves it out")


def test_an_output_directory_reads_its_selected_settings_first_seed(tmp_path, tiny_run):
    """chosen_run on results.json alone: the selected grid point (not the first one listed) and its first
    seed, which must have finished; a damaged file is one error line."""
    def results(runs: list, selected: dict) -> Path:
        out = tmp_path / f"out{len(list(tmp_path.iterdir()))}"
        out.mkdir()
        (out / "results.json").write_text(json.dumps({"summary": {"selected": {"grid_point": selected}}, "runs": runs}))
        return out

    small, large = {"encoder_lr": 1e-4}, {"encoder_lr": 1e-3}
    grid = [{"dir": "runs/small-seed1", "grid_point": small, "status": "done"},
            {"dir": "runs/large-seed1", "grid_point": large, "status": "done", "worked": False},
            {"dir": "runs/large-seed2", "grid_point": large, "status": "done", "worked": True}]
    out = results(grid, large)
    assert chosen_run(str(out)) == str(out / "runs/large-seed1")
    failed = [grid[0], {**grid[1], "status": "failed"}, grid[2]]
    with pytest.raises(XltError, match="first run .*large-seed1.* did not finish"):
        chosen_run(str(results(failed, large)))
    for damaged in ({"summary": [1], "runs": grid}, {"summary": {"selected": {"grid_point": large}}, "runs": 3}):
        out = tmp_path / f"damaged{len(list(tmp_path.iterdir()))}"
        out.mkdir()
        (out / "results.json").write_text(json.dumps(damaged))
        with pytest.raises(XltError, match="no run of the selected setting"):
            chosen_run(str(out))
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"config": [1]}))
    with pytest.raises(XltError, match="records no checkpoint_sha256"):
        with_finetuned_encoder(load_text_model(str(tiny_run)), "best", str(run))
