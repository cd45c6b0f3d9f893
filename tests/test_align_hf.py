"""xlt align on Hugging Face models through the TextModel seam: the tiny BERT and XLM-R of
tests/hf_fixtures.py (offline), alone, against each other and against an xlt run."""

from __future__ import annotations

import json

import numpy as np
import pytest
import synthetic
from conftest import assert_one_line_error, run_xlt
from hf_fixtures import SPLIT, build_models, write_texts

from xlt.analysis.align_settings import WordSettings
from xlt.analysis.align import align_contextual_word, embedding_space
from xlt.analysis.align_parallel import align_dictionary, align_sentence
from xlt.loader.text_model import load_text_model
from xlt.utils.errors import XltError


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return build_models(tmp_path_factory.mktemp("hf"))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("align-hf")
    pairs = synthetic.DICTIONARY
    (root / "train.txt").write_text("".join(f"{s} {t}\n" for s, t in pairs[::2]), encoding="utf-8")
    (root / "test.txt").write_text("".join(f"{s} {t}\n" for s, t in pairs[1::2]), encoding="utf-8")
    (root / "same.txt").write_text("".join(f"{s} {s}\n" for s, _ in pairs), encoding="utf-8")
    return root, write_texts(root)


def test_the_static_space_is_the_input_embedding_table(models):
    """Rows: the tokens that the model's own tokenizer reads as a whole word, with their table rows;
    a word of several pieces is, with --subwords mean, the mean of its pieces' rows."""
    for name, table_of in (("bert", lambda m: m.model.bert.embeddings.word_embeddings.weight),
                           ("xlmr", lambda m: m.model.roberta.embeddings.word_embeddings.weight)):
        model = load_text_model(str(models / name))
        weight = table_of(model).detach().numpy()
        space, key = embedding_space(model, "en", ["cat", "garden", "zzzz"], "mean")
        tok = model.tokenizer
        whole = [w for w in space.words if "\t" not in w]
        assert "cat" in whole and not any(w.startswith("##") or w.startswith("\u2581") for w in whole)
        for word in whole:  # each whole-word row is that token's row of the table
            (token_id,) = tok(word, add_special_tokens=False)["input_ids"]
            np.testing.assert_array_equal(space.vectors[0, space.row[word]], weight[token_id])
        assert key["cat"] == "cat" and "zzzz" not in key  # unknown pieces: not usable
        pieces = tok("garden", add_special_tokens=False)["input_ids"]
        assert len(pieces) > 1 and "garden" not in whole
        np.testing.assert_allclose(space.vectors[0, space.row[key["garden"]]], weight[pieces].mean(0), rtol=1e-6)


def test_align_word_on_transformers_models(models, data):
    root, _ = data
    # One model aligned with itself: the learned map is the identity, every word finds itself.
    res = run_xlt("align", "word", "--model", models / "xlmr", "--source-lang", "en", "--target-lang", "en",
                  "--train-dict", root / "same.txt", "--test-dict", root / "same.txt", "--subwords", "mean")
    assert res.returncode == 0, res.stderr
    result = json.loads(res.stdout)
    assert result["source"]["kind"] == "hf" and result["source"]["run"] == str(models / "xlmr")
    assert result["results"][0]["nn"]["p@1"] == result["results"][0]["mrr"] == 1.0
    # BERT's space to XLM-R's, in the joint-space mode: a pair with a word of several pieces is unusable.
    res = run_xlt("align", "word", "--model", models / "bert", "--target-model", models / "xlmr", "--source-lang", "en",
                  "--target-lang", "fr", "--map", "none", "--no-csls", "--test-dict", root / "test.txt")
    assert res.returncode == 0, res.stderr
    result = json.loads(res.stdout)
    test_pairs = synthetic.DICTIONARY[1::2]
    assert result["test"]["pairs"] == len(test_pairs)
    assert result["test"]["usable"] == sum(s not in SPLIT and t not in SPLIT for s, t in test_pairs)
    assert result["target"]["run"] == str(models / "xlmr") and 0 < result["results"][0]["mrr"] <= 1


def test_contextual_words_are_the_models_own_words(models, data, tmp_path):
    root, texts = data
    bert = load_text_model(str(models / "bert"))
    assert bert.split_words("en", "The cat, sees the garden.") == ["the", "cat", ",", "sees", "the", "garden", "."]

    def score(model, cache=None):
        return align_contextual_word(str(models / model), "en", "fr", str(texts["en"]), str(texts["fr"]), None,
                                     str(root / "test.txt"), layers=[0, 3], word=WordSettings(map="none", csls=False),
                                     space_cache=cache)

    result = score("bert")
    words = {w for line in texts["en"].read_text().splitlines() for w in bert.split_words("en", line)}
    assert result["space"]["source_words"] == len(words)
    assert [r["layer"] for r in result["results"]] == [0, 3] and all(0 < r["mrr"] <= 1 for r in result["results"])
    # A transformers model's spaces are cached by its weights too, apart from another model's.
    assert bert.weights_sha256() != load_text_model(str(models / "xlmr")).weights_sha256()
    cached = [score(model, str(tmp_path)) for model in ("bert", "xlmr", "bert")]
    assert [c["space_cache"]["source"]["hit"] for c in cached] == [False, False, True]
    assert cached[2]["results"] == result["results"]


def test_sentence_and_dictionary_across_kinds(models, data, tiny_run, tmp_path):
    root, texts = data
    # The same model and sentences on both sides: every sentence finds itself at every layer.
    same = align_sentence(str(models / "xlmr"), "en", "en", [(str(texts["en"]), str(texts["en"]))],
                          str(texts["en"]), str(texts["en"]), layers=[0, 3])
    assert same["p_at_1"] == [1.0, 1.0]
    # An xlt run against a transformers model: loaded alike, refused before any work when widths differ.
    with pytest.raises(XltError, match="d_model 64, --target-model 32"):
        align_sentence(str(tiny_run), "en", "fr", [(str(texts["en"]), str(texts["fr"]))], str(texts["en"]),
                       str(texts["fr"]), target_model=str(models / "bert"))
    header = align_dictionary(str(models / "bert"), "en", "fr", str(texts["en"]), str(texts["fr"]),
                              str(tmp_path / "maps"), layers=[1, 3])
    assert header["runs"]["source"]["kind"] == "hf" and header["links"] > 0
    W = np.load(tmp_path / "maps" / "W_layer3.npy")
    assert W.shape == (32, 32) and np.allclose(W @ W.T, np.eye(32), atol=1e-4)


def test_a_model_that_cannot_be_loaded_is_one_line(data):
    root, _ = data
    res = run_xlt("align", "word", "--model", "hf:xlt-tests/not-cached", "--source-lang", "en", "--target-lang", "fr",
                  "--map", "none", "--test-dict", root / "test.txt")
    assert_one_line_error(res, "hf:xlt-tests/not-cached", "not in the local Hugging Face cache")


def test_checkpoint_last_of_a_transformers_model_is_refused_not_read_as_its_weights(models, data):
    root, _ = data
    res = run_xlt("align", "word", "--model", models / "bert", "--checkpoint", "last", "--source-lang", "en",
                  "--target-lang", "fr", "--map", "none", "--no-csls", "--test-dict", root / "test.txt")
    assert_one_line_error(res, "--checkpoint last: a transformers model has one set of weights")
