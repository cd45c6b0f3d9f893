"""K et al.'s (2020) word-order control: a language whose words are permuted within each sentence.

Fake-English keeps English's word order, so a model may transfer by it: an English parser's "the
head is the next noun" reads Fake-English alike. Permuting each sentence's words in the target
language, in its pretraining text and in its test sets alike, removes that similarity and keeps the
rest (the words, their twins, which words share a sentence); what Default still transfers then
does not rest on word order.

What moves, per format (each a file :func:`xlt.text.fake.fake_file` reads):

- ``text`` (pretraining text, a paragraph a line): the words of each sentence, whitespace-separated
  as in the raw line. Sentences end at a word ending in ``.``, ``!`` or ``?`` (quotes or brackets
  after it allowed) before one that starts with a capital, a digit or a quote; an abbreviation
  ("O. Vera") cuts a sentence too, which only shortens the span the words move in. Words move with
  the punctuation attached to them; the tokenizer splits it off afterwards, so pretraining text and
  test sets are permuted alike.
- ``xnli``: the premise and the hypothesis, each as ``text``; the label stays.
- ``wikiann``: the tokens of a sentence with their tags, an entity (``B-X`` and the ``I-X`` after
  it) moving as one unit, so every entity and every tag is kept.
- ``conllu``: the token lines of a sentence, renumbered, each HEAD renumbered with them, so every
  arc and label is kept; multiword-token ranges and empty nodes, whose words are no longer
  adjacent, are dropped, and DEPS and MISC emptied (they name positions and spacing); ``# text =``
  becomes the forms in their new order.

Each unit is shuffled by a generator seeded from ``seed`` and the unit's own text, so the result does
not depend on a file's order or length (the same sentence is permuted alike in two files), and the
same input and seed always give the same output.
"""

from __future__ import annotations

import random
import re
from typing import Iterable, Iterator, Sequence

from xlt.utils.errors import XltError

PERMUTED = "fakeperm"   # the language code of Fake-English with its words permuted
_SENTENCE_END = re.compile(r"""[.!?]["')\]]*$""")
_SENTENCE_START = re.compile(r"""^["'(\[]?[A-Z0-9]""")
Numbered = tuple[int, str]


def shuffled(items: Sequence, seed: int, key: str) -> list:
    """``items`` in an order drawn from ``seed`` and ``key`` alone (random's str seeding is SHA-512,
    not Python's salted hash, so it is the same in every process)."""
    out = list(items)
    random.Random(f"{seed}\t{key}").shuffle(out)
    return out


def sentences(words: Sequence[str]) -> list[list[str]]:
    """Whitespace words -> runs of words, cut after a sentence-final word before a sentence start."""
    runs: list[list[str]] = [[]]
    for i, word in enumerate(words):
        runs[-1].append(word)
        if i + 1 < len(words) and _SENTENCE_END.search(word) and _SENTENCE_START.match(words[i + 1]):
            runs.append([])
    return [run for run in runs if run]


def permute_text(line: str, seed: int) -> str:
    """One line of raw English text with the words of each sentence permuted (spacing normalised)."""
    return " ".join(word for run in sentences(line.split()) for word in shuffled(run, seed, " ".join(run)))


def _xnli(numbered: Iterable[Numbered], seed: int) -> Iterator[Numbered]:
    for lineno, line in numbered:
        columns = line.split("\t")
        if len(columns) < 3:
            yield lineno, line      # the mapping names the malformed line
            continue
        yield lineno, "\t".join([permute_text(columns[0], seed), permute_text(columns[1], seed), *columns[2:]])


def _blocks(numbered: Iterable[Numbered]) -> Iterator[tuple[list[Numbered], Numbered | None]]:
    """(a sentence's non-blank lines, the blank line that ends it or None at the end of the file)."""
    block: list[Numbered] = []
    for lineno, line in numbered:
        if line.strip():
            block.append((lineno, line))
            continue
        yield block, (lineno, line)
        block = []
    if block:
        yield block, None


def _entity_units(block: list[Numbered]) -> list[list[Numbered]]:
    """A tagged sentence -> units: an entity's tokens (B-X, then I-X) together, any other token alone."""
    units: list[list[Numbered]] = []
    previous = "O"
    for lineno, line in block:
        tag = line.split("\t")[-1].strip() if "\t" in line else "O"
        continues = tag.startswith("I-") and previous[2:] == tag[2:] and previous != "O"
        if continues:
            units[-1].append((lineno, line))
        else:
            units.append([(lineno, line)])
        previous = tag
    return units


def _wikiann(numbered: Iterable[Numbered], seed: int) -> Iterator[Numbered]:
    for block, blank in _blocks(numbered):
        units = _entity_units(block)
        key = "\n".join(line for _, line in block)
        yield from (item for unit in shuffled(units, seed, key) for item in unit)
        if blank is not None:
            yield blank


def _word_id(lineno: int, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise XltError(f"HEAD {text!r} is not a word number", line=lineno) from None


def _conllu_sentence(block: list[Numbered], seed: int) -> list[Numbered]:
    comments = [(n, line) for n, line in block if line.startswith("#")]
    words: list[tuple[int, list[str]]] = []
    for lineno, line in block:
        if line.startswith("#"):
            continue
        columns = line.split("\t")
        if len(columns) != 10:
            raise XltError(f"expected 10 tab-separated CoNLL-U columns, got {len(columns)}", line=lineno)
        if columns[0].isdigit():
            words.append((lineno, columns))
        # ranges (1-2) and empty nodes (3.1) are dropped: their words are no longer where they were
    order = shuffled(words, seed, "\n".join(line for _, line in block))
    new_id = {int(columns[0]): i for i, (_, columns) in enumerate(order, start=1)}
    out = []
    for lineno, line in comments:
        out.append((lineno, "# text = " + " ".join(c[1] for _, c in order) if line.startswith("# text = ") else line))
    for lineno, columns in order:
        head = _word_id(lineno, columns[6]) if columns[6] != "_" else None
        if head is not None and head != 0 and head not in new_id:
            raise XltError(f"HEAD {head} names no word of the sentence", line=lineno)
        moved = [str(new_id[int(columns[0])]), *columns[1:6],
                 "_" if head is None else str(new_id.get(head, 0)), columns[7], "_", "_"]
        out.append((lineno, "\t".join(moved)))
    return out


def _conllu(numbered: Iterable[Numbered], seed: int) -> Iterator[Numbered]:
    for block, blank in _blocks(numbered):
        yield from _conllu_sentence(block, seed)
        if blank is not None:
            yield blank


def _text(numbered: Iterable[Numbered], seed: int) -> Iterator[Numbered]:
    return ((lineno, permute_text(line, seed) if line.strip() else line) for lineno, line in numbered)


PERMUTERS = {"text": _text, "xnli": _xnli, "wikiann": _wikiann, "conllu": _conllu}


def permuted_lines(numbered: Iterable[Numbered], fmt: str, seed: int = 0) -> Iterator[Numbered]:
    """``fmt`` lines (English or Fake-English) with each sentence's words permuted; each line keeps
    the number it had in the input, so an error still names the input's line."""
    if fmt not in PERMUTERS:
        raise XltError(f"words cannot be permuted in a {fmt!r} file (only {', '.join(PERMUTERS)})")
    return PERMUTERS[fmt](numbered, seed)
