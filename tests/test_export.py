"""``xlt export hf``: a tiny BPE run (default row and a Sep Emb + L1 row) through transformers and back.

What is held: transformers' AutoModel on the export gives xlt's hidden states at every layer (1e-5),
padding included; AutoTokenizer gives xlt's ids on plain text (capitals, punctuation, accents,
apostrophes and French elisions, unknown characters) in each language through its normal call,
``tokenizer(text, lang=L)``; the MLM head gives xlt's logits; bad requests are one error line.
"""

from __future__ import annotations

import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never the network: every model here is made in the test

import pytest  # noqa: E402
import synthetic  # noqa: E402
import torch  # noqa: E402
from conftest import assert_one_line_error, run_in_process, run_xlt  # noqa: E402
from pretrain_fixtures import tiny_args  # noqa: E402

from xlt.model.xlt_run import PretrainedRun, pad_inputs  # noqa: E402

# Plain text the way a user has it: capitals, commas, an apostrophe, accents, a digit, quotes.
PLAIN = {"en": ["The old cat sees a dog.", "This child, 3 times, likes \"the\" garden!", "Zebra? Ünïcode."],
         "fr": ["Le chat voit l'enfant.", "L'élève aime ce jardin, déjà.", "Où est-ce ? « Voilà »"]}
# Elisions and apostrophes, which Moses splits by the language's rules (English: "n 'a", French: "n' a").
ELISIONS = {"fr": ["L'enfant n'a pas vu qu'il était là.", "Aujourd'hui, j'ai dit : « c'est l'élève d'Anne ».",
                   "Jusqu'à présent, s'il n'y a rien, lorsqu'on l'a vu, presqu'île."]}
# Control characters, which Moses' remove-non-printing-char (and xlt) make spaces: a tab between words.
# (and a character newer than Python's Unicode tables, which transformers' XLM deleted: U+1FA77)
CONTROL = {"en": ["the cat\tsees a dog .", "the\u200bchild\x07likes it .", "the cat \U0001fa77 sees a dog ."],
           "fr": ["le chat\tvoit l' enfant .", "l' élève\u200baime\x07ce jardin ."]}
EXTRA = {"en": ["the child's book .", "zebra !"], "fr": ["l' élève voit l' enfant .", "où est - ce ? déjà ."]}


def _bpe_inputs(root):
    """en/fr stores segmented with jointly learned BPE codes; returns the pretrain arguments."""
    from xlt.data.store import binarize
    from xlt.text.bpe import BPE, build_vocabulary, learn

    root.mkdir(parents=True, exist_ok=True)
    en, fr = synthetic.corpus(240, seed=3)
    texts = {"en": en + EXTRA["en"] * 5, "fr": fr + EXTRA["fr"] * 5}
    for lang, lines in texts.items():
        (root / f"{lang}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    learn([root / "en.txt", root / "fr.txt"], 60, root / "codes")  # few merges: most words split
    bpe = BPE(root / "codes")
    args = []
    for lang, lines in texts.items():
        for split, part in (("train", lines[:200]), ("dev", lines[200:])):
            (root / f"{lang}.{split}.bpe").write_text("\n".join(bpe.apply(part)) + "\n", encoding="utf-8")
    build_vocabulary([root / "en.train.bpe", root / "fr.train.bpe"], root / "vocab", ["en", "fr"])
    for lang in texts:
        for split in ("train", "dev"):
            binarize(str(root / f"{lang}.{split}.bpe"), str(root / "vocab"), lang, str(root / f"{lang}.{split}"))
            args += [f"--{split}", lang, str(root / f"{lang}.{split}")]
    return ["--vocab", str(root / "vocab"), *args, "--codes", "en", str(root / "codes"),
            "--codes", "fr", str(root / "codes")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    inputs = _bpe_inputs(root / "inputs")
    out = {}
    for name, sharing in (("default", []), ("separated", ["--sharing", "sep-emb", "--separate-layers", "1", "1"])):
        run_xlt("pretrain", "--run-dir", root / name, *inputs, *tiny_args(4), *sharing, check=True)
        out[name] = root / name
    return out


@pytest.fixture(scope="module")
def exported(runs, tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    run_xlt("export", "hf", runs["default"], "-o", root / "default", check=True)
    run_xlt("export", "hf", runs["separated"], "--lang", "fr", "-o", root / "separated.fr", check=True)
    return {"default": root / "default", "separated": root / "separated.fr"}


def _batch(run, lang):
    """The PLAIN lines as xlt encodes them, padded (rows of different lengths)."""
    rows = [run.wrap(ids) for ids in run.encode_lines(lang, PLAIN[lang])]
    return pad_inputs(rows, "cpu", run.pad_id)


@pytest.mark.parametrize("name,lang", [("default", "en"), ("default", "fr"), ("separated", "fr")])
def test_hidden_states_and_logits_equal_xlt(runs, exported, name, lang):
    from transformers import AutoModel, AutoModelForMaskedLM

    run = PretrainedRun.load(runs[name])
    ids, padding_mask = _batch(run, lang)
    assert padding_mask is not None  # padding is part of what is compared
    expected = run.hidden_states(ids, padding_mask, lang)
    hf = AutoModel.from_pretrained(exported[name]).eval()
    assert type(hf).__name__ == "XLMModel"
    inputs = {"input_ids": ids, "attention_mask": (~padding_mask).long()}
    if hf.config.use_lang_emb and hf.config.n_langs > 1:
        inputs["langs"] = torch.full_like(ids, hf.config.lang2id[lang])
    with torch.no_grad():
        got = hf(**inputs, output_hidden_states=True).hidden_states
    assert len(got) == len(expected) == run.n_layers + 1
    keep = ~padding_mask
    for layer, (a, b) in enumerate(zip(got, expected)):
        torch.testing.assert_close(a[keep], b[keep], atol=1e-5, rtol=0, msg=f"layer {layer}")
    mlm = AutoModelForMaskedLM.from_pretrained(exported[name]).eval()
    with torch.no_grad():
        logits = mlm(**inputs).logits
        reference = run.model.head.logits(expected[-1], lang)
    torch.testing.assert_close(logits[keep], reference[keep], atol=1e-4, rtol=0)


@pytest.mark.parametrize("name,langs", [("default", ["en", "fr"]), ("separated", ["fr"])])
def test_the_exported_tokenizers_call_gives_xlt_ids_in_each_language(runs, exported, name, langs):
    from transformers import AutoTokenizer

    run = PretrainedRun.load(runs[name])
    tokenizer = AutoTokenizer.from_pretrained(exported[name], trust_remote_code=True)
    for lang in langs:
        lines = (PLAIN[lang] + ELISIONS.get(lang, []) + CONTROL[lang]
                 + synthetic.corpus(5, seed=11)[["en", "fr"].index(lang)])
        expected = run.encode_lines(lang, lines)
        assert any(len(set(ids)) > 1 and 3 in ids for ids in expected)  # unknown characters are exercised
        assert tokenizer(lines, lang=lang, add_special_tokens=False)["input_ids"] == expected
        assert tokenizer(lines[0], lang=lang)["input_ids"] == run.wrap(expected[0])  # </s> x </s>
        if lang == langs[0]:  # the export's first language (a view's only one) is the default
            assert tokenizer(lines, add_special_tokens=False)["input_ids"] == expected
    if name == "default":  # English rules split the elisions otherwise: the language is what made them equal
        french = run.encode_lines("fr", ELISIONS["fr"])
        english = tokenizer(ELISIONS["fr"], lang="en", add_special_tokens=False)["input_ids"]
        assert all(a != b for a, b in zip(english, french))
    with pytest.raises(ValueError, match="'de' is not one of"):
        tokenizer("Der Hund.", lang="de")
    # Without trust_remote_code, transformers' own XLMTokenizer, with the language passed as xlt's loader does.
    plain = AutoTokenizer.from_pretrained(exported[name])
    assert type(plain).__name__ == "XLMTokenizer"
    assert ([plain.convert_tokens_to_ids(plain._tokenize(line, lang="fr")) for line in ELISIONS["fr"]]
            == run.encode_lines("fr", ELISIONS["fr"]))


def test_the_export_through_the_seam_extracts_what_the_run_extracts(runs, exported):
    from xlt.analysis.extract import sentence_vectors, word_vectors
    from xlt.loader.text_model import load_text_model

    run, hf = PretrainedRun.load(runs["default"]), load_text_model(str(exported["default"]))
    assert hf.describe()["kind"] == "hf" and hf.uses_lang_emb
    lines = PLAIN["fr"] + synthetic.corpus(6, seed=5)[1]
    torch.testing.assert_close(torch.from_numpy(sentence_vectors(hf, "fr", lines)),
                               torch.from_numpy(sentence_vectors(run, "fr", lines)), atol=1e-5, rtol=0)
    words = [line.split() for line in synthetic.corpus(6, seed=6)[0]]
    a, ia = word_vectors(hf, "en", words, pooling="mean")
    b, ib = word_vectors(run, "en", words, pooling="mean")
    assert (ia.offsets == ib.offsets).all()
    torch.testing.assert_close(torch.from_numpy(a), torch.from_numpy(b), atol=1e-5, rtol=0)


def test_shift_decoding_the_export_decodes_what_the_run_decodes(runs, exported):
    """XLM's shift goes in through a hook on layer_norm2 (layer_norm_emb for layer 0); xlt's through
    encode_from: the same argmax at every real position."""
    from xlt.loader.text_model import load_text_model

    run, hf = PretrainedRun.load(runs["default"]), load_text_model(str(exported["default"]))
    ids, padding_mask = _batch(run, "fr")
    generator = torch.Generator().manual_seed(0)
    shifts = [(layer, 3.0 * torch.randn(run.d_model, generator=generator)) for layer in range(run.n_layers + 1)]
    keep = ~padding_mask
    for ours, theirs in zip(run.shifted_decode(ids, padding_mask, "fr", shifts, "fr"),
                            hf.shifted_decode(ids, padding_mask, "fr", shifts, "fr")):
        assert torch.equal(ours[keep], theirs[keep])
    assert not torch.equal(*run.shifted_decode(ids, padding_mask, "fr", [shifts[1], (1, 0 * shifts[1][1])], "fr"))


def test_the_export_record_and_the_padded_feed_forward(exported):
    record = json.loads((exported["default"] / "xlt_export.json").read_text())
    assert record["languages"] == ["en", "fr"] and record["language_embedding"] == "table"
    assert record["ffn_padded"] == {"from": 128, "to": 256}  # tiny: d_ffn 2 x 64, XLM's is 4 x
    view = json.loads((exported["separated"] / "xlt_export.json").read_text())
    assert view["view"] == "fr" and view["language_embedding"] == "folded into positions"


def test_bad_export_requests_are_one_error_line(runs, exported, tmp_path, capsys):
    def export(*args):   # in this process: transformers is imported once, not once a request (~8 s each)
        return run_in_process(capsys, "export", "hf", *args)

    assert_one_line_error(export(runs["separated"], "-o", tmp_path / "a"), "--lang L")
    assert_one_line_error(export(runs["default"], "--lang", "en", "-o", tmp_path / "b"), "shares every parameter")
    assert_one_line_error(export(runs["separated"], "--lang", "de", "-o", tmp_path / "c"), "'de'")
    assert_one_line_error(export(runs["default"], "-o", exported["default"]), "not an empty")
    assert not any((tmp_path / name).exists() for name in "abc")
    # a one-language view takes that language only (English text through French's embeddings ran)
    text = tmp_path / "en.txt"
    text.write_text("\n".join(PLAIN["en"]) + "\n")
    assert_one_line_error(run_in_process(capsys, "extract", "--model", exported["separated"], "--lang", "en", text,
                                         "-o", tmp_path / "reps"), "language 'en' is not one of this model's (fr)")
    assert not list(tmp_path.glob("reps*"))
    # and its own language quietly: the tokenizer's sample calls took English, which it has not,
    # and transformers logged an error on every load, -q or not
    (tmp_path / "fr.txt").write_text("\n".join(PLAIN["fr"]) + "\n")
    res = run_xlt("-q", "extract", "--model", exported["separated"], "--lang", "fr", tmp_path / "fr.txt",
                  "-o", tmp_path / "fr")
    assert res.returncode == 0 and res.stderr == "", res.stderr


def test_an_export_stopped_half_way_leaves_no_model_and_the_next_one_lands(runs, tmp_path, monkeypatch):
    # The weights were written into the output before the tokenizer: a kill between left a folder
    # transformers loaded, and that the next export refused as not empty.
    from xlt.pretrain import hf_export

    def killed(*args, **kwargs):
        raise KeyboardInterrupt   # as SIGINT between the weights and the tokenizer

    out = tmp_path / "out"
    with monkeypatch.context() as patch:
        patch.setattr(hf_export, "write_tokenizer", killed)
        with pytest.raises(KeyboardInterrupt):
            hf_export.export_hf(str(runs["default"]), str(out))
    assert list(tmp_path.iterdir()) == []   # no output, no staging folder
    record = hf_export.export_hf(str(runs["default"]), str(out))
    assert record["languages"] == ["en", "fr"]
    assert {"config.json", "model.safetensors", "xlt_export.json"} <= {p.name for p in out.iterdir()}
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_the_export_reads_references_and_output_as_the_run_does(runs, exported):
    """BLEU-1 of an export's translations is the run's: references segmented (and cased) alike, and the
    same ids read back as the same words."""
    from xlt.loader.text_model import load_text_model

    run, hf = PretrainedRun.load(runs["default"]), load_text_model(str(exported["default"]))
    for lang in ("en", "fr"):
        for line in PLAIN[lang] + ELISIONS.get(lang, []) + CONTROL[lang]:
            assert hf.encode_lines(lang, [line]) == run.encode_lines(lang, [line]), line
            assert hf.reference_words(lang, line) == run.reference_words(lang, line), line
            ids = run.encode_lines(lang, [line])[0]
            assert hf.words(lang, ids) == run.words(lang, ids), line
    # a lowercasing export lowercases its references as a lowercasing run does (accents removed too)
    from xlt.text.tokenize import strip_accents

    assert hf.max_positions == run.max_positions   # (XLM's token table's padding index was taken for RoBERTa's offset)
    hf.tokenizer.do_lowercase_and_remove_accent = True
    for line in PLAIN["fr"] + ELISIONS["fr"]:
        lowered = strip_accents(" ".join(run.reference_words("fr", line)).lower()).split()
        assert hf.reference_words("fr", line) == lowered == hf.split_words("fr", line)


def test_an_xlm_tokenizer_segments_zh_before_bpe_and_says_when_its_segmenter_is_missing(exported, monkeypatch):
    import pickle
    import sys
    import types

    import jieba

    from xlt.loader.text_model import load_text_model
    from xlt.utils.errors import XltError

    hf = load_text_model(str(exported["default"]))
    # rjieba's cut as jieba's (rjieba is not a dependency): the words are the segmenter's, not one string
    monkeypatch.setitem(sys.modules, "rjieba", types.SimpleNamespace(cut=lambda text: list(jieba.cut(text))))
    assert hf.tokenizer.words("我爱北京天安门", lang="zh") == ["我", "爱", "北京", "天安门"]
    monkeypatch.delitem(sys.modules, "rjieba")

    class Uninstalled:   # as where rjieba is not installed
        def find_spec(self, name, path=None, target=None):
            if name == "rjieba":
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    monkeypatch.setattr(sys, "meta_path", [Uninstalled(), *sys.meta_path])
    with pytest.raises(XltError, match="segments zh with rjieba, which is not installed"):
        hf.split_words("zh", "我爱北京天安门")
    # the tokenizer, with its language, survives a copy to another process (a class, not a patched method)
    copy = pickle.loads(pickle.dumps(hf.random_like(0).tokenizer))
    assert copy("le chat .", lang="fr")["input_ids"] == hf.tokenizer("le chat .", lang="fr")["input_ids"]
