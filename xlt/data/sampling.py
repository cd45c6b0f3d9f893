"""Which language the next pretraining batch comes from.

Every batch is monolingual (XLM, Wu et al. §3.1). Language ``l`` is drawn with probability

    q_l = n_l / sum_k n_k            (n_l = sentences of language l, as XLM counts them)
    p_l = q_l ** alpha / sum_k q_k ** alpha

``alpha`` = 0.7 is the paper's value; 1 samples proportionally to the data, 0 uniformly. Pass the
number of sentences actually streamed (the ``max_sentences`` cut when there is one).

Distributed training: every rank must draw the *same* language at the same step, because a step's
gradients are averaged over ranks and the batch language selects language-specific parameters (Sep
Emb). So build the sampler with the same ``seed`` on every rank (never add the rank to it) and call
:meth:`LanguageSampler.next` the same number of times per step on every rank (once, or
``--langs-per-step`` times). The draw sequence depends only on ``(counts, alpha, seed)`` and the
number of previous draws, so ranks stay in lockstep and a resumed run continues the sequence
exactly (:meth:`state_dict` / :meth:`load_state_dict`).
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping

import numpy as np

from xlt.utils.errors import XltError

STATE_FORMAT = "xlt-language-sampler/1"


def sampling_probabilities(counts: Mapping[str, int], alpha: float) -> dict[str, float]:
    """p_l ∝ (n_l / Σn)^alpha, normalised; languages in sorted order."""
    if not counts:
        raise XltError("language sampling needs at least one language")
    if alpha < 0:
        raise XltError(f"the language sampling exponent must be >= 0, got {alpha}")
    for lang, n in counts.items():
        if int(n) != n or n <= 0:
            raise XltError(f"language {lang!r} has {n} sentences; every sampled language needs at least one")
    languages = sorted(counts)
    fractions = np.array([counts[lang] for lang in languages], dtype=np.float64)
    fractions /= fractions.sum()
    weights = fractions ** alpha
    weights /= weights.sum()
    return {lang: float(p) for lang, p in zip(languages, weights)}


class LanguageSampler:
    """Seeded, resumable draws of the language of each batch.

    Args:
        counts: sentences per language (``{"en": 1_000_000, "fr": 250_000}``).
        alpha: the exponent of the sampling distribution (``--lang-alpha``, default 0.7).
        seed: the same on every rank (see the module docstring).

    Each draw is one ``Generator.random()`` mapped through the cumulative distribution (inverse-CDF
    sampling), so the sequence is a plain function of the PCG64 stream and easy to audit.
    """

    def __init__(self, counts: Mapping[str, int], alpha: float = 0.7, seed: int = 0):
        self.probabilities: dict[str, float] = sampling_probabilities(counts, alpha)
        self.languages: list[str] = list(self.probabilities)
        self.counts: dict[str, int] = {lang: int(counts[lang]) for lang in self.languages}
        self.alpha = float(alpha)
        self.seed = int(seed)
        self.draws = 0
        self._cumulative = np.cumsum([self.probabilities[lang] for lang in self.languages])
        self._rng = np.random.Generator(np.random.PCG64(self.seed))

    def next(self) -> str:
        """The language of the next batch."""
        u = self._rng.random()
        # side="right" so u == cdf[i] falls in language i+1; min() guards the float tail cdf[-1] < 1.
        index = min(int(np.searchsorted(self._cumulative, u, side="right")), len(self.languages) - 1)
        self.draws += 1
        return self.languages[index]

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        return self.next()

    def state_dict(self) -> dict[str, Any]:
        """A small, JSON-serialisable snapshot; loading it continues the draw sequence exactly."""
        return {"format": STATE_FORMAT, "counts": dict(self.counts), "alpha": self.alpha, "seed": self.seed,
                "draws": self.draws, "rng": self._rng.bit_generator.state}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore a snapshot taken by :meth:`state_dict` of a sampler with the same settings.

        A snapshot of a sampler over other counts or another alpha is refused: the resumed run
        would silently sample from another distribution than the one it started with.
        """
        if state.get("format") != STATE_FORMAT:
            raise XltError(f"not a language sampler state (format {state.get('format')!r})")
        saved = {"counts": dict(state["counts"]), "alpha": float(state["alpha"]), "seed": int(state["seed"])}
        current = {"counts": self.counts, "alpha": self.alpha, "seed": self.seed}
        for key, value in saved.items():
            if value != current[key]:
                raise XltError(f"cannot resume language sampling: the checkpoint has {key} {value}, "
                               f"this run has {current[key]}")
        self._rng.bit_generator.state = state["rng"]
        self.draws = int(state["draws"])
