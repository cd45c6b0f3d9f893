"""K et al.'s (2020) word-order control: a language whose words are permuted within each sentence.

Fake-English keeps English's word order, so a model may transfer by it: an English parser's "the
head is the next noun" reads Fake-English alike. Permuting each sentence's words in the target
language, in its pretraining text and in its test sets alike, removes that similarity and keeps the
rest (the words, their twins, which words share a sentence); what Default still transfers then
does not rest on word order. ``xlt permute-words`` writes such files from English or Fake-English
ones (sentence ends are read through :func:`xlt.text.fake.to_english`, the identity on real text).

What moves, per format:

- ``text``: tokenized text (a paragraph a line, tokens separated by spaces, as ``xlt tokenize``
  writes it): the tokens of each sentence. Sentences end at a token ``.``, ``!`` or ``?`` (closing
  quotes or brackets after it allowed) before one that starts with a capital, a digit or a quote;
  an abbreviation that ends a token ("O.") cuts a sentence too, which only shortens the span the
  tokens move in. Raw text would move punctuation glued to its word, which the tokenizer then
  splits off only where it still ends a sentence: tokenize first.
- ``xnli``: premise and hypothesis, raw sentences that fine-tuning tokenizes: tokenized here as
  fine-tuning will (English's rules), permuted as ``text``'s, and written so that the tokenizer
  gives those tokens back (:func:`spelled`: a clitic such as ``'s`` is written against a word); the
  label stays.
- ``wikiann``: the tokens of a sentence with their tags, an entity (``B-X`` and the ``I-X`` after
  it) moving as one unit, so every entity is kept; an entity that starts with ``I-X`` (IOB1) is
  written with ``B-X`` there, its IOB2 form, so that two moved next to each other stay two.
- ``conllu``: the token lines of a sentence, renumbered, each HEAD renumbered with them, so every
  arc and label is kept; multiword-token ranges and empty nodes, whose words are no longer
  adjacent, are dropped, and DEPS and MISC emptied (they name positions and spacing); ``# text =``
  becomes the forms in their new order.

Each unit (a sentence, a tagged or parsed sentence) is shuffled by a generator seeded from ``seed``
and the unit's own text, so the result does not depend on a file's order or length, and the same
input and seed always give the same output.
"""

from __future__ import annotations

import random
import re
from typing import Iterable, Iterator, Optional, Sequence

from xlt.text.conllu_lines import Numbered, sentence_blocks, word_lines
from xlt.text.fake import FAKE, to_english
from xlt.text.nli_lines import nli_columns
from xlt.text.tagged_lines import checked_tagged_lines
from xlt.text.tokenize import Tokenizer
from xlt.utils.errors import PathLike, XltError
from xlt.utils.outputs import atomic_output
from xlt.utils.textio import nonempty, read_numbered_lines, with_data

_SENTENCE_END = re.compile(r"""^[.!?]+["')\]]*$|[.!?]$""")
_CLOSING = re.compile(r"""^["')\]]+$""")
_SENTENCE_START = re.compile(r"""^(["'(\[]+$|["'(\[]?[A-Z0-9])""")
_CLITIC = re.compile(r"^'[A-Za-z]")
_LETTER_END = re.compile(r"[A-Za-z]$")


def _takes(word: str, clitic: str) -> bool:
    """Whether Moses splits ``clitic`` off ``word + clitic`` again: after a letter any clitic, after a
    digit only ``'s`` (``1990's``; ``15't`` stays one token)."""
    return bool(_LETTER_END.search(word)) or (word[-1:].isdigit() and word.isascii() and clitic == "'s")


def shuffled(items: Sequence, seed: int, key: str) -> list:
    """``items`` in an order drawn from ``seed`` and ``key`` alone (random's str seeding is SHA-512,
    not Python's salted hash, so it is the same in every process). The key is read as English, so
    a Fake-English unit is permuted as its English twin of the same text is."""
    out = list(items)
    random.Random(f"{seed}\t{to_english(key)}").shuffle(out)
    return out


def sentences(tokens: Sequence[str]) -> list[list[str]]:
    """Tokens -> runs of tokens, cut after a sentence-final token (and the closing quotes after it)
    before one that starts a sentence. A straight quote after the end closes the sentence only
    where the sentence has opened one (an odd count): `! " Why` opens the next one."""
    english = [to_english(t) for t in tokens]
    runs: list[list[str]] = [[]]
    ended, quotes = False, 0
    for token, seen in zip(tokens, english):
        closes = _CLOSING.match(seen) and (seen.strip(")]") == "" or quotes % 2 == 1)
        if ended and not closes:
            ended = False
            if _SENTENCE_START.match(seen):
                runs.append([])
                quotes = 0
        runs[-1].append(token)
        quotes += seen.count('"') + seen.count("'") * (len(seen.strip("'")) == 0)
        ended = ended or bool(_SENTENCE_END.search(seen))
    return [run for run in runs if run]


def permute_tokens(line: str, seed: int) -> str:
    """A tokenized line with the tokens of each sentence permuted (single spaces)."""
    return " ".join(t for run in sentences(line.split()) for t in shuffled(run, seed, " ".join(run)))


def spelled(tokens: Sequence[str]) -> str:
    """Permuted tokens written so that the tokenizer gives them back: a clitic (``'s``, ``'t``,
    ``'re``) is written against a word before it, as English spells it, since Moses splits it off
    again only there (after a space or a mark it splits its apostrophe off as well). One that follows
    no word, or a word that already has one, goes to the next word that has none."""
    out: list[str] = []
    hosts: list[str] = []       # out[i] as English while it can take a clitic, else ""
    pending: list[str] = []
    for token in tokens:
        english = to_english(token)
        if _CLITIC.match(english):
            if out and hosts[-1] and _takes(hosts[-1], english):
                out[-1] += token
                hosts[-1] = ""
            else:
                pending.append(token)
            continue
        out.append(token)
        hosts.append(english)
        taken = next((p for p in pending if _takes(english, to_english(p))), None)
        if taken is not None:
            out[-1] += taken
            pending.remove(taken)
            hosts[-1] = ""
    for token in pending:       # no word left after it: the last word that can still take one, else alone
        i = next((i for i in reversed(range(len(out))) if hosts[i] and _takes(hosts[i], to_english(token))), None)
        if i is None:
            out.append(token)
        else:
            out[i] += token
            hosts[i] = ""
    return " ".join(out)


def _text(numbered: Iterable[Numbered], seed: int) -> Iterator[Numbered]:
    return ((lineno, permute_tokens(line, seed) if line.strip() else line) for lineno, line in numbered)


def _xnli(numbered: Iterable[Numbered], seed: int) -> Iterator[Numbered]:
    tokenizers = {lang: Tokenizer(lang) for lang in ("en", FAKE)}    # both English's rules
    for lineno, line in numbered:
        *sentences, label = nli_columns(line, lineno=lineno)
        permuted = [spelled(permute_tokens(tokenizers[FAKE if to_english(c) != c else "en"].tokenize(c), seed).split())
                    for c in sentences]
        yield lineno, "\t".join([*permuted, label])


def _entity_units(block: list[Numbered]) -> list[list[Numbered]]:
    """A tagged sentence -> units: an entity's tokens (B-X, then I-X) together, any other token alone;
    an entity's first token tagged I-X (IOB1) is written B-X."""
    units: list[list[Numbered]] = []
    previous = "O"
    for lineno, line in block:
        columns = line.split("\t")
        tag = columns[-1].strip()
        if tag.startswith("I-") and previous[2:] == tag[2:] and previous != "O":
            units[-1].append((lineno, line))
        else:
            if tag.startswith("I-"):
                line = "\t".join([*columns[:-1], "B-" + tag[2:]])
            units.append([(lineno, line)])
        previous = tag
    return units


def _wikiann(numbered: Iterable[Numbered], seed: int) -> Iterator[Numbered]:
    for block, blank in sentence_blocks(checked_tagged_lines(numbered)):
        units = _entity_units(block)
        yield from (item for unit in shuffled(units, seed, "\n".join(line for _, line in block)) for item in unit)
        if blank is not None:
            yield blank


def _conllu_sentence(block: list[Numbered], seed: int) -> list[Numbered]:
    # ranges (1-2) and empty nodes (3.1) are dropped: their words are no longer where they were
    words = word_lines(block)
    order = shuffled(words, seed, " ".join(columns[1] for _, columns in words))
    new_id = {int(columns[0]): i for i, (_, columns) in enumerate(order, start=1)}
    out = [(n, "# text = " + " ".join(c[1] for _, c in order) if line.startswith("# text = ") else line)
           for n, line in block if line.startswith("#")]
    for lineno, columns in order:
        head = columns[6] if columns[6] == "_" else str(new_id.get(int(columns[6]), 0))
        out.append((lineno, "\t".join([str(new_id[int(columns[0])]), *columns[1:6], head, columns[7], "_", "_"])))
    return out


def _conllu(numbered: Iterable[Numbered], seed: int) -> Iterator[Numbered]:
    for block, blank in sentence_blocks(numbered):
        yield from _conllu_sentence(block, seed)
        if blank is not None:
            yield blank


FORMATS = {"text": _text, "xnli": _xnli, "wikiann": _wikiann, "conllu": _conllu}


def permuted_lines(numbered: Iterable[Numbered], fmt: str, seed: int = 0) -> Iterator[Numbered]:
    """``fmt`` lines with each sentence's words permuted; each line keeps the number it had in the
    input, so an error names the input's line."""
    if fmt not in FORMATS:
        raise XltError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    return FORMATS[fmt](numbered, seed)


def permute_file(input_path: PathLike, output_path: PathLike, fmt: str = "text", seed: int = 0) -> int:
    """Write ``input_path`` (a ``fmt`` file) with each sentence's words permuted, atomically; returns
    its lines."""
    count = 0
    try:
        with atomic_output(output_path) as out:
            lines = (line for _, line in permuted_lines(nonempty(read_numbered_lines(input_path), input_path), fmt, seed))
            for line in with_data(lines, input_path, comments=fmt == "conllu"):
                out.write(line + "\n")
                count += 1
    except XltError as error:
        if error.path is None:
            raise XltError(error.message, input_path, error.line) from None
        raise
    return count
