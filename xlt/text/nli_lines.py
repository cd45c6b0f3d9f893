"""XNLI's task files: ``premise<TAB>hypothesis<TAB>label``, one pair a line.

One check of a line, shared by ``xlt finetune`` (which reads the files) and the filters that map or
permute their sentences (``xlt fake-english``, ``xlt permute-words``), so a file a filter lets through
is one fine-tuning reads, and a bad line stops the filter, not the fine-tuning an hour later.
"""

from __future__ import annotations

from xlt.utils.errors import XltError

NLI_LABELS = ("entailment", "neutral", "contradiction")


def nli_columns(line: str) -> tuple[str, str, str]:
    """A task file line's (premise, hypothesis, label); XltError saying what is wrong (the caller
    names the file and line)."""
    columns = line.split("\t")
    if len(columns) != 3:
        raise XltError(f"expected premise<TAB>hypothesis<TAB>label, got {len(columns)} column(s)")
    premise, hypothesis, label = columns
    if label not in NLI_LABELS:
        raise XltError(f"unknown label {label!r}; expected one of {', '.join(NLI_LABELS)}")
    if not premise.strip() or not hypothesis.strip():
        raise XltError("empty premise or hypothesis")
    return premise, hypothesis, label
