"""The XNLI paper's baseline on static embeddings (Conneau et al. 2018, after InferSent): frozen word
vectors, a BiLSTM whose states are max-pooled over time, and ``[u, v, |u - v|, u * v]`` of the
premise and hypothesis vectors into an MLP.

Two modules, so that the fine-tuning runner treats the baseline like any encoder plus task head:

* :class:`BiLSTMEncoder` -- ids [B,T] -> states [B,T,2H]. Inputs are xlt's ``</s> a </s> b </s>``
  layout (:func:`xlt.model.xlt_run.model_input`); each ``</s>``-delimited segment runs through
  the LSTM on its own (the premise never sees the hypothesis, as in the XNLI baseline), and ``</s>``
  and padding positions get zero states.
* :class:`PairMaxHead` -- states [B,T,D] -> u, v (max over each segment's positions) -> logits [B,C].

Shapes: B rows, T positions, E embedding dimension, H LSTM units per direction, D = 2H, C classes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from xlt.text.vocab import EOS_ID


@dataclass
class BiLSTMConfig:
    """What the encoder looks like; ``d_model`` and ``n_layers`` are what the runner asks of any encoder."""

    embedding_dim: int = field(metadata={"help": "dimension of the static vectors (the file's)"})
    lstm_dim: int = field(default=512, metadata={"help": "LSTM units per direction (XNLI baseline: 512)"})
    dropout: float = field(default=0.0, metadata={"help": "dropout on the word vectors before the LSTM"})

    @property
    def d_model(self) -> int:
        return 2 * self.lstm_dim

    @property
    def n_layers(self) -> int:
        return 1

    @property
    def max_positions(self) -> int:
        return 1 << 20   # an LSTM has no position table: only --max-len bounds an input


@dataclass
class EncoderOutput:
    last_hidden_state: Tensor   # [B,T,D]


def segment_ids(input_ids: Tensor, padding_mask: Optional[Tensor]) -> Tensor:
    """ids [B,T] -> LongTensor [B,T]: k >= 1 at the tokens of the k-th ``</s>``-delimited segment, 0 at
    ``</s>`` and padding. ``</s> a </s> b </s>`` -> 0 1..1 0 2..2 0."""
    is_eos = input_ids == EOS_ID
    seg = is_eos.long().cumsum(1)
    keep = ~is_eos if padding_mask is None else ~is_eos & ~padding_mask
    return seg * keep.long()


class BiLSTMEncoder(nn.Module):
    """Frozen word vectors -> one BiLSTM layer, each segment of an input on its own.

    The vectors are a buffer, not a parameter: nothing trains them and fine-tuning checkpoints (which
    hold trainable tensors only) stay small. Rows of ids without a vector (specials, unknown words)
    are zero, as the XNLI baseline's unknown words.
    """

    def __init__(self, config: BiLSTMConfig, vectors: Tensor):
        super().__init__()
        self.config = config
        self.register_buffer("vectors", vectors.float(), persistent=False)   # [V,E]
        self.dropout = nn.Dropout(config.dropout)
        self.lstm = nn.LSTM(config.embedding_dim, config.lstm_dim, batch_first=True, bidirectional=True)

    def language_specific_parameters(self) -> list[tuple[str, nn.Parameter]]:
        return []   # one network for every language: nothing to freeze for zero-shot transfer

    def forward(self, input_ids: Tensor, lang: str = "", padding_mask: Optional[Tensor] = None,
                layer_hook: Any = None, lang_embedding: Optional[str] = None) -> EncoderOutput:
        """input_ids [B,T] (``padding_mask`` [B,T] True at pads) -> states [B,T,2H]; ``lang``,
        ``layer_hook`` and ``lang_embedding`` are accepted for the runner's encoder call and unused."""
        if layer_hook is not None:
            raise ValueError("a BiLSTM encoder has no layers to map or shift")
        B, T = input_ids.shape
        seg = segment_ids(input_ids, padding_mask)
        hidden = input_ids.new_zeros((B, T, self.config.d_model), dtype=self.vectors.dtype)
        for k in range(1, int(seg.max()) + 1 if seg.numel() else 1):
            member = seg == k                                         # [B,T]
            lengths = member.sum(1)                                   # [B]
            rows = lengths.nonzero().squeeze(1)
            if rows.numel() == 0:
                continue
            L = int(lengths.max())
            # the segment's positions first, in order (a stable sort of 0 for members, 1 for the rest)
            positions = torch.sort((~member[rows]).long(), dim=1, stable=True).indices[:, :L]   # [R,L]
            x = self.dropout(self.vectors[input_ids[rows].gather(1, positions)])                 # [R,L,E]
            packed = nn.utils.rnn.pack_padded_sequence(x, lengths[rows].cpu(), batch_first=True,
                                                       enforce_sorted=False)
            out, _ = self.lstm(packed)
            out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=L)        # [R,L,D]
            valid = torch.arange(L, device=input_ids.device)[None, :] < lengths[rows][:, None]     # [R,L]
            hidden = hidden.index_put((rows[:, None].expand(-1, L)[valid], positions[valid]), out[valid])
        return EncoderOutput(hidden)


def segment_max(hidden: Tensor, seg: Tensor, k: int) -> Tensor:
    """hidden [B,T,D], seg [B,T] -> [B,D]: the max over segment ``k``'s positions (each row must have one)."""
    member = (seg == k).unsqueeze(-1)                                  # [B,T,1]
    if not bool(member.any(1).all()):
        raise ValueError(f"a row has no segment {k}: pair-max pooling needs '</s> a </s> b </s>' inputs")
    return hidden.masked_fill(~member, float("-inf")).max(1).values


class PairMaxHead(nn.Module):
    """Sentence-pair classifier of the XNLI baseline: u, v = max-pooled states of the two segments,
    features [u, v, |u-v|, u*v] [B,4D] -> Linear(4D, M) -> tanh -> dropout -> Linear(M, C)."""

    def __init__(self, d_model: int, labels: Sequence[str], mlp_dim: int = 128, dropout: float = 0.1):
        super().__init__()
        self.labels = list(labels)
        self.mlp = nn.Sequential(nn.Linear(4 * d_model, mlp_dim), nn.Tanh(), nn.Dropout(dropout),
                                 nn.Linear(mlp_dim, len(self.labels)))

    def forward(self, hidden: Tensor, batch: Any) -> Tensor:
        """hidden [B,T,D] and the batch (its ``input_ids`` mark the segments) -> logits [B,C]."""
        seg = segment_ids(batch.input_ids, batch.padding_mask)
        u, v = segment_max(hidden, seg, 1), segment_max(hidden, seg, 2)   # [B,D] each
        return self.mlp(torch.cat([u, v, (u - v).abs(), u * v], dim=-1))

    def loss(self, outputs: Tensor, batch: Any) -> Tensor:
        """logits [B,C] -> mean cross-entropy against ``batch.fields["label"]`` [B]."""
        return F.cross_entropy(outputs, batch.fields["label"])

    def decode(self, outputs: Tensor, batch: Any) -> list[str]:
        return [self.labels[i] for i in outputs.argmax(-1).tolist()]


def embedding_table(vectors: np.ndarray, n_specials: int) -> Tensor:
    """float32 [V,E] file rows -> [n_specials + V, E] with zero rows first (ids of specials, ``<unk>``)."""
    table = np.zeros((n_specials + vectors.shape[0], vectors.shape[1]), dtype=np.float32)
    table[n_specials:] = vectors
    return torch.from_numpy(table)


__all__ = ["BiLSTMConfig", "BiLSTMEncoder", "PairMaxHead", "embedding_table", "segment_ids"]
