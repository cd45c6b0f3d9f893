"""The bidirectional Transformer encoder of Wu et al. (2020), with language-specific parts.

One readable file in the nanoGPT spirit. The network is XLM's ``TransformerModel`` as an encoder
(the code Wu et al. trained with): learned token + position (+ language) embeddings, an embedding
LayerNorm, then post-LN Transformer layers (residual add, then LayerNorm), GELU feed-forward.

A batch is ONE language (the paper's batching), so every call takes one ``lang``; it selects that
language's embeddings, bottom layers and language embedding. What is language-specific comes from
the config's :class:`~xlt.model.config.SharingSpec`: such a part is a :class:`LanguageSpecific`
module holding one copy per language under ``by_lang.<code>``, so its parameters are named e.g.
``layers.0.by_lang.fr.attention.qkv.weight`` and fine-tuning can freeze them by name
(:meth:`Encoder.language_specific_parameters`). Everything else is one shared tensor.

Analyses get two small hooks instead of a copy of the network:

* ``layer_hook(layer, hidden) -> hidden`` is applied to the output of the embeddings (layer 0) and
  of every Transformer layer; what it returns flows on. Adding a vector after layer ``l`` (Liu et
  al.'s mean-difference shift) or applying a linear map to one layer's output are both one-liners.
* :meth:`Encoder.embed` and :meth:`Encoder.encode_from` split the forward pass, so a stored layer-``l``
  representation can be run through the remaining layers.

Shapes: B batch rows, T positions, D = d_model, H heads, V = vocab_size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from xlt.model.config import EncoderConfig, SharingSpec  # noqa: F401  (re-exported: the config lives beside the model)
from xlt.utils.errors import XltError

LayerHook = Callable[[int, Tensor], Tensor]

# Attention kernels without cuDNN's, PyTorch's first choice on Hopper: cuDNN builds an execution plan
# for every new shape, 11-16 ms of CPU a call on an H200, so a fine-tuning step, whose batches vary in
# length, spent 90 % of its time there (bench_finetune.py --profile, 2026-12-04). Flash and
# memory-efficient attention need no plan; the CPU has neither cuDNN nor a plan.
ATTENTION_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


@dataclass
class EncoderOutput:
    """``last_hidden_state`` [B,T,D]; ``hidden_states``: n_layers+1 tensors [B,T,D] (layer 0 = embeddings
    after LayerNorm and dropout) when asked for, else None."""

    last_hidden_state: Tensor
    hidden_states: Optional[tuple[Tensor, ...]] = None


class LanguageSpecific(nn.Module):
    """One copy of a module per language, under ``by_lang.<code>``."""

    def __init__(self, make: Callable[[], nn.Module], languages: list[str]):
        super().__init__()
        self.by_lang = nn.ModuleDict({lang: make() for lang in languages})


def for_language(module: nn.Module, lang: str) -> nn.Module:
    """The copy of ``module`` that language ``lang`` uses (the module itself when it is shared)."""
    return module.by_lang[lang] if isinstance(module, LanguageSpecific) else module


def maybe_per_language(make: Callable[[], nn.Module], separate: bool, languages: list[str]) -> nn.Module:
    return LanguageSpecific(make, languages) if separate else make()


class SelfAttention(nn.Module):
    """Multi-head self-attention through ``F.scaled_dot_product_attention``."""

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.n_heads = config.n_heads
        self.attention_dropout = config.attention_dropout
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)  # one matmul for Q, K and V
        self.out = nn.Linear(config.d_model, config.d_model)

    def forward(self, x: Tensor, attend: Optional[Tensor]) -> Tensor:
        """x [B,T,D]; attend: None (every key) or Bool [B,1,1,T], True where a key may be attended to."""
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_heads, D // self.n_heads).permute(2, 0, 3, 1, 4)
        with sdpa_kernel(ATTENTION_BACKENDS):
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=attend,
                                               dropout_p=self.attention_dropout if self.training else 0.0)
        return self.out(y.transpose(1, 2).reshape(B, T, D))


class TransformerLayer(nn.Module):
    """Post-LN layer (BERT / XLM): x = LN(x + Attn(x)); x = LN(x + FFN(x))."""

    def __init__(self, config: EncoderConfig):
        super().__init__()
        self.attention = SelfAttention(config)
        self.attention_norm = nn.LayerNorm(config.d_model, eps=1e-12)
        self.ffn_in = nn.Linear(config.d_model, config.d_ffn)
        self.ffn_out = nn.Linear(config.d_ffn, config.d_model)
        self.ffn_norm = nn.LayerNorm(config.d_model, eps=1e-12)
        self.activation = nn.GELU() if config.activation == "gelu" else nn.ReLU()
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: Tensor, attend: Optional[Tensor]) -> Tensor:
        x = self.attention_norm(x + self.dropout(self.attention(x, attend)))
        return self.ffn_norm(x + self.dropout(self.ffn_out(self.activation(self.ffn_in(x)))))


class Encoder(nn.Module):
    """Token (+position, +language) embeddings and ``n_layers`` Transformer layers."""

    def __init__(self, config: EncoderConfig):
        super().__init__()
        config.validate()
        self.config = config
        sharing, langs, D = config.sharing, config.languages, config.d_model
        self.token_embeddings = maybe_per_language(
            lambda: nn.Embedding(config.vocab_size, D), sharing.separate_embeddings, langs)
        self.position_embeddings = maybe_per_language(
            lambda: nn.Embedding(config.max_positions, D), sharing.separate_embeddings, langs)
        # One shared table with a row per language (XLM); not part of the sharing spec.
        self.language_embeddings = nn.Embedding(len(langs), D) if config.lang_embeddings else None
        self.embedding_norm = nn.LayerNorm(D, eps=1e-12)
        self.dropout = nn.Dropout(config.dropout)
        self.layers = nn.ModuleList(
            maybe_per_language(lambda: TransformerLayer(config), sharing.layer_is_separate(i + 1), langs)
            for i in range(config.n_layers))
        self.apply(init_weights)

    def token_embedding_weight(self, lang: str | int) -> Tensor:
        """The input token table [V,D] of ``lang`` (what its output softmax is tied to)."""
        code = self.config.languages[self.config.language_index(lang)]
        return for_language(self.token_embeddings, code).weight

    def embed(self, ids: Tensor, lang: str | int, lang_embedding: str | int | None = None) -> Tensor:
        """ids Long [B,T] of one language -> layer-0 states [B,T,D] (after LayerNorm and dropout).

        ``lang_embedding``: the language whose language-embedding row is added (default ``lang``);
        which id to feed at zero-shot test time is a decision the papers leave open.
        """
        index = self.config.language_index(lang)
        code = self.config.languages[index]
        T = ids.shape[1]
        if T > self.config.max_positions:
            raise XltError(f"sequence of {T} positions is longer than max_positions={self.config.max_positions}")
        positions = torch.arange(T, device=ids.device)
        x = for_language(self.token_embeddings, code)(ids) + for_language(self.position_embeddings, code)(positions)
        if self.language_embeddings is not None:
            row = index if lang_embedding is None else self.config.language_index(lang_embedding)
            x = x + self.language_embeddings.weight[row]
        return self.dropout(self.embedding_norm(x))

    def encode_from(self, hidden: Tensor, lang: str | int, start_layer: int = 0,
                    padding_mask: Optional[Tensor] = None, output_hidden_states: bool = False,
                    layer_hook: Optional[LayerHook] = None) -> EncoderOutput:
        """Run layers ``start_layer+1 .. n_layers`` on ``hidden`` [B,T,D], the output of layer ``start_layer``.

        ``layer_hook`` is applied to ``hidden`` itself first (as layer ``start_layer``), then to each
        layer's output. ``hidden_states`` holds the (hooked) states of layers ``start_layer .. n_layers``.
        ``padding_mask`` Bool [B,T] is True at padding positions: they are never attended to (their
        own outputs are meaningless). Every row needs at least one non-padding position.
        """
        if not 0 <= start_layer <= self.config.n_layers:
            raise XltError(f"start_layer must be in 0..{self.config.n_layers}, got {start_layer}")
        code = self.config.languages[self.config.language_index(lang)]
        # No mask at all without padding, so SDPA can pick its fastest kernel.
        attend = None if padding_mask is None else ~padding_mask[:, None, None, :]
        if layer_hook is not None:
            hidden = layer_hook(start_layer, hidden)
        states = [hidden] if output_hidden_states else None
        for number in range(start_layer + 1, self.config.n_layers + 1):
            hidden = for_language(self.layers[number - 1], code)(hidden, attend)
            if layer_hook is not None:
                hidden = layer_hook(number, hidden)
            if states is not None:
                states.append(hidden)
        return EncoderOutput(hidden, tuple(states) if states is not None else None)

    def forward(self, ids: Tensor, lang: str | int, padding_mask: Optional[Tensor] = None,
                output_hidden_states: bool = False, layer_hook: Optional[LayerHook] = None,
                lang_embedding: str | int | None = None) -> EncoderOutput:
        """ids Long [B,T] of one language ``lang`` (code or index); padding_mask Bool [B,T], True = pad.

        See :meth:`embed` for ``lang_embedding`` and :meth:`encode_from` for the rest.
        """
        hidden = self.embed(ids, lang, lang_embedding)
        return self.encode_from(hidden, lang, 0, padding_mask, output_hidden_states, layer_hook)

    def language_specific_parameters(self, lang: str | int | None = None) -> Iterator[tuple[str, nn.Parameter]]:
        """(name, parameter) of every language-specific parameter, or only of ``lang``'s copies.

        The language embedding table is not among them: it is one tensor (a row per language).
        """
        yield from language_specific_parameters(self, self.config, lang)

    def count_parameters(self) -> int:
        """Number of distinct parameter elements (every language copy counted once)."""
        return sum(p.numel() for p in self.parameters())

    def layer_parameters_per_language(self) -> int:
        """Parameters of the Transformer layers one token passes through (one copy of separate layers)."""
        code = self.config.languages[0]
        return sum(p.numel() for layer in self.layers for p in for_language(layer, code).parameters())


def language_specific_parameters(module: nn.Module, config: EncoderConfig,
                                 lang: str | int | None = None) -> Iterator[tuple[str, nn.Parameter]]:
    """Named parameters of ``module`` that sit under ``by_lang.<code>`` (for ``lang`` only, if given)."""
    wanted = None if lang is None else config.languages[config.language_index(lang)]
    for name, param in module.named_parameters():
        parts = name.split(".")
        if "by_lang" in parts:
            code = parts[parts.index("by_lang") + 1]
            if wanted is None or code == wanted:
                yield name, param


def start_copies_equal(encoder: Encoder) -> None:
    """Give every language's copy of a separated module (position table, bottom layers) the first
    language's initial weights; the token tables keep their independent draws.

    Why: the copies are still trained apart, but with independent draws the shared layers settle
    on the first language that learns to read its context, and the other language's positions and
    layers never fit them: at the demo scale (mini, 5M tokens) Sep Emb's English stayed at the
    unigram plateau (dev ppl 1,222, still 1,145 after 13k steps) while its own monolingual model
    reached 254; with equal position tables it reached 621 (docs/pretrain.md). Equal token rows
    would make every string both languages spell alike an anchor, which Sep Emb exists to remove.
    """
    first = encoder.config.languages[0]
    for module in encoder.modules():
        if isinstance(module, LanguageSpecific) and module is not encoder.token_embeddings:
            weights = module.by_lang[first].state_dict()
            for copy in module.by_lang.values():
                copy.load_state_dict(weights)


def init_weights(module: nn.Module) -> None:
    """XLM's initialisation (the code Wu et al. trained with): every embedding table N(0, D^-1/2),
    Linear layers PyTorch's default U(+-1/sqrt(fan_in)), unit LayerNorm.

    Why not BERT's N(0, 0.02) everywhere: with the softmax tied to the token table, 0.02 keeps
    position embeddings so small next to the token rows the softmax pulls up that a narrow model
    takes many times longer to learn to attend by position (tests/test_model_learning.py; at
    D=768 the two schemes nearly coincide except for the embeddings: 0.036 vs 0.02).
    The padding row is not special-cased: padded keys are masked out of attention and padding is
    never a prediction target, so its embedding cannot influence any non-padding output.
    """
    if isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, mean=0.0, std=module.embedding_dim ** -0.5)
    elif isinstance(module, (nn.Linear, nn.LayerNorm)):
        module.reset_parameters()
