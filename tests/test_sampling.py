"""Language sampling: p ∝ (n/N)^alpha, seeded draws, exact resume."""

from __future__ import annotations

import json
import math

import pytest

from xlt.data.sampling import LanguageSampler, sampling_probabilities
from xlt.utils.errors import XltError

COUNTS = {"en": 900_000, "fr": 90_000, "zh": 10_000}


def test_probabilities_equal_a_hand_computation():
    # Fractions 0.9 / 0.09 / 0.01, raised to 0.7 and normalised, computed by hand.
    raw = {"en": 0.9 ** 0.7, "fr": 0.09 ** 0.7, "zh": 0.01 ** 0.7}
    total = raw["en"] + raw["fr"] + raw["zh"]
    probs = LanguageSampler(COUNTS, alpha=0.7).probabilities
    assert list(probs) == ["en", "fr", "zh"]
    for lang, value in raw.items():
        assert probs[lang] == pytest.approx(value / total, rel=1e-12)
    # 0.9^0.7 = 0.92890, 0.09^0.7 = 0.18537, 0.01^0.7 = 0.03981 (four-figure logs): 0.92890 / 1.15408
    assert probs["en"] == pytest.approx(0.8049, abs=1e-4)


def test_alpha_one_is_proportional_and_zero_uniform():
    assert sampling_probabilities(COUNTS, 1.0) == pytest.approx({"en": 0.9, "fr": 0.09, "zh": 0.01})
    assert sampling_probabilities(COUNTS, 0.0) == pytest.approx({lang: 1 / 3 for lang in COUNTS})


def test_draw_frequencies_match_the_probabilities():
    sampler = LanguageSampler(COUNTS, alpha=0.7, seed=3)
    n = 60_000
    seen = {lang: 0 for lang in COUNTS}
    for _ in range(n):
        seen[sampler.next()] += 1
    for lang, p in sampler.probabilities.items():
        sd = math.sqrt(n * p * (1 - p))
        assert abs(seen[lang] - n * p) < 5 * sd, (lang, seen[lang], n * p)
    assert sampler.draws == n


def test_same_seed_same_sequence_on_every_rank_and_other_seed_differs():
    a, b, c = (LanguageSampler(COUNTS, seed=s) for s in (7, 7, 8))
    seq_a = [a.next() for _ in range(500)]
    assert seq_a == [b.next() for _ in range(500)]
    assert seq_a != [c.next() for _ in range(500)]


def test_resume_from_state_dict_continues_the_sequence_exactly():
    uninterrupted = LanguageSampler(COUNTS, seed=11)
    expected = [uninterrupted.next() for _ in range(300)]
    first = LanguageSampler(COUNTS, seed=11)
    head = [first.next() for _ in range(123)]
    state = json.loads(json.dumps(first.state_dict()))  # survives a JSON round trip
    resumed = LanguageSampler(COUNTS, seed=11)
    resumed.load_state_dict(state)
    assert head + [resumed.next() for _ in range(177)] == expected
    assert resumed.draws == 300


def test_resume_with_other_counts_or_alpha_is_refused():
    state = LanguageSampler(COUNTS, seed=1).state_dict()
    with pytest.raises(XltError, match="counts"):
        LanguageSampler({**COUNTS, "fr": 1}, seed=1).load_state_dict(state)
    with pytest.raises(XltError, match="alpha"):
        LanguageSampler(COUNTS, alpha=0.5, seed=1).load_state_dict(state)


@pytest.mark.parametrize("counts, alpha", [({}, 0.7), ({"en": 0}, 0.7), ({"en": 5}, -1.0)])
def test_bad_settings_are_one_clear_error(counts, alpha):
    with pytest.raises(XltError):
        LanguageSampler(counts, alpha=alpha)
