"""Fake-English (K et al. 2020; Dufter & Schuetze 2020): English whose every character is a new symbol.

The pair English / Fake-English has one structure and no shared surface form, so whatever lets a
model transfer between them is what Wu et al. ablate (architecture, anchors), not the distance
between two real languages. A small model decides that where it cannot bridge English and French.

The mapping: every non-whitespace character ``c`` becomes ``chr(0xF0000 + ord(c))``, its twin in
Unicode's Supplementary Private Use Area-A. Why a character mapping rather than a language-prefixed
vocabulary: Fake-English is then a language like fr or zh that every stage takes unchanged (joint
BPE learns merges over both, code-switching swaps words for their twins, the task files are plain
files), and no string, digit or punctuation mark, hence no BPE token, is shared with English or any
real text, which never uses that plane. Whitespace stays, so words and sentences stay where they
were. Characters beyond U+FFFD (none in the mirror's English) would leave the plane; they are refused.

Text is tokenized as its English original would be (:func:`to_english`, English rules, then back),
so a Fake-English file reaches the model as the same tokens as its English twin, under other ids.
"""

from __future__ import annotations

import functools
import itertools
import re
from typing import Callable, Iterable, Iterator, Optional

from xlt.text.conllu_lines import sentence_blocks, word_lines
from xlt.text.tagged_lines import Numbered, checked_tagged_lines, language_prefix
from xlt.text.nli_lines import nli_columns
from xlt.utils.errors import PathLike, XltError
from xlt.utils.outputs import atomic_output
from xlt.utils.textio import nonempty, read_numbered_lines, with_data

FAKE = "fake"
PERMUTED = "fakeperm"   # Fake-English with each sentence's words permuted (xlt.text.word_order)
ORIGINAL = "en"  # the language whose rules tokenize Fake-English
OFFSET = 0xF0000
_LAST = 0xFFFD  # the plane's last private-use code point is U+FFFFD: OFFSET + 0xFFFD
_WHITESPACE = re.compile(r"(\s+)")


def _to_fake_char(c: str) -> str:
    code = ord(c)
    if code > _LAST:
        raise XltError(f"character U+{code:04X} has no Fake-English twin (only U+0000..U+FFFD do)")
    return chr(OFFSET + code)


def to_fake(text: str) -> str:
    """English text -> Fake-English: every non-whitespace character moved into the private plane."""
    return "".join(part if part.isspace() else "".join(map(_to_fake_char, part))
                   for part in _WHITESPACE.split(text) if part)


def to_english(text: str) -> str:
    """The inverse of :func:`to_fake` (characters outside the plane are kept as they are)."""
    return "".join(chr(ord(c) - OFFSET) if OFFSET <= ord(c) <= OFFSET + _LAST else c for c in text)


# ---- files -----------------------------------------------------------------------------------
def _text_line(line: str) -> str:
    return to_fake(line)


def _xnli_line(line: str) -> str:
    """premise<TAB>hypothesis<TAB>label: the two sentences mapped, the label kept."""
    premise, hypothesis, label = nli_columns(line)
    return "\t".join([to_fake(premise), to_fake(hypothesis), label])


def _tagged_line(line: str, prefix: Optional[str] = None) -> str:
    """word<TAB>tag; a WikiANN file's language ``prefix`` (``en:``) is dropped: the readers take bare
    words, and a twin's word must be the one the English file's reader reads."""
    if not line.strip():
        return ""
    columns = line.split("\t")    # checked_tagged_lines: two columns or more
    word = columns[0]
    if prefix is not None:
        if not word.startswith(prefix):
            raise XltError(f"expected a {prefix!r}-prefixed word (WikiANN layout, as in the file's first sentence)")
        word = word[len(prefix):]
    return "\t".join([to_fake(word), *columns[1:]])


def _tagged_lines(numbered: Iterable[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """(line number, Fake-English line) of a tagged file, its prefix decided on its first sentence as
    ``xlt finetune ner``'s reader decides it."""
    lines, first = iter(numbered), []
    for lineno, line in lines:
        first.append((lineno, line))
        if not line.strip() and any(text.strip() for _, text in first):
            break
    prefix = language_prefix(text.split("\t")[0] for _, text in first if text.strip())
    yield from _each_line(functools.partial(_tagged_line, prefix=prefix))(itertools.chain(first, lines))


def _conllu_line(line: str) -> str:
    """FORM and LEMMA mapped, and the ``# text =`` comment; ids, tags and heads kept."""
    if line.startswith("# text = "):
        return "# text = " + to_fake(line[len("# text = "):])
    if not line.strip() or line.startswith("#"):
        return line
    columns = line.split("\t")
    if len(columns) != 10:
        raise XltError(f"expected 10 tab-separated CoNLL-U columns, got {len(columns)}")
    lemma = columns[2] if columns[2] == "_" else to_fake(columns[2])
    return "\t".join([columns[0], to_fake(columns[1]), lemma, *columns[3:]])


def _dictionary_line(line: str) -> str:
    """A word list or a dictionary's first column -> ``word twin``: the identity dictionary."""
    words = line.split()
    if not words:
        return ""
    return f"{words[0]} {to_fake(words[0])}"


def _each_line(convert: Callable[[str], str]) -> Callable[[Iterable[Numbered]], Iterator[Numbered]]:
    """A file's converter from a line's: each line converted alone, an error naming its line."""
    def lines(numbered: Iterable[Numbered]) -> Iterator[Numbered]:
        for lineno, line in numbered:
            try:
                yield lineno, convert(line)
            except XltError as error:
                raise XltError(error.message, line=error.line or lineno) from None
    return lines


# a format's converter: (line number, line) in, (line number, Fake-English line) out
FORMATS: dict[str, Callable[[Iterable[Numbered]], Iterator[Numbered]]] = {
    "text": _each_line(_text_line), "xnli": _each_line(_xnli_line), "conllu": _each_line(_conllu_line),
    "dictionary": _each_line(_dictionary_line),
    "wikiann": _tagged_lines,   # its prefix is the file's, read off its first sentence
}


def _checked_conllu(numbered: Iterable[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """The lines of a CoNLL-U file, each sentence's word lines checked before it passes."""
    for block, blank in sentence_blocks(numbered):
        word_lines(block)
        yield from block
        if blank is not None:
            yield blank


# the formats whose lines are checked as their readers in xlt finetune check them, before they pass
LINE_CHECKS = {"conllu": _checked_conllu, "wikiann": checked_tagged_lines}


def fake_lines(numbered: Iterable[tuple[int, str]], fmt: str, path: PathLike) -> Iterator[str]:
    try:
        for _, line in FORMATS[fmt](LINE_CHECKS.get(fmt, iter)(numbered)):
            yield line
    except XltError as error:   # a sentence's check and a line's conversion both name their line
        raise XltError(error.message, path, error.line) from None


def fake_file(input_path: PathLike, output_path: PathLike, fmt: str = "text") -> int:
    """Write the Fake-English version of ``input_path`` (a ``fmt`` file) atomically; returns its lines."""
    if fmt not in FORMATS:
        raise XltError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)})")
    count = 0
    with atomic_output(output_path) as out:
        lines = fake_lines(nonempty(read_numbered_lines(input_path), input_path), fmt, input_path)
        for line in with_data(lines, input_path, comments=fmt == "conllu"):
            if fmt == "dictionary" and not line:
                continue
            out.write(line + "\n")
            count += 1
    return count
