"""``--checkpoint step-N`` on a transformers Trainer's output directory: ``checkpoint-1000/`` and
``checkpoint-2000/`` (as the Trainer writes them) are a series, and ``step-1000`` picks the first, for
the analyses and for fine-tuning alike. A tiny random BERT (tests/hf_fixtures.py), offline."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never the network

import json  # noqa: E402
import shutil  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from conftest import run_in_process  # noqa: E402
from finetune_hf_data import task_args, write_task  # noqa: E402
from hf_fixtures import _bert  # noqa: E402

from xlt.loader.kinds import FinetuneUse, ModelChoice, kind_of  # noqa: E402
from xlt.loader.text_model import load_text_model  # noqa: E402
from xlt.model.weights import state_sha256  # noqa: E402
from xlt.model.spec import model_kind  # noqa: E402
from xlt.utils.errors import XltError  # noqa: E402

USE = FinetuneUse(pair_inputs=False, transforms=False, freeze_bottom=0, lang_embedding_at_test="target")


@pytest.fixture(scope="module")
def series(tmp_path_factory):
    """A Trainer's output: checkpoint-1000/ and checkpoint-2000/ (other weights), no model of its own."""
    from transformers import BertForMaskedLM

    root = tmp_path_factory.mktemp("trainer") / "out"
    root.mkdir()
    _bert(root / "checkpoint-1000")
    shutil.copytree(root / "checkpoint-1000", root / "checkpoint-2000")
    later = BertForMaskedLM.from_pretrained(root / "checkpoint-2000")
    with torch.no_grad():
        later.bert.embeddings.word_embeddings.weight.add_(0.5)
    later.save_pretrained(root / "checkpoint-2000")
    (root / "checkpoint-3000").mkdir()   # a folder without a model is no snapshot
    (root / "runs").mkdir()              # the Trainer's logs
    return root


def test_step_n_picks_the_trainers_checkpoint_folder(series):
    assert model_kind(str(series)) == "hf"
    first, second = (load_text_model(str(series), f"step-{n}") for n in (1000, 2000))
    direct = load_text_model(str(series / "checkpoint-1000"))
    assert first.source == os.path.abspath(series / "checkpoint-1000")
    assert first.weights_sha256() == direct.weights_sha256() != second.weights_sha256()


def test_fine_tuning_names_the_snapshot_it_starts_from(series):
    kind = kind_of(str(series))
    assert kind.name == "hf"
    choice = ModelChoice(str(series), "hf", "step-2000")
    kind.check(choice, USE)
    loaded = kind.for_finetuning(choice, USE)
    assert loaded.identity["checkpoint"] == "step-2000"
    assert loaded.source == loaded.identity["hf_model"] == os.path.abspath(series / "checkpoint-2000")
    assert loaded.identity["weights_sha256"] == state_sha256(load_text_model(str(series), "step-2000").base)


def test_a_missing_or_unnamed_snapshot_is_one_error(series):
    with pytest.raises(XltError, match=r"no checkpoint-3000 folder with a model.*step-1000, step-2000"):
        load_text_model(str(series), "step-3000")
    with pytest.raises(XltError, match=r"holds no model of its own.*step-1000, step-2000"):
        kind_of(str(series)).check(ModelChoice(str(series), "hf", "best"), USE)
    with pytest.raises(XltError, match="not from the hub"):
        kind_of("hf:some/model").check(ModelChoice("hf:some/model", "hf", "step-10"), USE)


def test_xlt_finetune_runs_from_a_snapshot(series, tmp_path, capsys):
    files = write_task(tmp_path, "ner", n_train=16, n_eval=8)
    out = tmp_path / "out"
    res = run_in_process(capsys, "finetune", "ner", "--model", series, "--checkpoint", "step-1000", "-o", out,
                         *task_args(files), "--batch-size", "8", "--encoder-lr", "1e-3", "--epochs", "1",
                         "--max-len", "64", "--device", "cpu", "--seeds", "1")
    assert res.returncode == 0, res.stderr
    results = json.loads((out / "results.json").read_text())
    assert results["model"] == os.path.abspath(series / "checkpoint-1000")
    assert results["model_identity"]["checkpoint"] == "step-1000" and results["complete"]
