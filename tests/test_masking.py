"""Masking transform: counts, 80/10/10 statistics, specials, language-pure replacements, determinism."""

from __future__ import annotations

import math

import pytest
import torch

from xlt.data.masking import MaskedBatch, MaskingConfig, MaskTransform, n_predictions
from xlt.text.vocab import SPECIALS, Vocabulary
from xlt.utils.errors import XltError

MASK_ID = SPECIALS.index("<mask>")
SPECIAL_IDS = list(range(len(SPECIALS)))
EN_IDS = torch.arange(5, 25)  # a tiny vocabulary: 20 English and 20 French ids after the specials
FR_IDS = torch.arange(25, 45)
VOCAB_SIZE = 45


def transform(within: bool, **overrides) -> MaskTransform:
    config = MaskingConfig(random_within_language=within, **overrides)
    return MaskTransform(config, MASK_ID, SPECIAL_IDS, VOCAB_SIZE, {"en": EN_IDS, "fr": FR_IDS})


def english_batch(seed: int, rows: int = 16, width: int = 64) -> torch.Tensor:
    """English ids with every special token sprinkled in (about one position in eight)."""
    g = torch.Generator().manual_seed(seed)
    batch = EN_IDS[torch.randint(len(EN_IDS), (rows, width), generator=g)]
    specials = torch.rand(rows, width, generator=g) < 0.125
    batch[specials] = torch.randint(0, len(SPECIALS) - 1, (int(specials.sum()),), generator=g)  # no <mask> in data
    return batch


def check_consistent(batch: torch.Tensor, out: MaskedBatch) -> None:
    """Brute force: targets are the original tokens, and only target positions may change."""
    rows, cols = out.target_positions.unbind(1)
    assert torch.equal(out.target_ids, batch[rows, cols])
    untouched = ~out.target_mask
    assert torch.equal(out.input_ids[untouched], batch[untouched])
    flat = out.flat_positions
    assert torch.equal(flat, torch.sort(flat).values) and len(torch.unique(flat)) == len(flat)
    assert torch.equal(out.input_ids.view(-1)[flat], out.input_ids[rows, cols])


def test_exact_count_and_specials_never_predicted():
    mask = transform(within=True)
    for seed in range(20):
        batch = english_batch(seed)
        out = mask(batch, "en", torch.Generator().manual_seed(seed))
        check_consistent(batch, out)
        n_candidates = int((batch >= len(SPECIALS)).sum())
        assert len(out.target_ids) == n_predictions(n_candidates, 0.15)
        assert int((out.target_ids < len(SPECIALS)).sum()) == 0  # <s> </s> <pad> <unk> never targets


def test_n_predictions_rounds_half_up_and_keeps_at_least_one():
    assert [n_predictions(n, 0.15) for n in (0, 1, 3, 10, 100, 24576)] == [0, 1, 1, 2, 15, 3686]


def test_position_zero_is_predictable():
    mask = transform(within=True)
    batch = EN_IDS[torch.zeros(8, 8, dtype=torch.long)] + torch.arange(8)  # no specials at all
    hits = sum(int((mask(batch, "en", torch.Generator().manual_seed(s)).target_positions[:, 1] == 0).sum())
               for s in range(50))
    assert hits > 0


def _within_bounds(count: int, n: int, p: float) -> bool:
    return abs(count - n * p) <= 5 * math.sqrt(n * p * (1 - p))


def test_mask_keep_random_fractions_follow_80_10_10():
    mask = transform(within=True)
    predicted = n_mask = n_same = n_random = total_candidates = 0
    for seed in range(150):
        batch = english_batch(seed)
        out = mask(batch, "en", torch.Generator().manual_seed(1000 + seed))
        total_candidates += int((batch >= len(SPECIALS)).sum())
        inputs = out.input_ids[out.target_positions[:, 0], out.target_positions[:, 1]]
        predicted += len(inputs)
        n_mask += int((inputs == MASK_ID).sum())
        n_same += int((inputs == out.target_ids).sum())
        n_random += int(((inputs != MASK_ID) & (inputs != out.target_ids)).sum())
    assert abs(predicted / total_candidates - 0.15) < 0.001  # exact per batch up to rounding
    assert _within_bounds(n_mask, predicted, 0.8)
    # A random draw equals the original with probability 1/20 (the English pool), so "unchanged"
    # is keep + random/20 and "changed to another token" is random * 19/20.
    assert _within_bounds(n_same, predicted, 0.1 + 0.1 / len(EN_IDS))
    assert _within_bounds(n_random, predicted, 0.1 * (len(EN_IDS) - 1) / len(EN_IDS))


def _replacements(mask: MaskTransform, lang: str, draws: int = 40) -> torch.Tensor:
    found = []
    for seed in range(draws):
        batch = english_batch(seed)
        out = mask(batch, lang, torch.Generator().manual_seed(seed))
        inputs = out.input_ids[out.target_positions[:, 0], out.target_positions[:, 1]]
        found.append(inputs[inputs != MASK_ID])
    return torch.cat(found)


def test_random_tokens_stay_within_the_batch_language_when_asked():
    tokens = _replacements(transform(within=True), "en")
    assert torch.isin(tokens, EN_IDS).all()
    # The pool follows the language argument, not the batch content.
    tokens_fr = _replacements(transform(within=True), "fr")
    assert torch.isin(tokens_fr, FR_IDS).any()
    assert not torch.isin(tokens_fr, torch.arange(len(SPECIALS))).any()


def test_random_tokens_come_from_the_whole_vocabulary_otherwise():
    tokens = _replacements(transform(within=False), "en")
    assert torch.isin(tokens, FR_IDS).any()  # anchors can leak in, as in XLM
    assert (tokens >= len(SPECIALS)).all() and (tokens < VOCAB_SIZE).all()


def test_same_generator_seed_same_output_other_seed_differs():
    mask = transform(within=True)
    batch = english_batch(5)
    a, b, c = (mask(batch, "en", torch.Generator().manual_seed(s)) for s in (42, 42, 43))
    for x, y in ((a.input_ids, b.input_ids), (a.target_positions, b.target_positions), (a.target_ids, b.target_ids)):
        assert torch.equal(x, y)
    assert not torch.equal(a.target_positions, c.target_positions)
    assert torch.equal(batch, english_batch(5))  # the input batch is not modified in place


def test_eval_mode_masks_every_prediction_and_repeats_exactly():
    mask = transform(within=True)
    batches = [english_batch(s) for s in range(4)]

    def one_pass() -> list[MaskedBatch]:
        g = torch.Generator().manual_seed(12345)
        return [mask(b, "en", g, eval_mode=True) for b in batches]

    first, second = one_pass(), one_pass()
    for batch, x, y in zip(batches, first, second):
        check_consistent(batch, x)
        assert torch.equal(x.input_ids, y.input_ids) and torch.equal(x.target_positions, y.target_positions)
        assert (x.input_ids[x.target_mask] == MASK_ID).all()
    mixed = transform(within=True, eval_mask_all=False)(batches[0], "en", torch.Generator().manual_seed(0),
                                                        eval_mode=True)
    assert (mixed.input_ids[mixed.target_mask] != MASK_ID).any()


def test_batch_of_only_special_tokens_predicts_nothing():
    batch = torch.tensor([[1, 2, 2, 3], [0, 1, 1, 2]])
    out = transform(within=False)(batch, "en", torch.Generator().manual_seed(0))
    assert out.target_ids.numel() == 0 and out.target_positions.shape == (0, 2)
    assert torch.equal(out.input_ids, batch)


def test_from_vocabulary_uses_each_language_s_own_tokens():
    vocab = Vocabulary.from_counts({"en:cat": 5, "fr:chat": 4, "en:dog": 3, "fr:chien": 2},
                                   languages=["en", "fr"],
                                   owners={"en:cat": 1, "en:dog": 1, "fr:chat": 2, "fr:chien": 2}, prefix_lang=True)
    config = MaskingConfig().resolved(separate_embeddings=False, prefix_lang=vocab.prefix_lang)
    assert config.random_within_language is True
    mask = MaskTransform.from_vocabulary(config, vocab, ["en", "fr"])
    assert [vocab.token(i) for i in mask.random_pool("en").tolist()] == ["en:cat", "en:dog"]
    assert [vocab.token(i) for i in mask.random_pool("fr").tolist()] == ["fr:chat", "fr:chien"]
    assert mask.mask_id == MASK_ID and len(mask.all_token_ids) == 4


def test_resolved_default_follows_the_model():
    assert MaskingConfig().resolved(separate_embeddings=True, prefix_lang=False).random_within_language is True
    assert MaskingConfig().resolved(separate_embeddings=False, prefix_lang=False).random_within_language is False
    explicit = MaskingConfig(random_within_language=True)
    assert explicit.resolved(separate_embeddings=False, prefix_lang=False) is explicit


@pytest.mark.parametrize("kwargs", [{"mask_prob": 0.0}, {"mask_prob": 1.5}, {"mask_token": 0.5},
                                    {"keep": -0.1, "random": 0.3}])
def test_bad_config_is_one_clear_error(kwargs):
    with pytest.raises(XltError):
        MaskingConfig(**kwargs)


def test_bad_transform_arguments_are_clear_errors():
    with pytest.raises(XltError, match="unset"):
        MaskTransform(MaskingConfig(), MASK_ID, SPECIAL_IDS, VOCAB_SIZE)
    with pytest.raises(XltError, match="token ids of each language"):
        MaskTransform(MaskingConfig(random_within_language=True), MASK_ID, SPECIAL_IDS, VOCAB_SIZE)
    with pytest.raises(XltError, match="non-special"):
        MaskTransform(MaskingConfig(random_within_language=True), MASK_ID, SPECIAL_IDS, VOCAB_SIZE,
                      {"en": torch.tensor([1, 5])})
    with pytest.raises(XltError, match="no token ids for language 'de'"):
        transform(within=True)(english_batch(0), "de", torch.Generator())
