"""A tiny synthetic bilingual grammar: the shared fixture for unit tests.

Two toy languages, ``en`` and ``fr``, share a lexicon through a one-to-one dictionary but differ in
word order (adjectives before nouns in ``en``, after them in ``fr``). Sentences are generated in
parallel, so the same fixture serves code-switching, BPE, binarization, alignment and CKA tests.
"""

from __future__ import annotations

import random
from pathlib import Path

LEXICON = {
    "det": [("the", "le"), ("a", "un"), ("this", "ce")],
    "noun": [("cat", "chat"), ("dog", "chien"), ("house", "maison"), ("tree", "arbre"), ("bird", "oiseau"),
             ("river", "fleuve"), ("child", "enfant"), ("book", "livre"), ("city", "ville"), ("garden", "jardin")],
    "adj": [("small", "petit"), ("big", "grand"), ("green", "vert"), ("old", "vieux"), ("happy", "heureux")],
    "verb": [("sees", "voit"), ("likes", "aime"), ("finds", "trouve"), ("follows", "suit"), ("takes", "prend")],
}

DICTIONARY = [pair for words in LEXICON.values() for pair in words]


def sentence_pair(rng: random.Random) -> tuple[str, str]:
    """One parallel sentence: ``det adj noun verb det noun .`` in en, ``det noun adj ...`` in fr."""
    d1, a1, n1, v, d2, n2 = (rng.choice(LEXICON[k]) for k in ("det", "adj", "noun", "verb", "det", "noun"))
    en = [d1[0], a1[0], n1[0], v[0], d2[0], n2[0], "."]
    fr = [d1[1], n1[1], a1[1], v[1], d2[1], n2[1], "."]
    return " ".join(en), " ".join(fr)


def corpus(n: int, seed: int = 0) -> tuple[list[str], list[str]]:
    rng = random.Random(seed)
    pairs = [sentence_pair(rng) for _ in range(n)]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def write_corpus(directory: Path, n: int = 200, seed: int = 0) -> tuple[Path, Path]:
    """Write ``en.txt`` and ``fr.txt`` (line-parallel) into ``directory``; return their paths."""
    en, fr = corpus(n, seed)
    en_path, fr_path = directory / "en.txt", directory / "fr.txt"
    en_path.write_text("\n".join(en) + "\n", encoding="utf-8")
    fr_path.write_text("\n".join(fr) + "\n", encoding="utf-8")
    return en_path, fr_path


def write_dictionary(path: Path, weights: bool = False) -> Path:
    """The grammar's dictionary in MUSE format (``src tgt`` per line, optional weight column)."""
    lines = [f"{s} {t} 1.0" if weights else f"{s} {t}" for s, t in DICTIONARY]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
