"""Fake-English (K et al. 2020; Dufter & Schuetze 2020) from the mirror's English Wikipedia, for
tests/test_learning.py: the corpora and a word-list tagging task whose English answers are known.

Fake-English is English under a language-prefixed vocabulary (``xlt bpe union --prefix-lang``):
its text is English Wikipedia, but every entry becomes ``nl:token`` and English's ``en:token``, so
the two languages share no embedding row. The pretraining slices of the two languages are
different stretches of Wikipedia (no parallel sentence for the model to match), and the tagging
files are a third stretch that neither language's pretraining saw.

The code ``nl`` stands for Fake-English because xlt only accepts languages that its tokenizer
knows; its Moses rules differ from English's only on apostrophes and abbreviations, and the
tagging sentences are kept to words that both tokenizers leave as they are, so the English and
Fake-English test sets reach the model as the same tokens under disjoint ids.
"""

from __future__ import annotations

import lzma
import random
from pathlib import Path
from typing import Sequence

from xlt.text.tokenize import Tokenizer

FAKE = "nl"
WIKIPEDIA = "mono/en/enwiki_wikiextractor_sample_30MB.txt.xz"
# Each tag is a function of the word alone: transfer then needs nothing but Fake-English words
# that the encoder represents as it represents their English twins.
TAGGED = {"ART": "the a an this these those", "PRN": "he she it they his her its their",
          "PRP": "in on at of to from with by for"}
TAG_OF = {word: tag for tag, words in TAGGED.items() for word in words.split()}


def wikipedia_cuts(mirror: Path, sizes: Sequence[int]) -> list[list[str]]:
    """Consecutive stretches of non-blank lines, each about ``sizes[i]`` UTF-8 bytes."""
    cuts: list[list[str]] = [[] for _ in sizes]
    ends = [sum(sizes[:i + 1]) for i in range(len(sizes))]
    seen, current = 0, 0
    with lzma.open(mirror / WIKIPEDIA, "rt", encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            seen += len(line.encode("utf-8"))
            while current < len(ends) and seen > ends[current]:
                current += 1
            if current == len(ends):
                break
            cuts[current].append(line.rstrip("\n"))
    return cuts


def tagging_sentences(tokenized: Path, length: int = 24) -> list[list[str]]:
    """Runs of ``length`` tokens of tokenized text, shuffled (seed 0), without any run holding a word
    that the English or the Fake-English tokenizer would change when fine-tuning re-tokenizes it."""
    words = tokenized.read_text(encoding="utf-8").split()
    en, fake = Tokenizer("en", lowercase=True), Tokenizer(FAKE, lowercase=True)
    stable = {w for w in set(words) if en.tokenize(w) == w == fake.tokenize(w)}
    runs = [words[i:i + length] for i in range(0, len(words) - length + 1, length)]
    runs = [run for run in runs if all(w in stable for w in run)]
    random.Random(0).shuffle(runs)
    return runs


def write_tagged(path: Path, runs: list[list[str]]) -> Path:
    """``word<TAB>tag`` columns: B-<type> for a listed word, O for any other."""
    blocks = ["\n".join(f"{w}\t{'B-' + TAG_OF[w] if w in TAG_OF else 'O'}" for w in run) + "\n" for run in runs]
    path.write_text("\n".join(blocks), encoding="utf-8")
    return path
