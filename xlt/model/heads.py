"""Task heads on top of :class:`~xlt.model.encoder.Encoder`, and the pretraining model.

* :class:`MaskedLMHead` -- XLM's prediction layer: one projection whose weight IS the input token
  table of the batch's language (tied softmax, Press & Wolf 2017) plus an output bias. (BERT puts
  a dense + activation + LayerNorm transform in front; XLM, which Wu et al. trained with, does not.)
  With separate embeddings each language's softmax is tied to its own table and has its own bias.
  The loss gathers the predicted positions first and projects only those: a [B,T,V] logits tensor
  is never built during training.
* :class:`MaskedLM` -- encoder + MLM head; ``forward`` returns the loss the trainer minimises.

Shapes: B batch rows, T positions, D = d_model, V = vocab_size, N predicted positions.
"""

from __future__ import annotations

from typing import Iterator, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from xlt.model.config import EncoderConfig
from xlt.model.encoder import Encoder, for_language, language_specific_parameters, maybe_per_language


class OutputBias(nn.Module):
    """A softmax bias [V], a module so that it can live under ``by_lang.<code>``."""

    def __init__(self, size: int):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(size))


def gather_positions(hidden: Tensor, target_positions: Tensor) -> Tensor:
    """Rows of ``hidden`` [B,T,D] at the targets -> [N,D].

    ``target_positions`` is one of: Long [N,2] of (row, position) pairs (what
    :class:`xlt.data.masking.MaskedBatch` carries); Long [N] of flat indices ``row * T + position``;
    Bool [B,T], True where a token is predicted (targets then in row-major order, as ``ids[mask]``).
    """
    if target_positions.dtype == torch.bool:
        return hidden[target_positions]
    if target_positions.dim() == 2:
        return hidden[target_positions[:, 0], target_positions[:, 1]]
    return hidden.reshape(-1, hidden.shape[-1]).index_select(0, target_positions)


class MaskedLMHead(nn.Module):
    """The tied decoder of the batch's language plus its output bias."""

    def __init__(self, config: EncoderConfig, encoder: Encoder):
        super().__init__()
        self.config = config
        self.output_bias = maybe_per_language(lambda: OutputBias(config.vocab_size),
                                              config.sharing.separate_embeddings, config.languages)
        # A bound method, not a submodule: the tied table stays registered once (in the encoder),
        # so checkpoints hold it once and parameter counts are not doubled.
        self.decoder_weight = encoder.token_embedding_weight

    def logits(self, hidden: Tensor, lang: str | int) -> Tensor:
        """hidden [..., D] -> logits [..., V] over the vocabulary of ``lang``'s softmax."""
        code = self.config.languages[self.config.language_index(lang)]
        return F.linear(hidden, self.decoder_weight(code), for_language(self.output_bias, code).bias)

    def mlm_loss(self, hidden: Tensor, target_positions: Tensor, target_ids: Tensor, lang: str | int,
                 reduction: str = "mean") -> Tensor:
        """Cross-entropy of ``target_ids`` Long [N] at ``target_positions`` (see :func:`gather_positions`).

        The softmax is computed at the N predicted positions only ("mean" or "sum" over them). With
        N = 0 (a batch of special tokens alone: nothing to predict) the loss is 0, not the NaN of a
        mean over nothing, which would stop a run as if it had diverged.
        """
        logits = self.logits(gather_positions(hidden, target_positions), lang)
        if target_ids.numel() == 0:
            return logits.float().sum() * 0.0   # still in the graph: every process's backward meets the head
        # float32 softmax even under bf16 autocast: the log-sum-exp over V terms needs the mantissa.
        return F.cross_entropy(logits.float(), target_ids, reduction=reduction)

    @torch.no_grad()
    def predict_all(self, hidden: Tensor, lang: str | int, chunk_tokens: int = 2048) -> Tensor:
        """Logits at every position: hidden [B,T,D] -> [B,T,V], computed ``chunk_tokens`` rows at a time
        so that no intermediate beyond one chunk is held next to the output."""
        B, T, D = hidden.shape
        flat = hidden.reshape(B * T, D)
        out: Optional[Tensor] = None
        for start in range(0, B * T, chunk_tokens):
            chunk = self.logits(flat[start:start + chunk_tokens], lang)
            if out is None:
                out = chunk.new_empty(B * T, chunk.shape[-1])
            out[start:start + chunk.shape[0]] = chunk
        return out.view(B, T, -1)

    @torch.no_grad()
    def decode(self, hidden: Tensor, lang: str | int, chunk_tokens: int = 2048) -> Tensor:
        """Argmax token at every position: hidden [B,T,D] -> Long [B,T], never holding more than one
        chunk of logits (what shift-decoding needs)."""
        B, T, D = hidden.shape
        flat = hidden.reshape(B * T, D)
        best = [self.logits(flat[start:start + chunk_tokens], lang).argmax(-1)
                for start in range(0, B * T, chunk_tokens)]
        return torch.cat(best).view(B, T)


class MaskedLM(nn.Module):
    """The pretraining model: :class:`Encoder` + :class:`MaskedLMHead`."""

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.config = config
        self.encoder = Encoder(config)
        self.head = MaskedLMHead(config, self.encoder)

    def forward(self, ids: Tensor, lang: str | int, padding_mask: Optional[Tensor],
                target_positions: Tensor, target_ids: Tensor, reduction: str = "mean") -> Tensor:
        """Masked-LM loss of one single-language batch.

        ids Long [B,T] (already masked); padding_mask Bool [B,T] (True = pad) or None;
        target_positions Long [N,2], Long [N] flat or Bool [B,T] (see :func:`gather_positions`);
        target_ids Long [N] (the original tokens).
        Returns the cross-entropy ("mean" or "sum" over the N targets).
        """
        hidden = self.encoder(ids, lang, padding_mask).last_hidden_state
        return self.head.mlm_loss(hidden, target_positions, target_ids, lang, reduction)

    def language_specific_parameters(self, lang: str | int | None = None) -> Iterator[tuple[str, nn.Parameter]]:
        """Language-specific (``by_lang``) parameters of encoder and head, optionally of one language."""
        yield from language_specific_parameters(self, self.config, lang)

    def count_parameters(self) -> int:
        """Number of distinct parameter elements (tied tables counted once)."""
        return sum(p.numel() for p in self.parameters())

    def flops_per_token(self, seq_len: int, predicted_fraction: float = 0.15) -> float:
        """Training FLOPs (forward + backward) per input token, PaLM / Chinchilla appendix convention:

            6 * N_layers + 12 * n_layers * seq_len * d_model + predicted_fraction * 6 * d_model * V

        N_layers: parameters of the Transformer layers one token passes through (one copy of any
        language-specific layer); 12*L*T*D: the QK^T and AV matmuls (2 * 2*T*D per token and layer,
        times 3 for forward + backward); last term: the tied softmax, computed at predicted positions
        only. Embedding lookups, LayerNorms and biases outside the
        layers are left out (they are not matmuls).
        """
        c = self.config
        layers = 6 * self.encoder.layer_parameters_per_language()
        attention = 12 * c.n_layers * seq_len * c.d_model
        head = predicted_fraction * 6 * c.d_model * c.vocab_size
        return float(layers + attention + head)
