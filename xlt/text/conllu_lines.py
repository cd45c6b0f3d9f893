"""CoNLL-U read as numbered lines, for the tools that rewrite or count its words without building
trees (``xlt fake-english``, ``xlt permute-words``, ``xlt align --pos-from``).

They keep every line they do not change, so they read lines rather than parsed sentences; what they
share is the check of each sentence's word lines, so that a malformed file is the one error line
naming its line, as ``xlt finetune parse`` reports it, instead of a file rewritten around the fault.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Optional, Sequence

from conllu.parser import DEFAULT_FIELD_PARSERS, ParseException

from xlt.utils.errors import XltError

Numbered = tuple[int, str]
COLUMNS = 10


def sentence_blocks(numbered: Iterable[Numbered]) -> Iterator[tuple[list[Numbered], Optional[Numbered]]]:
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


def word_lines(block: list[Numbered]) -> list[tuple[int, list[str]]]:
    """The word lines of one sentence as (line number, columns), checked: ten columns, IDs that are
    word numbers 1, 2, ... in order (ranges ``1-2`` and empty nodes ``3.1`` are skipped), a FORM,
    HEADs that name a word of the sentence or 0 and form a tree (``_`` in every word: no tree). An
    XltError names the line (the caller adds the file)."""
    words: list[tuple[int, list[str]]] = []
    for lineno, line in block:
        if line.startswith("#"):
            continue
        columns = line.split("\t")
        if len(columns) != COLUMNS:
            raise XltError(f"expected {COLUMNS} tab-separated CoNLL-U columns, got {len(columns)}", line=lineno)
        try:
            word_id = DEFAULT_FIELD_PARSERS["id"](columns, 0)
        except ParseException:
            raise XltError(f"ID {columns[0]!r} is not a word number (1, 2, ...), a range (1-2) or an empty "
                           "node (3.1)", line=lineno) from None
        if not isinstance(word_id, int):
            continue
        if word_id != len(words) + 1:
            raise XltError(f"word id {word_id} out of order (expected {len(words) + 1})", line=lineno)
        if not columns[1].strip():   # the rewritten sentence would hold an empty word
            raise XltError("a word with an empty FORM", line=lineno)
        words.append((lineno, columns))
    for lineno, columns in words:
        head = columns[6]
        if head != "_" and not (head.isdigit() and int(head) <= len(words)):
            raise XltError(f"HEAD {head!r} names no word of the sentence (0..{len(words)})", line=lineno)
    headless = [lineno for lineno, columns in words if columns[6] == "_"]
    if headless and len(headless) < len(words):   # a tree with a word left out is no tree to check
        raise XltError("a word without a head where the sentence's other words have one", line=headless[0])
    if words and not headless:
        check_heads_reach_root([int(columns[6]) for _, columns in words], [lineno for lineno, _ in words])
    return words


def check_heads_reach_root(heads: Sequence[int], lines: Sequence[int], path: Optional[str] = None) -> None:
    """XltError at the line of the first word whose chain of heads runs in a cycle instead of reaching
    the root. ``heads[i]`` is word ``i + 1``'s head (0: the root), each in 0..len(heads); ``lines[i]``
    is that word's line. A second word whose head is 0 is an error too: a UD tree has one root (the
    parser decodes one, and LAS against a two-rooted gold tree would score a tree no decoder gives)."""
    roots = [word for word in range(1, len(heads) + 1) if heads[word - 1] == 0]
    if len(roots) > 1:
        raise XltError(f"words {roots[0]} and {roots[1]} both have head 0: a tree has one root", path,
                       lines[roots[1] - 1])
    for word in range(1, len(heads) + 1):
        seen, node = {word}, heads[word - 1]
        while node != 0:
            if node in seen:
                cycle = [node]
                while heads[cycle[-1] - 1] != node:
                    cycle.append(heads[cycle[-1] - 1])
                raise XltError(f"word {node}'s heads run in a cycle ({' -> '.join(map(str, cycle + [node]))}) "
                               "instead of reaching the root", path, lines[node - 1])
            seen.add(node)
            node = heads[node - 1]
