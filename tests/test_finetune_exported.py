"""``xlt finetune`` on an xlt run exported with ``xlt export hf``: an XLM model with language embeddings
(``lang2id``), the one kind of transformers model whose inputs carry a language id.

A tiny en/fr BPE run is pretrained and exported (as tests/test_export.py does), then fine-tuned through the
CLI's own entry point on the toy NER task of tests/finetune_hf_data.py. What is held: it learns; every
call of the XLM model gets ``langs`` filled with one id, English's while training, the target's when a
target is evaluated (``--lang-embedding-at-test target``, the default) and English's with ``source``
(evaluated again, not trained again); results.json names the exported directory as the model.
Offline: nothing is downloaded.
"""

from __future__ import annotations

import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never the network (subprocesses inherit it)

import pytest  # noqa: E402
import torch  # noqa: E402
from conftest import run_xlt  # noqa: E402
from finetune_hf_data import task_args, write_task  # noqa: E402
from pretrain_fixtures import tiny_args  # noqa: E402
from test_export import _bpe_inputs  # noqa: E402
from test_finetune_hf import TRAIN, in_process  # noqa: E402

from xlt.model.hf_finetune import HFEncoder  # noqa: E402


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    root = tmp_path_factory.mktemp("exported")
    inputs = _bpe_inputs(root / "inputs")
    run_xlt("pretrain", "--run-dir", root / "run", *inputs, *tiny_args(4), check=True)
    run_xlt("export", "hf", root / "run", "-o", root / "hf", check=True)
    return root / "hf"


pytestmark = pytest.mark.usefixtures("one_torch_thread")


class Calls(list):
    inputs: list


@pytest.fixture
def calls(monkeypatch):
    """Every call of the exported XLM model through xlt's encoder: (training, language asked for, the
    language-embedding language asked for, the distinct ``langs`` ids the model received)."""
    from transformers.models.xlm.modeling_xlm import XLMModel

    seen, record = [], Calls()
    model_forward, encoder_forward = XLMModel.forward, HFEncoder.forward

    def xlm(self, *args, **kwargs):
        langs = kwargs.get("langs")
        # XLM would add type ids through its word embeddings: its models are trained without them
        assert kwargs.get("token_type_ids") is None
        seen.append(None if langs is None else sorted(set(langs.flatten().tolist())))
        ids = kwargs["input_ids"]
        mask = kwargs.get("attention_mask", torch.ones_like(ids)).bool()   # none when nothing is padded
        inputs.extend(row[keep].tolist() for row, keep in zip(ids, mask))
        return model_forward(self, *args, **kwargs)

    def encoder(self, ids, lang, padding_mask=None, layer_hook=None, lang_embedding=None):
        before = len(seen)
        out = encoder_forward(self, ids, lang, padding_mask, layer_hook=layer_hook, lang_embedding=lang_embedding)
        (langs,) = seen[before:]   # one model call per encoder call
        record.append((self.training, lang, lang_embedding, langs))
        return out

    inputs: list[list[int]] = []
    monkeypatch.setattr(XLMModel, "forward", xlm)
    monkeypatch.setattr(HFEncoder, "forward", encoder)
    record.inputs = inputs   # every row the model was given, padding left out
    return record


def test_the_exported_model_fine_tunes_with_its_language_embeddings(exported, tmp_path, capsys, calls):
    config = json.loads((exported / "config.json").read_text())
    lang2id = config["lang2id"]
    assert config["model_type"] == "xlm" and config["use_lang_emb"] and set(lang2id) == {"en", "fr"}
    files = write_task(tmp_path / "data", "ner")
    out = tmp_path / "out"
    args = ["finetune", "ner", "--model", exported, "-o", out, *task_args(files), *TRAIN, "--epochs", "8"]
    res = in_process(capsys, *args)
    assert res.returncode == 0, res.stderr
    assert f"model {exported}," in res.stderr

    training = [c for c in calls if c[0]]
    evaluation = [c for c in calls if not c[0]]
    assert training and all(lang == "en" and langs == [lang2id["en"]] for _, lang, _, langs in training)
    by_lang = {lang: {tuple(langs) for _, l, _, langs in evaluation if l == lang} for lang in ("en", "fr")}
    assert by_lang == {"en": {(lang2id["en"],)}, "fr": {(lang2id["fr"],)}}   # each target under its own id

    results = json.loads((out / "results.json").read_text())
    assert results["complete"] and results["model"] == str(exported)
    identity = results["model_identity"]
    assert identity["hf_model"] == str(exported) and identity["model_type"] == "xlm"
    assert results["test_time"]["lang_embedding_at_test"] == "target"
    (run,) = results["runs"]
    dev = run["results"]["plain"]["en"]["dev"]["f1"]
    # All-O scores 0: the toy task is learned through the exported encoder. Measured (8 epochs): 89.0-96.3
    # over seeds 12-15 and forced kernel paths (ATEN_CPU_CAPABILITY=avx2|default, ONEDNN_MAX_CPU_ISA=AVX2,
    # MKL_CBWR=COMPATIBLE); 4 epochs gave 33.7-56.6, on both sides of the 40 asserted then.
    assert dev > 70, dev

    # --lang-embedding-at-test source: the same trained run, fr evaluated under English's id
    calls.clear()
    res = in_process(capsys, *args, "--lang-embedding-at-test", "source")
    assert res.returncode == 0, res.stderr
    assert not any(training for training, *_ in calls)                          # nothing trained again
    fr = {tuple(langs) for _, lang, emb, langs in calls if lang == "fr"}
    assert fr == {(lang2id["en"],)} and all(emb == "en" for _, lang, emb, _ in calls if lang == "fr")
    again = json.loads((out / "results.json").read_text())
    assert again["test_time"]["lang_embedding_at_test"] == "source"
    assert again["runs"][0]["results"]["plain"]["en"] == run["results"]["plain"]["en"]


def test_pairs_are_xlms_own_layout_with_langs_and_no_segment_ids(exported, tmp_path, capsys, calls):
    """XNLI: ``</s> a </s> b </s>`` as the exported tokenizer lays a pair out, the target's language id
    over the whole pair, no type ids (the tokenizer's ``0 0 0 1 1`` would be added through XLM's word
    embeddings, which its pretraining never did)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(exported)
    lang2id = json.loads((exported / "config.json").read_text())["lang2id"]
    files = write_task(tmp_path / "data", "xnli", n_train=64, n_eval=16)
    out = tmp_path / "out"
    res = in_process(capsys, "finetune", "xnli", "--model", exported, "-o", out, *task_args(files), *TRAIN,
                     "--epochs", "1", "--epoch-size", "64")
    assert res.returncode == 0, res.stderr
    sep = tok.sep_token_id
    assert all(ids[0] == ids[-1] == sep and ids.count(sep) == 3 for ids in calls.inputs)
    premise, hypothesis = files["train.en"].read_text().splitlines()[0].split("\t")[:2]
    assert tok(premise, hypothesis)["input_ids"] in calls.inputs   # English: the tokenizer's own Moses rules
    assert {tuple(langs) for _, lang, _, langs in calls if lang == "fr"} == {(lang2id["fr"],)}
    results = json.loads((out / "results.json").read_text())
    assert results["model"] == str(exported) and results["complete"]
