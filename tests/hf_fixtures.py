"""Tiny Hugging Face models made in the test, offline: a random BERT (WordPiece) and XLM-R (SentencePiece
Unigram) whose vocabularies hold the synthetic grammar's words (tests/synthetic.py), saved with
``save_pretrained``. Shared by tests/test_hf.py and tests/test_align_hf.py.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never the network (subprocesses inherit it)

import synthetic  # noqa: E402
import torch  # noqa: E402


# Words left out of both vocabularies, so that they split into several pieces (word pooling is exercised).
SPLIT = {"garden": ("gar", "##den"), "jardin": ("jar", "##din"), "river": ("riv", "##er"), "fleuve": ("fle", "##uve")}
SIZES = dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=2, intermediate_size=64)


def _words() -> list[str]:
    en, fr = synthetic.corpus(200, seed=0)
    return sorted({w for line in en + fr for w in line.split()})


def _bert(path, with_head=True):
    from transformers import BertConfig, BertForMaskedLM, BertModel, BertTokenizerFast

    path.mkdir()
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [w for w in _words() if w not in SPLIT]
    vocab += [piece for pieces in SPLIT.values() for piece in pieces]
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), max_position_embeddings=64, **SIZES)
    (BertForMaskedLM if with_head else BertModel)(config).save_pretrained(path)
    BertTokenizerFast(str(path / "vocab.txt")).save_pretrained(path)  # first argument: the vocab file


def _xlmr(path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import XLMRobertaConfig, XLMRobertaForMaskedLM, XLMRobertaTokenizerFast

    words = _words()
    pieces = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    pieces += [("\u2581" + w, -5.0) for w in words if w not in SPLIT] + [("\u2581", -8.0)]
    pieces += [(c, -10.0) for c in sorted(set("".join(words)))] + [("<mask>", 0.0)]
    backend = Tokenizer(models.Unigram(pieces, unk_id=3))
    backend.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    backend.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    tokenizer = XLMRobertaTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token="</s>",
                                        sep_token="</s>", cls_token="<s>", unk_token="<unk>", pad_token="<pad>",
                                        mask_token="<mask>")
    torch.manual_seed(1)
    config = XLMRobertaConfig(vocab_size=len(pieces), max_position_embeddings=66, pad_token_id=1, bos_token_id=0,
                              eos_token_id=2, **SIZES)
    XLMRobertaForMaskedLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)


def build_models(root):
    """root/bert (with MLM head), root/bare (encoder only), root/xlmr, root/notok (no tokenizer files)."""
    _bert(root / "bert")
    _bert(root / "bare", with_head=False)
    _xlmr(root / "xlmr")
    (root / "notok").mkdir()
    for name in ("config.json", "model.safetensors"):
        (root / "notok" / name).write_bytes((root / "bert" / name).read_bytes())
    return root


def write_texts(root):
    """root/en.txt and root/fr.txt: 30 line-parallel synthetic sentences (one longer, so batches pad)."""
    en, fr = synthetic.corpus(30, seed=4)
    en[1] += " the big garden sees the river ."
    paths = {}
    for lang, lines in (("en", en), ("fr", fr)):
        paths[lang] = root / f"{lang}.txt"
        paths[lang].write_text("\n".join(lines) + "\n")
    return paths
