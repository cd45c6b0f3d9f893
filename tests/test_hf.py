"""Hugging Face models through the TextModel seam: a tiny random BERT (WordPiece) and XLM-R (SentencePiece
Unigram), built from configs and vocabularies made in the test (tests/hf_fixtures.py), saved to a temporary
directory and run through ``xlt extract``, ``xlt cka compare`` and ``xlt shift-decode``. Offline: no hub, no download.
"""

from __future__ import annotations

import json
import shutil
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never the network (subprocesses inherit it)

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import synthetic  # noqa: E402
import torch  # noqa: E402
from conftest import assert_one_line_error, run_xlt  # noqa: E402
from hf_fixtures import build_models, write_texts  # noqa: E402

from xlt.analysis.extract import sentence_vectors, word_vectors  # noqa: E402
from xlt.loader.text_model import load_text_model  # noqa: E402
from xlt.model.xlt_run import pad_inputs  # noqa: E402


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return build_models(tmp_path_factory.mktemp("hf"))


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    return write_texts(tmp_path_factory.mktemp("hf-text"))


@pytest.mark.parametrize("name", ["bert", "xlmr"])
def test_sentence_and_word_vectors_are_means_of_the_models_own_states(models, name):
    from transformers import AutoModel

    model = load_text_model(str(models / name))
    reference = AutoModel.from_pretrained(models / name).eval()
    lines = ["the small cat sees the garden .", "a dog ."]
    X = sentence_vectors(model, "en", lines, batch_size=2)
    assert X.shape == (4, 2, 32)
    words = [line.split() for line in lines]
    W, index = word_vectors(model, "en", words, pooling="mean")
    F, _ = word_vectors(model, "en", words, pooling="first")
    for i, line in enumerate(lines):  # one unpadded sentence at a time, through transformers directly
        encoded = model.tokenizer(line, return_tensors="pt")
        with torch.no_grad():
            states = torch.stack(reference(**encoded, output_hidden_states=True).hidden_states)[:, 0]
        np.testing.assert_allclose(X[:, i], states[:, 1:-1].mean(1), atol=1e-5)
        ids, starts = model.encode_words("en", words[i])
        assert len(starts) == len(words[i]) == index.counts()[i]
        garden = words[i].index("garden") if "garden" in words[i] else None
        if garden is not None:  # a word of several pieces: mean over them, or its first piece
            s, e = starts[garden] + 1, starts[garden + 1] + 1
            assert e - s > 1
            np.testing.assert_allclose(W[:, index.rows(i)][:, garden], states[:, s:e].mean(1), atol=1e-5)
            np.testing.assert_allclose(F[:, index.rows(i)][:, garden], states[:, s], atol=1e-5)


def test_xlt_extract_on_a_transformers_directory(models, texts, tmp_path):
    run_xlt("extract", "--model", models / "xlmr", "--lang", "en", "--level", "word", "--layers", "0,3",
            texts["en"], "-o", tmp_path / "w", check=True)
    header = json.loads((tmp_path / "w.json").read_text())
    assert header["kind"] == "hf" and header["run"] == str(models / "xlmr") and header["step"] is None
    vectors = np.load(tmp_path / "w.npy")
    n_words = sum(len(line.split()) for line in texts["en"].read_text().splitlines())
    assert vectors.shape == (2, n_words, 32) and np.isfinite(vectors).all()
    run_xlt("extract", "--model", models / "bert", "--lang", "en", "--random-init", "3", texts["en"],
            "-o", tmp_path / "r", check=True)
    assert json.loads((tmp_path / "r.json").read_text())["model"] == "random:3"


def test_cka_compare_on_transformers_models(models, texts, tmp_path):
    common = ["--lang-a", "en", "--text-a", texts["en"], "--lang-b", "fr", "--text-b", texts["fr"]]
    run_xlt("cka", "compare", "--model-a", models / "bert", *common, "-o", tmp_path / "bi", check=True)
    run_xlt("cka", "compare", "--model-a", models / "bert", "--model-b", models / "xlmr", *common,
            "-o", tmp_path / "two", check=True)
    bi, two = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("bi", "two"))
    assert bi["layers"] == two["layers"] == [0, 1, 2, 3]
    assert all(0.0 <= v <= 1.0 + 1e-9 for v in bi["cka"] + two["cka"])
    assert bi["b"]["run"] == str(models / "bert") and two["b"]["run"] == str(models / "xlmr")
    assert bi["cka"] != two["cka"]


def test_shift_decoding_adds_the_vector_at_the_right_layer(models):
    """The hook-based shift of a transformers model against the layers run by hand."""
    from xlt.analysis.shift import LanguageShift, language_mean, shift_decode

    model = load_text_model(str(models / "bert"))
    en, fr = synthetic.corpus(10, seed=2)
    shift = LanguageShift("en", "fr", language_mean(model, "en", en)[0], language_mean(model, "fr", fr)[0], {})
    line = "the old cat sees a garden ."
    decoded = dict(shift_decode(model, shift, [line], [(0, 0.0), (1, 2.0), (3, 2.0)]))[0]
    ids = torch.tensor([model.wrap(model.encode_lines("en", [line])[0])])
    bert, head = model.model.bert, model.model.cls
    with torch.no_grad():
        states = bert(ids, output_hidden_states=True).hidden_states
        assert decoded[(0, 0.0)] == head(states[-1]).argmax(-1)[0, 1:-1].tolist()  # no shift: the plain MLM
        for layer in (1, 3):
            hidden = states[layer] + 2.0 * torch.as_tensor(shift.difference(layer))
            for block in bert.encoder.layer[layer:]:
                out = block(hidden)
                hidden = out[0] if isinstance(out, tuple) else out
            assert decoded[(layer, 2.0)] == head(hidden).argmax(-1)[0, 1:-1].tolist()


def _shift_file(model, texts, tmp_path, cli: bool):
    """means (en, fr) + shift of ``model``: through the CLI, or in-process (fewer interpreter start-ups)."""
    from xlt.analysis.shift import LanguageShift, compute_means

    for lang in ("en", "fr"):
        if cli:
            run_xlt("shift-decode", "means", "--model", model, "--lang", lang, texts[lang],
                    "-o", tmp_path / f"{lang}.npz", check=True)
        else:
            compute_means(str(model), lang, str(texts[lang]), str(tmp_path / f"{lang}.npz"))
    LanguageShift.from_means(str(tmp_path / "en.npz"), str(tmp_path / "fr.npz")).save(str(tmp_path / "shift.npz"))


@pytest.mark.parametrize("name", ["bert", "xlmr"])
def test_shift_decode_translate_end_to_end(models, texts, tmp_path, name):
    model = models / name
    _shift_file(model, texts, tmp_path, cli=name == "bert")
    assert json.loads(str(np.load(tmp_path / "en.npz")["header"]))["run"] == str(model)
    common = ["translate", "--model", model, "--shift", tmp_path / "shift.npz", "--input", texts["en"],
              "--reference", texts["fr"], "--layers", "2,3", "--alphas", "1,3", "-o", tmp_path / "out.json"]
    res = run_xlt("shift-decode", *common)
    assert_one_line_error(res, "--token-set")  # a transformers model records no per-language vocabulary
    run_xlt("shift-decode", *common, "--token-set", "en", texts["en"], "--token-set", "fr", texts["fr"], check=True)
    result = json.loads((tmp_path / "out.json").read_text())
    assert result["run"] == str(model) and len(result["grid"]) == 4
    assert all(0.0 <= row["bleu1"] <= 100.0 for row in result["grid"])
    assert result["token_sets"]["shared"] > 0 and result["samples"]


def test_bad_models_are_one_error_line(models, texts, tmp_path):
    neither = tmp_path / "neither"
    neither.mkdir()
    (neither / "notes.txt").write_text("x\n")
    extract = ["extract", "--lang", "en", texts["en"], "-o", tmp_path / "x"]
    assert_one_line_error(run_xlt(*extract[:1], "--model", neither, *extract[1:]), "neither an xlt run directory")
    assert_one_line_error(run_xlt(*extract[:1], "--model", models / "notok", *extract[1:]), "no tokenizer")
    assert_one_line_error(run_xlt(*extract[:1], "--model", tmp_path / "absent", *extract[1:]), "no such model")
    # Offline (HF_HUB_OFFLINE=1) and not in the cache: one line, no download attempted.
    assert_one_line_error(run_xlt(*extract[:1], "--model", "hf:xlt-tests/not-cached", *extract[1:]),
                          "hf:xlt-tests/not-cached", "not in the local Hugging Face cache", "HF_HUB_OFFLINE is set",
                          "--model DIR")
    _shift_file(models / "bare", texts, tmp_path, cli=False)  # an encoder without a head still gives means ...
    res = run_xlt("shift-decode", "translate", "--model", models / "bare", "--shift", tmp_path / "shift.npz",
                  "--input", texts["en"], "--reference", texts["fr"], "--token-set", "en", texts["en"],
                  "--token-set", "fr", texts["fr"], "-o", tmp_path / "out.json")
    assert_one_line_error(res, "no masked-LM head")  # ... but cannot translate
    assert not (tmp_path / "out.json").exists() and not list(tmp_path.glob("x.*"))


def test_models_that_are_not_bidirectional_encoders_are_one_error_line(models, texts, tmp_path):
    # BART's output is its decoder's (fine-tuning trained on it); T5's encoder wanted decoder inputs
    # (a traceback); GPT-2 sees no right context: each was taken for an encoder
    from transformers import BartConfig, BartModel, BertTokenizerFast, GPT2Config, GPT2Model, XLMConfig, XLMModel

    small = dict(vocab_size=len((models / "bert" / "vocab.txt").read_text().split()), max_position_embeddings=64)
    for name, model, says in [
        ("bart", BartModel(BartConfig(d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                                      decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, **small)),
         "an encoder-decoder model (bart)"),
        ("gpt2", GPT2Model(GPT2Config(n_embd=16, n_layer=1, n_head=2, vocab_size=small["vocab_size"], n_positions=64)),
         "a left-to-right language model (gpt2)"),
        ("clm", XLMModel(XLMConfig(emb_dim=16, n_layers=1, n_heads=2, causal=True, **small)),
         "a left-to-right language model (xlm)"),   # xlm-clm-*: XLM's own class, `causal` set
    ]:
        model.save_pretrained(tmp_path / name)
        BertTokenizerFast(str(models / "bert" / "vocab.txt")).save_pretrained(tmp_path / name)
        res = run_xlt("extract", "--model", tmp_path / name, "--lang", "en", texts["en"], "-o", tmp_path / "x")
        assert_one_line_error(res, f"{tmp_path / name}: {says}")
        assert not list(tmp_path.glob("x*"))
    # weights cut short (safetensors' own error was a traceback)
    cut = tmp_path / "cut"
    shutil.copytree(models / "bert", cut)
    weights = cut / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    res = run_xlt("extract", "--model", cut, "--lang", "en", texts["en"], "-o", tmp_path / "x")
    assert_one_line_error(res, f"{cut}: cannot load the model")


def test_padding_does_not_change_a_sentences_states(models):
    model = load_text_model(str(models / "xlmr"))
    rows = [model.wrap(ids) for ids in model.encode_lines("fr", ["le chat .", "le grand chien voit un oiseau ."])]
    ids, mask = pad_inputs(rows, "cpu", model.pad_id)
    assert mask is not None and int(ids[0, -1]) == model.pad_id == 1
    batched = model.hidden_states(ids, mask, "fr")[-1][0, :len(rows[0])]
    alone = model.hidden_states(torch.tensor(rows[:1]), None, "fr")[-1][0]
    torch.testing.assert_close(batched, alone, atol=1e-5, rtol=0)


def test_states_and_shift_decoding_never_ask_for_cudnns_attention(models, attention_backends):
    # as xlt's own encoder (tests/test_model.py): cuDNN builds a plan for every new batch shape
    model = load_text_model(str(models / "bert"))
    ids = torch.tensor([model.wrap(model.encode_lines("en", ["the old cat sees a garden ."])[0])])
    model.hidden_states(ids, None, "en")
    states = len(attention_backends)
    model.shifted_decode(ids, None, "en", [(1, torch.zeros(1))], "fr")   # a zero shift after layer 1
    assert states > 0 and len(attention_backends) > states
    assert not any(cudnn for cudnn, _, _ in attention_backends)
