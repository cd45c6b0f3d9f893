"""Masked-language-model masking as a data transform (fairseq style, not inside the trainer).

A batch of token windows ``LongTensor[B, T]`` becomes a :class:`MaskedBatch`: the model input and
the positions and ids to predict. Decisions where the papers and XLM leave room:

* **How many positions.** Exactly ``round(mask_prob * n_candidates)`` per batch (at least one when
  there is any candidate), chosen uniformly without replacement. XLM draws a Bernoulli per token;
  an exact count gives a stable number of predictions per step, so "softmax at the predicted
  positions only" has a fixed size for a fixed batch shape and the loss scale does not jitter.
* **What may be predicted.** Every position except special tokens (``<s> </s> <pad> <unk>
  <mask>``, the ``special_ids`` the caller passes; :meth:`MaskTransform.from_vocabulary` passes all
  five). Position 0 is predictable (XLM never predicts it). ``<unk>`` is excluded too: it is the
  one token every language shares, so predicting it would be an output-side anchor in the "no
  anchors" ablations, and it carries no word to recover.
* **Of the predicted positions**, each independently becomes ``<mask>`` (``mask_token``), stays
  unchanged (``keep``) or becomes a random token (``random``): 80/10/10 as BERT and XLM.
* **Random tokens** come from the batch language's own token ids when ``random_within_language``,
  else from every non-special id (XLM). Drawing from the whole vocabulary injects the other
  language's tokens, i.e. anchors, into a model whose vocabularies are meant to be disjoint.
  ``random_within_language=None`` in the config means "let the caller decide from the model":
  :meth:`MaskingConfig.resolved` picks True when embeddings are separate (Sep Emb) or the
  vocabulary is language-prefixed (No anchors), False otherwise (Default reproduces XLM).
* **Dev perplexity** (``eval_mode=True``): the same choice of positions, every one replaced by
  ``<mask>`` (XLM's evaluator does this; ``eval_mask_all=False`` keeps 80/10/10). With a generator
  seeded by a fixed seed at the start of each pass, every evaluation masks the same positions.

Determinism: the output is a function of the batch, the language and the generator state (save
``generator.get_state()`` in checkpoints for exact resume; give each rank its own seed, unlike the
language sampler, since ranks mask different batches anyway). Masking runs on the CPU batch that :class:`~xlt.data.streams.LanguageStream` yields; move the result
with :meth:`MaskedBatch.to`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Mapping, Optional, Sequence

import torch

from xlt.text.vocab import MASK_ID, SPECIALS, Vocabulary
from xlt.utils.errors import XltError


@dataclass(frozen=True)
class MaskingConfig:
    """Settings of the MLM masking; each field's ``help`` metadata is the CLI help text."""

    mask_prob: float = field(default=0.15, metadata={
        "help": "fraction of the non-special tokens of a batch that are predicted (exact count per batch)"})
    mask_token: float = field(default=0.8, metadata={
        "help": "of the predicted tokens, the fraction replaced by <mask> in the input"})
    keep: float = field(default=0.1, metadata={
        "help": "of the predicted tokens, the fraction left unchanged in the input"})
    random: float = field(default=0.1, metadata={
        "help": "of the predicted tokens, the fraction replaced by a random token"})
    random_within_language: Optional[bool] = field(default=None, metadata={
        "help": "draw random replacements from the batch language's own tokens (true) or from the whole "
                "vocabulary as XLM (false); unset: true for separate embeddings or language-prefixed "
                "vocabularies, false otherwise"})
    eval_mask_all: bool = field(default=True, metadata={
        "help": "dev perplexity replaces every predicted token by <mask> (XLM's evaluation); false uses "
                "the training mask/keep/random mixture"})

    def __post_init__(self) -> None:
        if not 0.0 < self.mask_prob <= 1.0:
            raise XltError(f"mask_prob must be in (0, 1], got {self.mask_prob}")
        shares = (self.mask_token, self.keep, self.random)
        if min(shares) < 0 or not math.isclose(sum(shares), 1.0, abs_tol=1e-6):
            raise XltError(f"mask/keep/random fractions must be >= 0 and sum to 1, got {shares}")

    def resolved(self, *, separate_embeddings: bool, prefix_lang: bool) -> "MaskingConfig":
        """This config with ``random_within_language`` decided from the model when it was left unset."""
        if self.random_within_language is not None:
            return self
        return replace(self, random_within_language=separate_embeddings or prefix_lang)


@dataclass
class MaskedBatch:
    """One masked batch.

    Attributes:
        input_ids: LongTensor[B, T], the model input.
        target_positions: LongTensor[N, 2], (row, column) of each predicted position, in row-major
            order, so ``hidden[batch.target_mask]`` (shape [N, H]) lines up with ``target_ids``.
        target_ids: LongTensor[N], the original token at each predicted position.
    """

    input_ids: torch.Tensor
    target_positions: torch.Tensor
    target_ids: torch.Tensor

    @property
    def flat_positions(self) -> torch.Tensor:
        """LongTensor[N]: ``row * T + column``, indices into ``input_ids.view(-1)``."""
        return self.target_positions[:, 0] * self.input_ids.shape[1] + self.target_positions[:, 1]

    @property
    def target_mask(self) -> torch.Tensor:
        """BoolTensor[B, T], True at predicted positions."""
        mask = torch.zeros(self.input_ids.shape, dtype=torch.bool, device=self.input_ids.device)
        mask[self.target_positions[:, 0], self.target_positions[:, 1]] = True
        return mask

    def to(self, device: torch.device | str) -> "MaskedBatch":
        """The batch on ``device``. To CUDA through pinned memory and without waiting: a copy from
        pageable memory first waits for every kernel already queued, so the CPU could not mask the
        next batch while the GPU trains on this one."""
        device = torch.device(device)
        pinned = device.type == "cuda"
        return MaskedBatch(*((t.pin_memory() if pinned else t).to(device, non_blocking=pinned)
                             for t in (self.input_ids, self.target_positions, self.target_ids)))


def n_predictions(n_candidates: int, mask_prob: float) -> int:
    """round(mask_prob * n_candidates), half up, and at least 1 when there is a candidate."""
    if n_candidates == 0:
        return 0
    return max(1, math.floor(mask_prob * n_candidates + 0.5))


class MaskTransform:
    """Turns token windows into masked MLM batches (see the module docstring for the rules).

    Args:
        config: masking settings; ``random_within_language`` must be decided (see
            :meth:`MaskingConfig.resolved`).
        mask_id: id of ``<mask>``.
        special_ids: ids never predicted and never drawn as random replacements.
        vocab_size: size of the embedding table; random replacements are ids below it.
        language_token_ids: ``{lang: LongTensor[V_lang]}``, the ids a language's random replacements
            are drawn from; required when ``random_within_language``.
    """

    def __init__(self, config: MaskingConfig, mask_id: int, special_ids: Sequence[int], vocab_size: int,
                 language_token_ids: Optional[Mapping[str, torch.Tensor]] = None):
        if config.random_within_language is None:
            raise XltError("random_within_language is unset: call MaskingConfig.resolved() with the model's settings")
        self.config = config
        self.mask_id = int(mask_id)
        self.vocab_size = int(vocab_size)
        self.special_ids = torch.tensor(sorted({int(i) for i in special_ids} | {self.mask_id}), dtype=torch.long)
        ordinary = torch.ones(self.vocab_size, dtype=torch.bool)
        ordinary[self.special_ids[self.special_ids < self.vocab_size]] = False
        self.all_token_ids = torch.nonzero(ordinary).squeeze(1)
        if len(self.all_token_ids) == 0:
            raise XltError("the vocabulary has no token besides the special ones")
        self.language_token_ids: dict[str, torch.Tensor] = {}
        for lang, ids in (language_token_ids or {}).items():
            ids = torch.as_tensor(ids, dtype=torch.long)
            if len(ids) == 0:
                raise XltError(f"language {lang!r} owns no token to draw random replacements from")
            if ids.min() < 0 or ids.max() >= self.vocab_size or not ordinary[ids].all():
                raise XltError(f"the token ids of language {lang!r} must be non-special ids below {self.vocab_size}")
            self.language_token_ids[lang] = ids
        if config.random_within_language and not self.language_token_ids:
            raise XltError("random_within_language needs the token ids of each language")
        self._train_shares = (config.mask_token, config.keep)
        self._eval_shares = (1.0, 0.0) if config.eval_mask_all else self._train_shares

    @classmethod
    def from_vocabulary(cls, config: MaskingConfig, vocab: Vocabulary, languages: Sequence[str]) -> "MaskTransform":
        """A transform for ``vocab``: all five specials excluded, each language's owned ids as its pool."""
        language_ids = {lang: torch.tensor(vocab.language_ids(lang), dtype=torch.long) for lang in languages}
        return cls(config, MASK_ID, range(len(SPECIALS)), len(vocab), language_ids)

    def __call__(self, batch: torch.Tensor, lang: str, generator: torch.Generator,
                 eval_mode: bool = False) -> MaskedBatch:
        """Mask ``batch`` (LongTensor[B, T], CPU) of language ``lang``.

        ``eval_mode``: dev-perplexity masking (every predicted token becomes ``<mask>`` unless
        ``eval_mask_all`` is off). Seed ``generator`` with a fixed seed at the start of each
        evaluation pass and feed the dev batches in order: every evaluation then masks the same
        positions the same way.
        """
        return self._mask(batch, lang, generator, self._eval_shares if eval_mode else self._train_shares)

    def random_pool(self, lang: str) -> torch.Tensor:
        """LongTensor[V']: the ids random replacements for ``lang`` are drawn from (uniformly)."""
        if not self.config.random_within_language:
            return self.all_token_ids
        if lang not in self.language_token_ids:
            raise XltError(f"no token ids for language {lang!r} (have {', '.join(sorted(self.language_token_ids))})")
        return self.language_token_ids[lang]

    def _mask(self, batch: torch.Tensor, lang: str, generator: torch.Generator,
              shares: tuple[float, float]) -> MaskedBatch:
        if batch.dim() != 2:
            raise ValueError(f"expected a [batch, length] tensor, got shape {tuple(batch.shape)}")
        pool = self.random_pool(lang)
        width = batch.shape[1]
        flat = batch.reshape(-1)
        candidates = torch.nonzero(~torch.isin(flat, self.special_ids)).squeeze(1)
        count = n_predictions(len(candidates), self.config.mask_prob)
        chosen = candidates[torch.randperm(len(candidates), generator=generator)[:count]].sort().values
        target_ids = flat[chosen]
        # One uniform per predicted position splits it into mask / keep / random.
        u = torch.rand(count, generator=generator, dtype=torch.float64)
        to_mask = u < shares[0]
        to_random = u >= shares[0] + shares[1]
        inputs = flat.clone()
        inputs[chosen[to_mask]] = self.mask_id
        random_slots = chosen[to_random]
        inputs[random_slots] = pool[torch.randint(len(pool), (len(random_slots),), generator=generator)]
        positions = torch.stack([chosen // width, chosen % width], dim=1)
        return MaskedBatch(inputs.view(batch.shape), positions, target_ids)
