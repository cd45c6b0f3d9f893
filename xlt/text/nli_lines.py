"""XNLI's task files: ``premise<TAB>hypothesis<TAB>label``, one pair a line.

One check of a line, shared by ``xlt finetune`` (which reads the files) and the filters that map or
permute their sentences (``xlt fake-english``, ``xlt permute-words``), so a file a filter lets through
is one fine-tuning reads, and a bad line stops the filter, not the fine-tuning an hour later.
"""

from __future__ import annotations

from typing import Optional

from xlt.utils.errors import PathLike, XltError

NLI_LABELS = ("entailment", "neutral", "contradiction")


def nli_columns(line: str, path: Optional[PathLike] = None, lineno: Optional[int] = None) -> tuple[str, str, str]:
    """A task file line's (premise, hypothesis, label); XltError saying what is wrong, at ``path``
    and ``lineno`` where given."""
    columns = line.split("\t")
    if len(columns) != 3:
        raise XltError(f"expected premise<TAB>hypothesis<TAB>label, got {len(columns)} column(s)", path, lineno)
    premise, hypothesis, label = columns
    if label not in NLI_LABELS:
        raise XltError(f"unknown label {label!r}; expected one of {', '.join(NLI_LABELS)}", path, lineno)
    if not premise.strip() or not hypothesis.strip():
        raise XltError("empty premise or hypothesis", path, lineno)
    return premise, hypothesis, label
