"""NER's tagged files as numbered lines, for the filters that rewrite their words (``xlt
fake-english``, ``xlt permute-words``; format ``wikiann``: ``word<TAB>tag``, a blank line between
sentences).

The tag check is ``xlt finetune ner``'s reader's, so a file a filter lets through is one fine-tuning
reads, and a bad line stops the filter with the one error line naming it, not the fine-tuning later.
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator, Optional

from xlt.utils.errors import PathLike, XltError

Numbered = tuple[int, str]
TAG = re.compile(r"O|[BI]-\S+")
LANG_PREFIX = re.compile(r"([a-z]{2,3}):.")                  # WikiANN: "en:Paris"


def language_prefix(words: Iterable[str]) -> Optional[str]:
    """WikiANN's ``en:`` when every word of a file's first sentence has that one prefix, else None
    (``ftp:archive`` in an unprefixed file is a word): the file's words are all read the same way."""
    prefixes = {m.group(1) if m else None for m in (LANG_PREFIX.match(w) for w in words)}
    return f"{prefixes.pop()}:" if len(prefixes) == 1 and None not in prefixes else None


def check_tag(tag: str, path: Optional[PathLike] = None, lineno: Optional[int] = None) -> None:
    """XltError unless ``tag`` is ``O``, ``B-TYPE`` or ``I-TYPE`` (IOB1 or IOB2)."""
    if not TAG.fullmatch(tag):
        hint = " (IOBES tags are not supported)" if tag[:2] in ("E-", "S-") else ""
        raise XltError(f"bad tag {tag!r}: expected O, B-TYPE or I-TYPE{hint}", path, lineno)


def checked_tagged_lines(numbered: Iterable[Numbered]) -> Iterator[Numbered]:
    """The lines of a ``word<TAB>...<TAB>tag`` file, each word line checked before it passes: as many
    columns as the file's first word line (at least two), the last one a tag. An XltError names the
    line (the caller adds the file)."""
    columns = None
    for lineno, line in numbered:
        if line.strip():
            row = line.split("\t")
            if columns is None:
                if len(row) < 2:
                    raise XltError("expected word<TAB>tag", line=lineno)
                columns = len(row)
            elif len(row) != columns:
                raise XltError(f"expected {columns} columns like the file's first word line, got {len(row)}",
                               line=lineno)
            if not row[0].strip():
                raise XltError("empty word", line=lineno)
            check_tag(row[-1], lineno=lineno)
        yield lineno, line
