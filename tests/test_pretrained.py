"""Loading a pretrained run: model, vocabulary and text pipeline agree with what training used."""

from __future__ import annotations

import shutil

import pytest
import torch
from pretrain_fixtures import TINY_RUN_STEPS

from xlt.pretrain.pretrained import PretrainedRun
from xlt.utils.errors import XltError


@pytest.fixture(scope="module")
def run_dir(tiny_run):
    return tiny_run


def test_load_restores_the_trained_weights(run_dir):
    run = PretrainedRun.load(run_dir, "last")
    saved = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=False)["model"]
    for name, tensor in run.model.state_dict().items():
        assert torch.equal(tensor, saved[name]), name
    assert run.languages == ["en", "fr"] and run.step == TINY_RUN_STEPS
    assert not run.model.training


def test_text_pipeline_matches_the_training_ids(run_dir):
    run = PretrainedRun.load(run_dir)
    ids = run.text("fr").encode_lines(["le chat voit un chien ."])
    assert ids == [[run.vocab.index(w) for w in "le chat voit un chien .".split()]]
    words, starts = run.text("en").encode_words(["the", "cat", "sees"])
    assert starts == [0, 1, 2] and words == [run.vocab.index(w) for w in ("the", "cat", "sees")]


def test_unknown_language_and_broken_run_dirs(run_dir, tmp_path):
    run = PretrainedRun.load(run_dir)
    with pytest.raises(XltError, match="not one of this model's"):
        run.text("de")
    with pytest.raises(XltError, match="not a pretrained run directory"):
        PretrainedRun.load(tmp_path)
    broken = tmp_path / "broken"
    shutil.copytree(run_dir, broken)
    (broken / "vocab").write_text("other 1\n")
    with pytest.raises(XltError, match="does not match"):
        PretrainedRun.load(broken)
