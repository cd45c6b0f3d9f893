"""The one seam between analyses and models: a :class:`TextModel` turns text into ids and ids into states.

Two kinds of model implement it, and every analysis (``extract``, ``cka``, ``shift-decode``, ``align``) is
written once against it:

* an xlt run directory -- :class:`xlt.model.xlt_run.PretrainedRun` (Moses + BPE pipeline,
  language embeddings, one MLM head per language's softmax);
* a Hugging Face model -- :class:`xlt.model.hf.HFTextModel` (the model's own WordPiece, SentencePiece
  or XLM tokenizer, no language embedding unless it is an XLM model with ``lang2id``).

This module is the interface only: it imports no implementation, nor torch. :mod:`xlt.model.spec`
tells the kind from ``--model`` (``hf:NAME``, an xlt run directory, a transformers directory), and
the kind registry :mod:`xlt.loader.kinds` (through :func:`xlt.loader.text_model.load_text_model`), a
layer above the model and pretraining packages, loads it.

Contract every implementation keeps (the analyses rely on it):

* ``wrap(ids)`` puts exactly ONE special token before and one after the content ids (xlt:
  ``</s> x </s>``; BERT: ``[CLS] x [SEP]``; XLM-R: ``<s> x </s>``), so content starts at position 1;
* ``hidden_states`` returns ``n_layers + 1`` tensors [B,T,D], index 0 the embedding output;
* padding is on the right with ``pad_id``; ``padding_mask`` Bool [B,T] is True at pads.

Shapes: B batch rows, T positions, D = d_model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Protocol, Sequence, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    from torch import Tensor


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
        """sha256 of the weights (:func:`xlt.model.weights.state_sha256`): what a cache of the model's outputs
        is keyed by."""

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
