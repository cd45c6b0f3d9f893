"""Code-switching with a bilingual dictionary: the "Extra anchors" of Wu et al. (2020, §4.2).

Every word of the (tokenized) text that the dictionary translates is replaced, with probability
``rate``, by one of its translations, chosen in proportion to the dictionary's weight column when it
has one and uniformly otherwise. At most ``max_fraction`` of the words of each *batch* are replaced.

A batch is ``batch_lines`` consecutive lines (the last one may be shorter). The cap is enforced
without favouring any position: all dictionary words of the batch are drawn first, and when more
than ``floor(max_fraction * words in the batch)`` come up, a uniformly random subset of that size is
kept. Each batch has its own random generator, seeded by ``(seed, batch index)``, so the output
depends only on the input, the dictionary and the settings, and the input is streamed one batch
at a time.
"""

from __future__ import annotations

import bisect
import contextlib
import math
import os
import re
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from itertools import accumulate
from typing import Iterable, Iterator, Optional

import numpy as np

from xlt import __version__
from xlt.utils import log
from xlt.utils.errors import PathLike, XltError
from xlt.utils.outputs import atomic_output, check_output_paths, json_text, superseded
from xlt.utils.textio import file_sha256, read_lines, read_numbered_lines, with_data

# MUSE separates the columns by one tab or space; other whitespace (e.g. U+00A0) belongs to words.
_COLUMN_SEPARATOR = re.compile(r"[ \t]+")


@dataclass(frozen=True)
class CodeSwitchConfig:
    """Settings of one code-switching run (the paper's values are the defaults)."""

    rate: float = field(default=0.3, metadata={"help": "Probability of replacing each dictionary word."})
    max_fraction: float = field(default=0.15, metadata={"help": "Most words of a batch that may be replaced."})
    seed: int = field(default=0, metadata={"help": "Random seed; the same seed gives the same output."})
    batch_lines: int = field(default=1000, metadata={
        "help": "Lines per batch for the cap (1000 lines of ~25 words is about one XLM batch of 96x256 tokens)."})
    ignore_case: bool = field(default=False, metadata={
        "help": "Look words up by their lowercase form (MUSE dictionaries are lowercase)."})

    def __post_init__(self) -> None:
        for name in ("rate", "max_fraction"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise XltError(f"--{name.replace('_', '-')} must be between 0 and 1, got {value}")
        if self.batch_lines < 1:
            raise XltError(f"--batch-lines must be at least 1, got {self.batch_lines}")
        if self.seed < 0:
            raise XltError(f"--seed must be non-negative, got {self.seed}")

    def cap(self, words: int) -> int:
        """``floor(max_fraction * words)``, exactly: 0.29 of 100 words is 29, not 28.999..."""
        return math.floor(Fraction(repr(self.max_fraction)) * words)


@dataclass
class Dictionary:
    """Source word -> its translations and their cumulative weights (all 1 when unweighted)."""

    translations: dict[str, tuple[str, ...]]
    cumulative_weights: dict[str, list[float]]
    weighted: bool
    path: str
    sha256: Optional[str]  # of the file as stored (compressed bytes for .gz/.xz), as in SHA256SUMS
    pairs: int
    identical_pairs_dropped: int
    duplicate_pairs_dropped: int

    @classmethod
    def load(cls, path: PathLike) -> "Dictionary":
        """Read a MUSE dictionary: ``source translation [weight]`` per line.

        Pairs whose translation equals the source word are dropped (they would change nothing and
        such words are anchors already), as are repeated pairs (the first one is kept).

        Raises:
            XltError: naming the file and line, on a line that is empty, has fewer than 2 or more
                than 3 columns, a weight that is not a positive finite number, or a weight column
                present on some lines and not others.
        """
        path = str(path)
        weights: dict[str, dict[str, float]] = {}
        has_weights: Optional[bool] = None
        pairs = identical = duplicates = 0
        for lineno, line in read_numbered_lines(path):
            columns = _COLUMN_SEPARATOR.split(line.strip(" \t"))
            if columns == [""]:
                raise XltError("empty dictionary line", path, lineno)
            if len(columns) not in (2, 3):
                raise XltError(f"expected 'source translation [weight]', got {len(columns)} columns", path, lineno)
            if has_weights is None:
                has_weights = len(columns) == 3
            elif has_weights != (len(columns) == 3):
                raise XltError("weight column present on some lines but not on others", path, lineno)
            source, target = columns[0], columns[1]
            weight = _parse_weight(columns[2], path, lineno) if has_weights else 1.0
            pairs += 1
            if source == target:
                identical += 1
            elif target in weights.setdefault(source, {}):
                duplicates += 1
            else:
                weights[source][target] = weight
        if pairs == 0:
            raise XltError("dictionary is empty", path)
        weights = {source: targets for source, targets in weights.items() if targets}
        return cls(translations={s: tuple(t) for s, t in weights.items()},
                   cumulative_weights={s: list(accumulate(t.values())) for s, t in weights.items()},
                   weighted=bool(has_weights), path=path, sha256=None if path == "-" else file_sha256(path),
                   pairs=pairs, identical_pairs_dropped=identical, duplicate_pairs_dropped=duplicates)

    def choose(self, source: str, u: float) -> str:
        """The translation of ``source`` that a uniform draw ``u`` in [0, 1) picks, by weight."""
        cumulative = self.cumulative_weights[source]
        index = bisect.bisect_right(cumulative, u * cumulative[-1])
        return self.translations[source][min(index, len(cumulative) - 1)]

    def summary(self) -> dict:
        return {"path": self.path, "sha256": self.sha256, "pairs": self.pairs, "weighted": self.weighted,
                "source_words": len(self.translations),
                "identical_pairs_dropped": self.identical_pairs_dropped,
                "duplicate_pairs_dropped": self.duplicate_pairs_dropped}


def _parse_weight(text: str, path: str, lineno: int) -> float:
    try:
        weight = float(text)
    except ValueError:
        weight = math.nan
    if not (math.isfinite(weight) and weight > 0):
        raise XltError(f"weight must be a positive number, got {text!r}", path, lineno)
    return weight


@dataclass
class CodeSwitchStats:
    """Running counts; ``anchors`` holds the distinct translations inserted (bounded by the dictionary)."""

    lines: int = 0
    batches: int = 0
    capped_batches: int = 0
    words_seen: int = 0
    words_in_dictionary: int = 0
    words_drawn: int = 0
    words_replaced: int = 0
    anchors: set = field(default_factory=set)

    def counts(self) -> dict:
        counts = {k: v for k, v in asdict(self).items() if k != "anchors"}
        counts["distinct_anchors_added"] = len(self.anchors)
        counts["replaced_fraction"] = self.words_replaced / self.words_seen if self.words_seen else 0.0
        return counts


class CodeSwitcher:
    """Replaces dictionary words batch by batch and keeps the statistics for the report."""

    def __init__(self, dictionary: Dictionary, config: CodeSwitchConfig):
        self.dictionary = dictionary
        self.config = config
        self.stats = CodeSwitchStats()

    def switch_batch(self, lines: list[str], batch_index: int) -> list[str]:
        """One batch of tokenized lines (tokens separated by single spaces) -> the same lines switched.

        Only replaced tokens change; spacing, empty lines and the line count are kept.
        """
        rng = np.random.default_rng([self.config.seed, batch_index])
        lower = self.config.ignore_case
        translations = self.dictionary.translations
        tokens = [line.split(" ") for line in lines]
        candidates = [(i, j, key) for i, line_tokens in enumerate(tokens) for j, token in enumerate(line_tokens)
                      if (key := token.lower() if lower else token) in translations]
        words = sum(1 for line_tokens in tokens for token in line_tokens if token)

        drawn = np.flatnonzero(rng.random(len(candidates)) < self.config.rate)
        cap = self.config.cap(words)
        chosen = np.sort(rng.choice(drawn, size=cap, replace=False)) if len(drawn) > cap else drawn
        for k, u in zip(chosen.tolist(), rng.random(len(chosen)).tolist()):
            i, j, key = candidates[k]
            tokens[i][j] = self.dictionary.choose(key, u)
            self.stats.anchors.add(tokens[i][j])

        self.stats.lines += len(lines)
        self.stats.batches += 1
        self.stats.capped_batches += int(len(drawn) > cap)
        self.stats.words_seen += words
        self.stats.words_in_dictionary += len(candidates)
        self.stats.words_drawn += len(drawn)
        self.stats.words_replaced += len(chosen)
        return [" ".join(line_tokens) for line_tokens in tokens]

    def switch_lines(self, lines: Iterable[str]) -> Iterator[str]:
        """Stream lines through :meth:`switch_batch`, ``batch_lines`` at a time."""
        batch: list[str] = []
        index = 0
        for line in lines:
            batch.append(line)
            if len(batch) == self.config.batch_lines:
                yield from self.switch_batch(batch, index)
                batch, index = [], index + 1
        if batch:
            yield from self.switch_batch(batch, index)

    def report(self) -> dict:
        return {"command": "xlt codeswitch", "version": __version__, "settings": asdict(self.config),
                "dictionary": self.dictionary.summary(), "counts": self.stats.counts()}


def codeswitch_file(input_path: PathLike, output_path: Optional[PathLike], dictionary_path: PathLike,
                    config: CodeSwitchConfig, report_path: Optional[PathLike] = None) -> dict:
    """Code-switch ``input_path`` into ``output_path`` (atomically) and return the report.

    The report is written to ``report_path`` (when given) only after the output is complete.
    """
    check_output_paths(*(p for p in (output_path, report_path) if p is not None and os.fspath(p) != "-"))
    switcher = CodeSwitcher(Dictionary.load(dictionary_path), config)
    with contextlib.ExitStack() as outputs:   # the report renamed before the output, the old output removed first
        out = outputs.enter_context(atomic_output(output_path))
        with log.progress("codeswitch", unit="lines") as bar:
            for line in switcher.switch_lines(with_data(read_lines(input_path), input_path)):
                out.write(line + "\n")
                bar.advance(1)
        report = {**switcher.report(), "input": str(input_path), "output": str(output_path or "-")}
        if report_path is not None:   # opened only now, so that a refused write of the output is named as its own
            outputs.enter_context(atomic_output(report_path)).write(json_text(report))
        if output_path is not None and os.fspath(output_path) != "-":
            outputs.enter_context(superseded(output_path))
    counts = report["counts"]
    log.info(f"codeswitch: replaced {counts['words_replaced']:,} of {counts['words_seen']:,} words "
             f"({counts['words_in_dictionary']:,} in the dictionary), {counts['distinct_anchors_added']:,} "
             f"distinct anchors, cap reached in {counts['capped_batches']} of {counts['batches']} batches")
    return report
