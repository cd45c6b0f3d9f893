"""What the three tasks share when they turn examples into padded model inputs.

* :func:`example_order` -- the order of one pass over the examples the runner hands over
  (permuted by the runner's generator when ``shuffle``, so a resumed run replays it).
* :func:`model_input`, :func:`pad_model_inputs`, :func:`special_positions` -- the input layout of the
  model behind a text pipeline: xlt's ``</s> a </s> [b </s>]`` padded with ``<pad>``, or a pipeline's
  own (a Hugging Face model's ``[CLS] a [SEP] b [SEP]``, :class:`xlt.model.hf_finetune.HFText`). Tasks build
  inputs through these, never with xlt's ids directly, so every task runs on every kind of model.
* :func:`pad_rows` -- right-padding label rows to the longest row.
* :class:`EncodingMemo` -- tokenization (Moses + BPE) costs ~50 µs per CoNLL word on CPU, i.e.
  seconds per epoch of WikiANN or UD English; the memo keeps each example's encoding per text
  pipeline, so only the first pass pays for it.
* :func:`settings_from` -- a task's typed settings from keyword arguments, typos being errors.
"""

from __future__ import annotations

import dataclasses
import typing
import weakref
from typing import Any, Callable, Optional, Sequence, TypeVar

import torch
from torch import Tensor

from xlt.model.xlt_run import pad_inputs
from xlt.text.pipeline import TextPipeline
from xlt.text.pipeline import model_input as xlt_model_input
from xlt.text.vocab import PAD_ID
from xlt.utils.errors import XltError
from xlt.utils.typed import conform

IGNORE = -100          # target id that cross-entropy skips (torch's default ignore_index)

T = TypeVar("T")


def example_order(n: int, shuffle: bool, generator: Optional[torch.Generator]) -> list[int]:
    """Indices 0..n-1, permuted by ``generator`` when ``shuffle``."""
    if not shuffle:
        return list(range(n))
    return torch.randperm(n, generator=generator).tolist()


def model_input(text: Any, *segments: Sequence[int]) -> list[int]:
    """Content ids of one or two segments -> the input of the model ``text`` belongs to. One special
    token always comes first (the "first token" sentence classifiers read; word ``i`` of a single
    segment starts at position ``1 + offset``)."""
    own = getattr(text, "model_input", None)
    return own(*segments) if own is not None else xlt_model_input(*segments)


def special_positions(text: Any, segments: int) -> int:
    """How many special tokens :func:`model_input` adds around ``segments`` segments (xlt: one more than
    the segments; XLM-R's pair: four)."""
    own = getattr(text, "special_positions", None)
    return own(segments) if own is not None else segments + 1


def pad_model_inputs(text: Any, rows: Sequence[Sequence[int]]) -> tuple[Tensor, Optional[Tensor]]:
    """Model inputs -> (ids [B,T] right-padded with the model's pad id, padding mask or None)."""
    return pad_inputs(rows, pad_id=getattr(text, "pad_id", PAD_ID))


def pad_rows(rows: Sequence[Sequence[int]], value: int) -> Tensor:
    """Ragged int rows -> LongTensor [B, max(len, 1)] right-padded with ``value``."""
    width = max(1, max((len(r) for r in rows), default=0))
    out = torch.full((len(rows), width), value, dtype=torch.long)
    for i, row in enumerate(rows):
        out[i, :len(row)] = torch.as_tensor(list(row), dtype=torch.long)
    return out


class EncodingMemo:
    """``encode()`` results kept per (text pipeline, example) object, for later epochs.

    Both keys are held weakly (examples hash by identity): when the runner drops a split or a
    pipeline, its encodings go too. Reusing one :class:`TextPipeline` per language is what makes
    later epochs free.
    """

    def __init__(self) -> None:
        self._per_pipeline: "weakref.WeakKeyDictionary[TextPipeline, weakref.WeakKeyDictionary]" = \
            weakref.WeakKeyDictionary()

    def get(self, text: TextPipeline, example: Any, encode: Callable[[], T]) -> T:
        memo = self._per_pipeline.setdefault(text, weakref.WeakKeyDictionary())
        if example not in memo:
            memo[example] = encode()
        return memo[example]


S = TypeVar("S")


def settings_from(cls: type[S], values: dict[str, Any], task: str) -> S:
    """``cls(**values)`` for a task's settings dataclass: an unknown name or a value of the wrong type
    (``strip_subtypes False`` from a command line is the boolean, ``dropout abc`` an error) is an
    XltError, never a silent key or a truthy string."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise XltError(f"unknown {task} setting(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    hints = typing.get_type_hints(cls)
    return cls(**{name: conform(value, hints[name], f"{task} setting {name}", from_text=True)
                  for name, value in values.items()})
