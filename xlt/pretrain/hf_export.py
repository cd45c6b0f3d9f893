"""``xlt export hf``: an xlt run as a transformers ``XLMWithLMHeadModel`` with XLM's Moses + BPE tokenizer.

XLM is the paper's own model family (Wu et al. trained with XLM's code), and its transformers port
has xlt's network exactly: learned token + position (+ language) embeddings, an embedding
LayerNorm, post-LN layers (``x = LN(x + Attn(x)); x = LN(x + FFN(x))``, eps 1e-12), exact-erf GELU,
a softmax tied to the token table with an output bias. The mapping, per layer:

    xlt attention.qkv [3D, D] (rows: Q, K, V)  -> attentions.i.{q_lin, k_lin, v_lin}
    xlt attention.out / attention_norm         -> attentions.i.out_lin / layer_norm1.i
    xlt ffn_in, ffn_out / ffn_norm             -> ffns.i.lin1, lin2 / layer_norm2.i

Two things transformers' XLM cannot express are rewritten exactly rather than approximated:

* its feed-forward width is fixed at 4 * D; a narrower xlt FFN (the ``tiny`` preset) is padded
  with zero rows of ``lin1`` and zero columns of ``lin2``: the extra units see 0, GELU(0) = 0,
  and they add nothing;
* it has language embeddings only with two or more languages; for a one-language export (a
  monolingual run, or one language's view of a run with separate parameters) the language's row
  is added to every position embedding instead, which is the same sum.

The tokenizer files are XLM's: ``vocab.json`` (xlt's ``cat@@`` -> ``cat``, word-final ``cat`` ->
``cat</w>``, the five specials at xlt's ids) and ``merges.txt`` (the run's fastBPE codes, which are
already in that format), with ``tokenization_xlt.py``, whose tokenizer takes ``lang`` in its normal
call (transformers 5's XLMTokenizer drops it: see :mod:`xlt.model.tokenization_xlt`). Inputs are
``</s> ids </s>`` as in xlt (bos and cls are ``</s>``).
Known differences of XLM's tokenizer from xlt's pipeline, none of which plain text meets: it
deletes control characters where xlt (like the Perl script) makes them spaces; its punctuation
normalizer is not sacremoses' perl-parity mode; Chinese goes through rjieba, not jieba.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from typing import Optional

import torch

from xlt.utils import log
from xlt.utils.errors import XltError

EXPORT_FORMAT = "xlt-export-hf/1"


def xlm_token(token: str) -> str:
    """An xlt (fastBPE) subword -> XLM's spelling: ``ca@@`` -> ``ca``; word-final ``cat`` -> ``cat</w>``."""
    return token[:-2] if token.endswith("@@") else token + "</w>"


def _check_exportable(run, lang: Optional[str]) -> list[str]:
    """The languages to export, or XltError naming what transformers' XLM cannot hold."""
    config, sharing = run.config, run.config.sharing
    separated = sharing.has_copies
    if separated and lang is None:
        raise XltError("this run has separate parameters per language: pass --lang L to export one language's "
                       f"view (one of {', '.join(config.languages)})", run.path)
    if lang is not None and not separated:
        raise XltError("--lang is for runs with separate parameters per language; this run shares every "
                       "parameter and exports whole", run.path)
    if lang is not None:
        config.language_index(lang)  # XltError for a language the run does not have
    if config.d_ffn > 4 * config.d_model:
        raise XltError(f"transformers' XLM has a feed-forward width of 4 x {config.d_model}; this run's "
                       f"d_ffn={config.d_ffn} is wider", run.path)
    if run.vocab.prefix_lang:
        raise XltError("a vocabulary with language-prefixed tokens (en:cat) has no XLM tokenizer equivalent",
                       run.path)
    return [lang] if lang else list(config.languages)


def _text_settings(run, languages: list[str]) -> tuple[str, bool]:
    """(codes file, lowercase-and-remove-accents) shared by ``languages``; XltError if XLM's one
    tokenizer cannot reproduce them."""
    codes, cases = set(), set()
    for code in languages:
        s = run.text_settings.get(code, {})
        if not s.get("codes"):
            raise XltError(f"language {code} has no BPE codes: XLM's tokenizer needs merges (pretrain with "
                           f"--codes)", os.path.join(run.path, "text.json"))
        with open(os.path.join(run.path, s["codes"]), encoding="utf-8") as f:
            codes.add(f.read())
        lower, accents = bool(s.get("lowercase")), bool(s.get("remove_accents"))
        if lower != accents:
            raise XltError(f"language {code} lowercases={lower} but removes accents={accents}: XLM's tokenizer "
                           f"does both or neither", os.path.join(run.path, "text.json"))
        cases.add(lower)
    if len(codes) > 1 or len(cases) > 1:
        raise XltError("the languages use different BPE codes or casing: XLM has one tokenizer for all; export "
                       "one language with --lang", os.path.join(run.path, "text.json"))
    return codes.pop(), cases.pop()


def xlm_state_dict(run, lang: Optional[str], languages: list[str]) -> tuple[dict, int]:
    """The run's weights under XLMWithLMHeadModel's names -> (state dict, n_langs of the export)."""
    from xlt.model.encoder import for_language

    config, enc = run.config, run.model.encoder
    code = lang or config.languages[0]  # every copy is the same tensor when nothing is separate
    D, F4 = config.d_model, 4 * config.d_model
    tok = for_language(enc.token_embeddings, code).weight.detach()
    pos = for_language(enc.position_embeddings, code).weight.detach().clone()
    out = {"transformer.embeddings.weight": tok, "pred_layer.proj.weight": tok,
           "pred_layer.proj.bias": for_language(run.model.head.output_bias, code).bias.detach(),
           "transformer.layer_norm_emb.weight": enc.embedding_norm.weight.detach(),
           "transformer.layer_norm_emb.bias": enc.embedding_norm.bias.detach()}
    n_langs = len(languages)
    if enc.language_embeddings is not None:
        if n_langs > 1:
            out["transformer.lang_embeddings.weight"] = enc.language_embeddings.weight.detach()
        else:  # XLM ignores language embeddings below two languages: the same sum, folded in
            pos += enc.language_embeddings.weight.detach()[config.language_index(code)]
    out["transformer.position_embeddings.weight"] = pos
    for i in range(config.n_layers):
        layer, p = for_language(enc.layers[i], code), "transformer."
        q, k, v = layer.attention.qkv.weight.detach().split(D)
        qb, kb, vb = layer.attention.qkv.bias.detach().split(D)
        for name, w, b in (("q_lin", q, qb), ("k_lin", k, kb), ("v_lin", v, vb),
                           ("out_lin", layer.attention.out.weight.detach(), layer.attention.out.bias.detach())):
            out[f"{p}attentions.{i}.{name}.weight"], out[f"{p}attentions.{i}.{name}.bias"] = w, b
        # Zero-padded FFN units contribute exactly nothing (see the module docstring).
        w1 = torch.zeros(F4, D)
        w1[:config.d_ffn] = layer.ffn_in.weight.detach()
        b1 = torch.zeros(F4)
        b1[:config.d_ffn] = layer.ffn_in.bias.detach()
        w2 = torch.zeros(D, F4)
        w2[:, :config.d_ffn] = layer.ffn_out.weight.detach()
        out.update({f"{p}ffns.{i}.lin1.weight": w1, f"{p}ffns.{i}.lin1.bias": b1,
                    f"{p}ffns.{i}.lin2.weight": w2, f"{p}ffns.{i}.lin2.bias": layer.ffn_out.bias.detach()})
        for name, norm in (("layer_norm1", layer.attention_norm), ("layer_norm2", layer.ffn_norm)):
            out[f"{p}{name}.{i}.weight"], out[f"{p}{name}.{i}.bias"] = norm.weight.detach(), norm.bias.detach()
    return {k: v.contiguous().clone() for k, v in out.items()}, n_langs


def xlm_config(run, languages: list[str], n_langs: int):
    """XLMConfig of the export: xlt's sizes, ids and languages."""
    from transformers import XLMConfig

    from xlt.text.vocab import BOS_ID, EOS_ID, MASK_ID, PAD_ID, UNK_ID

    c = run.config
    lang2id = {code: i for i, code in enumerate(languages)}
    return XLMConfig(vocab_size=c.vocab_size, emb_dim=c.d_model, n_layers=c.n_layers, n_heads=c.n_heads,
                     dropout=c.dropout, attention_dropout=c.attention_dropout,
                     gelu_activation=c.activation == "gelu", sinusoidal_embeddings=False, causal=False, asm=False,
                     n_langs=n_langs, use_lang_emb=c.lang_embeddings and n_langs > 1,
                     max_position_embeddings=c.max_positions, layer_norm_eps=1e-12, is_encoder=True,
                     unk_index=UNK_ID, mask_index=MASK_ID, mask_token_id=MASK_ID, pad_token_id=PAD_ID,
                     bos_token_id=BOS_ID, eos_token_id=EOS_ID, lang_id=0, tie_word_embeddings=True,
                     lang2id=lang2id, id2lang={i: code for code, i in lang2id.items()},
                     architectures=["XLMWithLMHeadModel"])


def write_tokenizer(run, output: str, languages: list[str], codes: str, lowercase: bool) -> None:
    """``vocab.json`` + ``merges.txt`` in XLMTokenizer's format, its ``tokenizer_config.json``, and
    ``tokenization_xlt.py`` (:mod:`xlt.model.tokenization_xlt`: the class whose call takes ``lang``)."""
    from transformers import XLMTokenizer

    from xlt.model import tokenization_xlt
    from xlt.text.vocab import SPECIALS

    vocab = {token: i for i, token in enumerate(SPECIALS)}
    for i, token in enumerate(run.vocab.tokens, start=len(SPECIALS)):
        vocab.setdefault(xlm_token(token), i)
    with open(os.path.join(output, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(output, "merges.txt"), "w", encoding="utf-8") as f:
        f.write(codes if codes.endswith("\n") else codes + "\n")  # XLMTokenizer drops the last line
    lang2id = {code: i for i, code in enumerate(languages)}
    tokenizer = XLMTokenizer(os.path.join(output, "vocab.json"), os.path.join(output, "merges.txt"),
                             bos_token="</s>", cls_token="</s>", sep_token="</s>", unk_token="<unk>",
                             pad_token="<pad>", mask_token="<mask>", additional_special_tokens=[],
                             lang2id=lang2id, id2lang={i: code for code, i in lang2id.items()},
                             do_lowercase_and_remove_accent=lowercase, lang=languages[0],
                             model_max_length=run.config.max_positions)
    tokenizer.save_pretrained(output)
    shutil.copyfile(tokenization_xlt.__file__, os.path.join(output, "tokenization_xlt.py"))
    # Named in auto_map only, tokenizer_class staying XLMTokenizer: loaded without trust_remote_code the
    # export is transformers' own tokenizer, as before (xlt's loader passes the language itself).
    path = os.path.join(output, "tokenizer_config.json")
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    config["auto_map"] = {"AutoTokenizer": [f"tokenization_xlt.{tokenization_xlt.XltXLMTokenizer.__name__}", None]}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=2)


def export_hf(run_dir: str, output: str, lang: Optional[str] = None, checkpoint: str = "best") -> dict:
    """Write ``output/`` (config.json, model.safetensors, vocab.json, merges.txt, tokenizer_config.json,
    tokenization_xlt.py, xlt_export.json) so that ``AutoModel.from_pretrained(output)`` is the run's
    encoder. Returns the export record (also ``xlt_export.json``)."""
    from transformers import XLMWithLMHeadModel

    from xlt.model.hf import quiet_transformers
    from xlt.model.xlt_run import PretrainedRun
    from xlt.utils.outputs import write_json

    if os.path.exists(output) and (not os.path.isdir(output) or os.listdir(output)):
        raise XltError("output exists and is not an empty directory", output)
    quiet_transformers()
    run = PretrainedRun.load(run_dir, checkpoint)
    languages = _check_exportable(run, lang)
    codes, lowercase = _text_settings(run, languages)
    state, n_langs = xlm_state_dict(run, lang, languages)
    model = XLMWithLMHeadModel(xlm_config(run, languages, n_langs))
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:  # a transformers version that renamed XLM's weights: a bug, not bad input
        raise RuntimeError(f"XLM weight names changed: missing {missing[:3]}, unexpected {unexpected[:3]}")
    if any(code in ("zh", "th", "ja") for code in languages):
        log.info("note: XLM's tokenizer segments zh/th/ja with its own segmenters (rjieba, not jieba): "
                 "ids of such text can differ from xlt's")
    record = {"format": EXPORT_FORMAT, "run": os.path.abspath(run_dir), "checkpoint": checkpoint, "step": run.step,
              "sharing": run.config.sharing.to_dict(), "view": lang, "languages": languages,
              "lang2id": {code: i for i, code in enumerate(languages)} if n_langs > 1 else None,
              "ffn_padded": {"from": run.config.d_ffn, "to": 4 * run.config.d_model}
              if run.config.d_ffn != 4 * run.config.d_model else None,
              "language_embedding": ("table" if n_langs > 1 else "folded into positions")
              if run.config.lang_embeddings else None}
    # Written in a folder beside, renamed into place whole: a half export (killed after the weights,
    # before the tokenizer) would load in transformers, and block the next export as a non-empty output.
    parent = os.path.dirname(os.path.abspath(output))
    os.makedirs(parent, exist_ok=True)
    name = os.path.basename(os.path.abspath(output))
    staging = os.path.join(parent, f".{name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        os.makedirs(staging)
        model.eval().save_pretrained(staging)
        write_tokenizer(run, staging, languages, codes, lowercase)
        write_json(os.path.join(staging, "xlt_export.json"), record)
        os.replace(staging, output)   # onto nothing, or onto the empty directory checked above
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log.info(f"{output}: XLMWithLMHeadModel of {run_dir} ({', '.join(languages)}; "
             f"{'view of ' + lang if lang else 'whole model'})")
    return record
