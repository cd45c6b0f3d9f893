"""Loading a pretrained run: model, vocabulary and text pipeline agree with what training used."""

from __future__ import annotations

import shutil

import pytest
import torch
from pretrain_fixtures import TINY_RUN_STEPS

from xlt.model.xlt_run import PretrainedRun
from xlt.text.pipeline import TextPipeline
from xlt.text.tokenize import Tokenizer
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


class CountingTokenizer(Tokenizer):
    def __init__(self, lang: str):
        super().__init__(lang)
        self.calls: list[str] = []

    def tokenize(self, line: str) -> str:
        self.calls.append(line)
        return super().tokenize(line)


def test_encode_words_tokenizes_each_distinct_word_once(run_dir):
    """Word-by-word tokenizing is remembered per word: same ids, one tokenizer call per distinct word."""
    run = PretrainedRun.load(run_dir)
    plain = run.text("en")
    counting = CountingTokenizer("en")
    text = TextPipeline("en", plain.vocab, counting, codes=None)
    words = ["the", "cat", "sees", "the", "cat", "“the”"]
    ids, starts = text.encode_words(words)
    again = text.encode_words(words[::-1])
    assert (ids, starts) == plain.encode_words(words) and again == plain.encode_words(words[::-1])
    assert sorted(counting.calls) == sorted(set(words))


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


def test_a_checkpoint_of_another_network_is_refused_in_one_line(run_dir, tmp_path):
    """E.g. a run written before xlt's MLM head lost BERT's dense + LayerNorm transform."""
    from conftest import assert_one_line_error, run_xlt

    old = tmp_path / "old"
    shutil.copytree(run_dir, old)
    path = old / "checkpoints" / "best.pt"
    state = torch.load(path, weights_only=False)
    state["model"]["head.dense.weight"] = torch.zeros(2, 2)
    torch.save(state, path)
    with pytest.raises(XltError, match=r"do not fit this network \(unexpected head\.dense\.weight\)"):
        PretrainedRun.load(old)
    del state["model"]["head.dense.weight"], state["model"]["head.output_bias.bias"]
    state["model"]["encoder.embedding_norm.weight"] = torch.zeros(3)
    torch.save(state, path)
    with pytest.raises(XltError, match=r"missing head\.output_bias\.bias\)"):
        PretrainedRun.load(old)
    state["model"]["head.output_bias.bias"] = torch.zeros(3)
    torch.save(state, path)
    with pytest.raises(XltError, match="do not fit this network.*size mismatch"):
        PretrainedRun.load(old)
    text = tmp_path / "in.txt"
    text.write_text("the cat sees a dog .\n")
    assert_one_line_error(run_xlt("extract", "--model", str(old), "--lang", "en", str(text), "-o", str(tmp_path / "x")),
                          str(path), "do not fit this network")


def test_the_kind_registry_tells_each_model_kind_and_reads_a_runs_languages(run_dir, tmp_path):
    """One registry (xlt.loader.kinds) for analyses and fine-tuning: an xlt run is found by its files,
    its languages read without its weights, in its model's order; static vectors are no TextModel."""
    from xlt.loader.kinds import kind_of
    from xlt.loader.text_model import load_text_model
    from xlt.model.xlt_run import run_languages

    assert kind_of(str(run_dir)).name == "xlt" and kind_of("static:w2v.txt").name == "static"
    assert kind_of("hf:bert-base-multilingual-cased").name == "hf"
    assert run_languages(run_dir) == PretrainedRun.load(run_dir).languages == ["en", "fr"]
    assert load_text_model(str(run_dir), "last").step == TINY_RUN_STEPS
    with pytest.raises(XltError, match="static model has no text model"):
        load_text_model(f"static:{tmp_path / 'w2v.txt'}")
    with pytest.raises(XltError, match="no such model directory"):   # the analyses' own line
        load_text_model(str(tmp_path / "nowhere"))
