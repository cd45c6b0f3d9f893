"""The one seam between analyses and models: a :class:`TextModel` turns text into ids and ids into states.

Two kinds of model implement it, and every analysis (``extract``, ``cka``, ``shift-decode``, ``align``) is
written once against it:

* an xlt run directory -- :class:`xlt.pretrain.pretrained.PretrainedRun` (Moses + BPE pipeline,
  language embeddings, one MLM head per language's softmax);
* a Hugging Face model -- :class:`xlt.model.hf.HFTextModel` (the model's own WordPiece, SentencePiece
  or XLM tokenizer, no language embedding unless it is an XLM model with ``lang2id``).

:func:`load_text_model` picks the kind from ``--model``: ``hf:NAME`` (the hub or its local cache),
a directory with ``text.json`` and ``vocab`` (an xlt run) or a directory whose ``config.json`` has a
``model_type`` (a transformers model). Nothing here imports torch or transformers at import time.

Contract every implementation keeps (the analyses rely on it):

* ``wrap(ids)`` puts exactly ONE special token before and one after the content ids (xlt:
  ``</s> x </s>``; BERT: ``[CLS] x [SEP]``; XLM-R: ``<s> x </s>``), so content starts at position 1;
* ``hidden_states`` returns ``n_layers + 1`` tensors [B,T,D], index 0 the embedding output;
* padding is on the right with ``pad_id``; ``padding_mask`` Bool [B,T] is True at pads.

Shapes: B batch rows, T positions, D = d_model.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Optional, Protocol, Sequence, runtime_checkable

from xlt.utils.errors import XltError

if TYPE_CHECKING:
    import numpy as np
    from torch import Tensor

HF_PREFIX = "hf:"


@runtime_checkable
class TextModel(Protocol):
    """An encoder together with the text pipeline that makes its inputs (see the module docstring)."""

    n_layers: int            # Transformer layers; hidden_states has n_layers + 1 entries
    d_model: int             # hidden size D
    max_positions: int       # longest input, the two specials included
    pad_id: int              # id the batches are right-padded with
    unk_id: int              # id of the unknown token (a word the pipeline cannot spell)
    special_ids: frozenset   # ids that are never words (dropped from decoded output)
    step: Optional[int]      # training step of an xlt run; None for a Hugging Face model
    has_head: bool           # a masked-LM head to decode with (shift-decode translate needs one)

    @property
    def source(self) -> str:
        """What headers and reports name: an absolute run/model directory, or ``hf:NAME``."""

    def describe(self) -> dict:
        """JSON-friendly identity: ``{"source", "kind", "step", "model"}`` (model: pretrained or random:SEED)."""

    def check_language(self, lang: str) -> None:
        """XltError (one line) unless the model can take text of ``lang``."""

    def weights_sha256(self) -> str:
        """sha256 of the weights (:func:`state_sha256`): what a cache of the model's outputs is keyed by."""

    def encode_lines(self, lang: str, lines: Sequence[str]) -> list[list[int]]:
        """Raw lines -> content ids, no special tokens."""

    def encode_words(self, lang: str, words: Sequence[str]) -> tuple[list[int], list[int]]:
        """Pre-tokenized words -> (content ids, index of each word's first id); a word that the
        pipeline reduces to nothing becomes one unknown token, so every word has a row."""

    def split_words(self, lang: str, line: str) -> list[str]:
        """A raw line -> its words as the model's pipeline segments them (xlt: its Moses tokenizer; a
        transformers model: its tokenizer's normalizer and pre-tokenizer): the units that word pooling
        averages over and that dictionary words are matched against."""

    def input_embeddings(self, lang: str) -> tuple["np.ndarray", dict[int, str]]:
        """The static-embedding space of ``lang``: the input token embedding table float32 [V,D] that its
        ids look up, and its whole-word tokens {id: word} (a token that is a word by itself, not a piece)."""

    def wrap(self, ids: Sequence[int]) -> list[int]:
        """Content ids -> model input: one special token before and one after."""

    def hidden_states(self, ids: "Tensor", padding_mask: Optional["Tensor"], lang: str) -> tuple["Tensor", ...]:
        """ids Long [B,T] -> n_layers + 1 states [B,T,D] (eval mode, no gradient)."""

    def shifted_decode(self, ids: "Tensor", padding_mask: Optional["Tensor"], lang: str,
                       shifts: Sequence[tuple[int, "Tensor"]], decode_lang: str) -> list["Tensor"]:
        """For each (layer, vector [D]): add the vector to every position of that layer's output,
        run the layers above, and take the MLM head's argmax -> Long [B,T] (CPU), one per shift."""

    def random_like(self, seed: int) -> "TextModel":
        """The same architecture and text pipeline with freshly initialised weights (CKA lower bound)."""

    def words(self, lang: str, ids: Sequence[int]) -> list[str]:
        """Predicted ids -> the words they spell (specials dropped, subwords joined)."""

    def reference_words(self, lang: str, line: str) -> list[str]:
        """A reference sentence -> words, segmented so that they compare with :meth:`words`' output."""

    def token_set(self, lang: str, path: Optional[str]) -> set[int]:
        """V_lang: ids of the tokens seen in ``lang``'s text (``path``) or recorded with the model."""


def state_sha256(module) -> str:
    """sha256 of a torch module's state: each parameter and buffer's name, dtype, shape and bytes (the
    weights a fine-tuning run starts from, a cache of the model's outputs is keyed by)."""
    import hashlib

    import torch

    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        t = tensor.detach().cpu().contiguous()
        digest.update(f"{name}|{t.dtype}|{tuple(t.shape)}|".encode())
        digest.update(t.reshape(-1).view(torch.uint8).numpy())  # flat: a 0-d tensor has no byte view
    return digest.hexdigest()


def model_source(spec: str) -> str:
    """``hf:NAME`` as it is; a directory as its absolute path (what headers record)."""
    return spec if spec.startswith(HF_PREFIX) else os.path.abspath(spec)


def model_kind(spec: str) -> str:
    """``"xlt"`` or ``"hf"`` for a ``--model`` value; XltError for anything else.

    An xlt run is recognised by ``text.json`` + ``vocab`` (what pretraining writes beside its
    checkpoints); a transformers directory by a ``config.json`` naming a ``model_type``.
    """
    if spec.startswith(HF_PREFIX):
        if not spec[len(HF_PREFIX):].strip():
            raise XltError(f"{spec!r} names no model: write hf:NAME, e.g. hf:bert-base-multilingual-cased")
        return "hf"
    if not os.path.isdir(spec):
        raise XltError("no such model directory (give an xlt run directory, a transformers model directory "
                       "or hf:NAME)", spec)
    if all(os.path.exists(os.path.join(spec, name)) for name in ("text.json", "vocab")):
        return "xlt"
    config = os.path.join(spec, "config.json")
    if os.path.isfile(config):
        try:
            with open(config, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            data = None
        if isinstance(data, dict) and "model_type" in data:
            return "hf"
    raise XltError("neither an xlt run directory (no text.json and vocab) nor a transformers model directory "
                   "(no config.json with a model_type)", spec)


def model_depth(spec: str) -> int:
    """Transformer layers of ``--model`` from its configuration alone, no weights loaded (the Makefile's
    ``MODEL=`` places Liu et al.'s layers with it): an xlt run's ``config.json``, a transformers
    config's ``num_hidden_layers`` (``hf:NAME`` through the hub or its cache)."""
    if model_kind(spec) == "xlt":
        path = os.path.join(spec, "config.json")
        try:
            with open(path, encoding="utf-8") as f:
                return int(json.load(f)["config"]["model"]["n_layers"])
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise XltError(f"no layer count in the run's config.json ({type(err).__name__}: {err})", path) from None
    import transformers

    from xlt.model.hub import hub_source

    transformers.logging.set_verbosity_error()
    name, options = hub_source(spec)
    try:
        config = transformers.AutoConfig.from_pretrained(name, **options)
        return int(config.num_hidden_layers)
    except (OSError, ValueError, AttributeError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise XltError(f"cannot read the model's config ({first})", spec) from None


def load_text_model(spec: str, checkpoint: str = "best", device: str = "cpu") -> TextModel:
    """``--model`` -> a :class:`TextModel` on ``device`` in eval mode. ``checkpoint`` applies to xlt runs."""
    if model_kind(spec) == "xlt":
        from xlt.pretrain.pretrained import PretrainedRun

        return PretrainedRun.load(spec, checkpoint, device)
    from xlt.model.hf import HFTextModel

    return HFTextModel.load(spec, device)
