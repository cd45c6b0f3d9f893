"""A Hugging Face model as the fine-tuning runner's "pretrained model": ``xlt finetune --model hf:NAME`` or a
transformers model directory.

What :class:`~xlt.model.xlt_run.PretrainedRun` is to the runner, for a transformers encoder (as
:class:`~xlt.loader.static_vectors.StaticVectorsModel` is for a static embedding file). The model is
loaded through the analyses' seam (:class:`xlt.model.hf.HFTextModel`), so fine-tuning sees text exactly as ``extract``,
``cka`` and ``align`` do:

* **words -> subwords**: the model's own tokenizer, word by word (``HFTextModel.encode_words``: the fast
  tokenizer's ``word_ids``); the tasks read each word's first subword, as on an xlt run;
* **inputs**: the model's own layout, one special token before the content (``[CLS] x [SEP]``,
  ``<s> x </s>``) and for XNLI its pair layout (``[CLS] a [SEP] b [SEP]`` with BERT's segment ids,
  ``<s> a </s></s> b </s>``), read off the tokenizer's own output; padding with its pad id;
* **language embedding**: only an XLM model with ``lang2id`` gets one (``langs``); others run without,
  and ``--lang-embedding-at-test source`` is refused for them (it would change nothing);
* **weights**: the base model (its MLM or NSP heads and BERT's pooler dropped: the task heads read
  hidden states), copied per run and fine-tuned whole; ``--freeze-bottom K`` freezes its embeddings and
  layers 1..K by module name. ``--checkpoint untrained`` re-initialises the same config with the model's
  own initialisation (seed 0, as the xlt control); ``step-N`` loads a transformers Trainer's
  ``checkpoint-N/`` folder of the model directory; ``last`` is refused (a transformers model has one
  set of weights);
* **test-time maps and shifts** act through forward hooks on the module whose output is layer ``l``
  (:func:`xlt.model.hf.layer_output_modules`), the hooks ``shift-decode`` uses.

The run identity names the model (``hf:NAME`` or the absolute directory) and checksums of its weights,
config and tokenizer, so a changed model is a new run and results.json says which model it was.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional, Sequence

import torch
from torch import Tensor, nn
from torch.nn.attention import sdpa_kernel

from xlt.model.encoder import ATTENTION_BACKENDS, LayerHook
from xlt.model.hf import HFTextModel, layer_output_modules
from xlt.model.hub import hub_source
from xlt.model.spec import hf_model_dir
from xlt.model.weights import state_sha256
from xlt.utils.errors import XltError


@dataclass(frozen=True)
class HFEncoderConfig:
    """The sizes the runner and the trainer read off an encoder's ``config``."""

    d_model: int
    n_layers: int
    max_positions: int


@dataclass
class EncoderOutput:
    last_hidden_state: Tensor   # [B,T,D]


def segment_ids(ids: Tensor, sep_id: int, padding_mask: Optional[Tensor] = None) -> Tensor:
    """BERT's token type ids for ids [B,T]: 0 up to and including the first separator, 1 after it (a
    pair's second segment and its closing separator; nothing in a single segment), 0 at pads."""
    sep = (ids == sep_id).long()
    types = ((sep.cumsum(1) - sep) > 0).long()
    return types if padding_mask is None else types.masked_fill(padding_mask, 0)


def _segment_separator(text_model: HFTextModel) -> Optional[int]:
    """The separator id when the model has a segment (token type) table and its tokenizer gives a pair's
    segments their own type ids (BERT), else None: XLM-R's tokenizer gives zeros, whatever its config's
    ``type_vocab_size``; XLM has no such table (its tokenizer's type ids would be added through the
    word embeddings, ``</s> a </s> b </s>`` as ``0 0 0 1 1``: its models are trained with ``langs``
    alone). The rule of :func:`segment_ids` is checked against the tokenizer's own output on a sample pair."""
    if (getattr(text_model.config, "type_vocab_size", None) or 0) < 2:
        return None
    tok = text_model.tokenizer
    sample = tok("a", "b", return_token_type_ids=True)
    types = list(sample.get("token_type_ids") or [])
    if not any(types):
        return None
    sep = tok.sep_token_id
    if sep is None or segment_ids(torch.tensor([sample["input_ids"]]), sep)[0].tolist() != types:
        raise XltError(f"the {type(tok).__name__} gives a pair's segments type ids xlt cannot reproduce from the "
                       f"ids alone", text_model.source)
    return sep


def _layer_hook(hook: LayerHook, number: int):
    def apply(module: nn.Module, inputs: Any, output: Any) -> Any:
        if isinstance(output, tuple):   # some layers return (hidden, attentions ...)
            return (hook(number, output[0]), *output[1:])
        return hook(number, output)
    return apply


class HFEncoder(nn.Module):
    """A transformers base model behind the xlt encoder's call: ``(ids, lang, padding_mask, layer_hook=,
    lang_embedding=) -> .last_hidden_state``. Differentiable (the trainer fine-tunes it)."""

    def __init__(self, base: nn.Module, config: HFEncoderConfig, lang2id: dict[str, int],
                 segment_sep: Optional[int], source: str):
        super().__init__()
        self.model = base
        self.config = config
        self.lang2id = dict(lang2id)        # empty: the model has no language embedding
        self.segment_sep = segment_sep      # a model with segment (token type) ids: the separator's id
        self.source = source

    def language_specific_parameters(self) -> Iterator[tuple[str, nn.Parameter]]:
        return iter(())   # one network for every language: zero-shot transfer freezes nothing extra

    def bottom_prefixes(self, k: int) -> tuple[str, ...]:
        """Parameter-name prefixes of the embeddings and layers 1..k (``--freeze-bottom k``)."""
        base = self.model
        if hasattr(base, "embeddings") and hasattr(getattr(base, "encoder", None), "layer"):
            return ("model.embeddings.", *(f"model.encoder.layer.{i}." for i in range(k)))
        if hasattr(base, "layer_norm_emb"):   # XLM: per-layer ModuleLists
            embeddings = ("embeddings", "position_embeddings", "lang_embeddings", "layer_norm_emb")
            layers = ("attentions", "layer_norm1", "ffns", "layer_norm2")
            return (*(f"model.{m}." for m in embeddings), *(f"model.{m}.{i}." for i in range(k) for m in layers))
        raise XltError(f"--freeze-bottom: xlt does not know the layers of a {base.config.model_type} model",
                       self.source)

    def forward(self, ids: Tensor, lang: str, padding_mask: Optional[Tensor] = None,
                layer_hook: Optional[LayerHook] = None, lang_embedding: Optional[str] = None) -> EncoderOutput:
        """ids [B,T] (padding_mask [B,T], True at pads) -> last_hidden_state [B,T,D]; ``layer_hook(l,
        hidden [B,T,D])`` replaces layer l's output (0: the embeddings) through a forward hook."""
        inputs: dict[str, Tensor] = {"input_ids": ids}
        if padding_mask is not None:
            inputs["attention_mask"] = (~padding_mask).long()
        if self.segment_sep is not None:
            inputs["token_type_ids"] = segment_ids(ids, self.segment_sep, padding_mask)
        if self.lang2id:
            inputs["langs"] = torch.full_like(ids, self.lang2id[lang_embedding or lang])
        handles = []
        if layer_hook is not None:
            sites = layer_output_modules(self.model, self.source)
            handles = [site.register_forward_hook(_layer_hook(layer_hook, number)) for number, site in enumerate(sites)]
        try:
            with sdpa_kernel(ATTENTION_BACKENDS):   # as xlt's own encoder: no cuDNN plan per batch shape
                return EncoderOutput(self.model(**inputs, return_dict=True).last_hidden_state)
        finally:
            for handle in handles:
                handle.remove()


class HFText:
    """One language's text pipeline for the tasks: words and lines -> the model's ids, and its input layout
    (:func:`xlt.finetune.inputs.model_input` asks for it). Tasks memoise encodings per pipeline object."""

    def __init__(self, model: HFTextModel, lang: str):
        self.model, self.lang = model, lang
        self.pad_id = model.pad_id

    def encode_lines(self, lines: Sequence[str]) -> list[list[int]]:
        return self.model.encode_lines(self.lang, lines)

    def encode_words(self, words: Sequence[str]) -> tuple[list[int], list[int]]:
        return self.model.encode_words(self.lang, words)

    def model_input(self, *segments: Sequence[int]) -> list[int]:
        if len(segments) == 1:
            return self.model.wrap(segments[0])
        if len(segments) == 2:
            return self.model.wrap_pair(*segments)
        raise XltError(f"a transformers model takes one or two segments per input, not {len(segments)}",
                       self.model.source)

    def special_positions(self, segments: int) -> int:
        return 2 if segments == 1 else self.model.pair_special_count()


@dataclass
class _Model:
    encoder: HFEncoder


def _sha256_config(config: Any) -> str:
    # Without the library's version and the hub commit: the same architecture under another transformers
    # release is the same run (the weights' checksum catches a changed checkpoint).
    data = {k: v for k, v in config.to_dict().items() if k not in ("transformers_version", "_commit_hash")}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def _sha256_tokenizer(tokenizer: Any) -> str:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    text = backend.to_str() if backend is not None else json.dumps(sorted(tokenizer.get_vocab().items()))
    return hashlib.sha256(f"{type(tokenizer).__name__}|{text}".encode()).hexdigest()


def config_languages(spec: str, checkpoint: str) -> list[str]:
    """The languages :meth:`HFFinetuneModel.load` gives the model, read from its config alone: an XLM
    model's ``lang2id`` when it uses language embeddings, else none (any language). A config that cannot be
    read gives none: loading the model then says why."""
    import transformers

    transformers.logging.set_verbosity_error()
    name, options = hub_source(hf_model_dir(spec, checkpoint))
    try:
        config = transformers.AutoConfig.from_pretrained(name, **options)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []
    uses = bool(getattr(config, "use_lang_emb", False)) and int(getattr(config, "n_langs", 1)) > 1
    return list(getattr(config, "lang2id", None) or {}) if uses else []


@dataclass
class HFFinetuneModel:
    """What the runner needs of a transformers model: ``model.encoder``, ``config``, ``languages``,
    ``step``, ``text(lang)`` and an identity (see the module docstring)."""

    text_model: HFTextModel
    model: _Model
    config: HFEncoderConfig
    languages: list[str]
    checkpoint: str
    weights_sha256: str
    step: Optional[int] = None
    _texts: dict[str, HFText] = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, spec: str, checkpoint: str) -> "HFFinetuneModel":
        text_model = HFTextModel.load(hf_model_dir(spec, checkpoint))   # refuses a checkpoint it cannot give
        text_model.wrap([])   # a tokenizer with another layout fails now, before any run
        # Checksummed before re-initialising: the control is named by the model it re-initialises.
        weights = state_sha256(text_model.base)
        if checkpoint == "untrained":
            # The model's own init (seed 0, so every seed and task of the control starts from the same
            # weights), not xlt's: what "this architecture without pretraining" means for it.
            text_model = text_model.random_like(seed=0)
        base = text_model.base
        if getattr(base, "pooler", None) is not None:
            base.pooler = None   # next-sentence pretraining's head: no task reads it, so it would never train
        config = HFEncoderConfig(text_model.d_model, text_model.n_layers, text_model.max_positions)
        lang2id = text_model.lang2id if text_model.uses_lang_emb else {}
        encoder = HFEncoder(base, config, lang2id, _segment_separator(text_model), text_model.source)
        return cls(text_model, _Model(encoder), config, list(lang2id), checkpoint, weights)

    @property
    def source(self) -> str:
        return self.text_model.source

    def text(self, lang: str) -> HFText:
        if lang not in self._texts:
            self.text_model.check_language(lang)
            self._texts[lang] = HFText(self.text_model, lang)
        return self._texts[lang]

    def identity(self) -> dict[str, Any]:
        """What decides the trained model, for the run directory's hash and results.json."""
        tm = self.text_model
        return {"hf_model": self.source, "model_type": getattr(tm.config, "model_type", None),
                "checkpoint": self.checkpoint, "weights_sha256": self.weights_sha256,
                "config_sha256": _sha256_config(tm.config), "tokenizer_sha256": _sha256_tokenizer(tm.tokenizer)}
