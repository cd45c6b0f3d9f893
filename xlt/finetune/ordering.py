"""Which examples go into which batch, in which order: epochs, length bucketing, evaluation order.

The runner, not the task, decides the order: it hands :meth:`Task.batches` an already ordered list
with ``shuffle=False``, and maps the task's ``example_ids`` (positions in that list) back to the
split. So every task gets the same exactly-resumable epochs and the same padding savings.

* Training: epoch ``e`` takes the next ``epoch_size`` examples of an endless sequence of passes,
  each pass a permutation drawn from ``(seed, pass)``; so epoch ``e`` is a pure function of
  ``(seed, e)`` and resuming needs no data-loader state. With bucketing, each chunk of
  ``BUCKET_BATCHES`` batches is sorted by length and cut into batches, and the batches of the
  epoch are shuffled (from ``(seed, e)``): batches hold similar lengths, their order stays random.
* Evaluation: examples sorted by length (longest first, so memory trouble shows at once).

Lengths and rows come from one encoding pass through the task itself (:func:`example_sizes`), since
only the task knows how an example becomes input rows and positions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterator, Optional, Sequence

import torch

from xlt.finetune.task import Batch, Task
from xlt.text.pipeline import TextPipeline

BUCKET_BATCHES = 100  # batches per sorting chunk: large enough to group lengths, small enough to stay random
LENGTH_PASS_BATCH = 256


def _generator(*numbers: int) -> torch.Generator:
    """A generator seeded from several integers (seed, epoch or pass), stable across runs and platforms."""
    seed = 0
    for n in numbers:
        seed = (seed * 1_000_003 + int(n)) % (2**63 - 1)
    return torch.Generator().manual_seed(seed)


@dataclass(frozen=True)
class ExampleSizes:
    """What each example becomes: ``lengths[i]`` input positions of its longest row, ``rows[i]`` rows
    (more than one where a task cuts a long example into windows, as NER does)."""

    lengths: list[int]
    rows: list[int]


def example_sizes(task: Task, examples: Sequence[Any], text: TextPipeline, labels: list[str],
                  max_len: int) -> ExampleSizes:
    """One encoding pass through the task: the length and the number of rows of every example."""
    lengths, rows = [0] * len(examples), [0] * len(examples)
    for batch in task.batches(examples, text, labels, LENGTH_PASS_BATCH, max_len, False, None):
        width = batch.input_ids.shape[1]
        row_lengths = width - (batch.padding_mask.sum(1) if batch.padding_mask is not None
                               else torch.zeros(len(batch.example_ids)))
        for example_id, row_len in zip(batch.example_ids, row_lengths.tolist()):
            lengths[example_id] = max(lengths[example_id], int(row_len))
            rows[example_id] += 1
    return ExampleSizes(lengths, rows)


def epoch_steps(rows: Sequence[int], order: Sequence[int], batch_size: int) -> int:
    """Batches in an epoch over ``order``: tasks fill every batch with ``batch_size`` rows, windows
    of one example and the next alike, so only the last batch is short."""
    return math.ceil(sum(rows[i] for i in order) / batch_size)


def epoch_order(n_examples: int, epoch: int, seed: int, epoch_size: Optional[int]) -> list[int]:
    """Indices of the training examples of ``epoch`` (0-based): the next ``epoch_size`` of endless passes."""
    size = epoch_size or n_examples
    start = epoch * size
    order: list[int] = []
    while len(order) < size:
        position = start + len(order)
        pass_number, offset = divmod(position, n_examples)
        permutation = torch.randperm(n_examples, generator=_generator(seed, 1, pass_number)).tolist()
        order.extend(permutation[offset:offset + size - len(order)])
    return order


def bucketed(order: list[int], lengths: Sequence[int], batch_size: int, seed: int, epoch: int) -> list[int]:
    """``order`` rearranged so consecutive ``batch_size`` blocks hold similar lengths, blocks shuffled."""
    chunk = BUCKET_BATCHES * batch_size
    blocks: list[list[int]] = []
    for start in range(0, len(order), chunk):
        part = sorted(order[start:start + chunk], key=lambda i: lengths[i])
        blocks.extend(part[b:b + batch_size] for b in range(0, len(part), batch_size))
    shuffled = torch.randperm(len(blocks), generator=_generator(seed, 2, epoch)).tolist()
    return [i for b in shuffled for i in blocks[b]]


def evaluation_order(lengths: Sequence[int]) -> list[int]:
    """Longest first; ties keep file order (deterministic batches)."""
    return sorted(range(len(lengths)), key=lambda i: -lengths[i])


@dataclass
class OrderedBatch:
    """A task batch whose ``example_ids`` were mapped back to positions in the whole split."""

    batch: Batch
    padding_positions: int
    positions: int


def ordered_batches(task: Task, examples: Sequence[Any], order: list[int], text: TextPipeline,
                    labels: list[str], batch_size: int, max_len: int) -> Iterator[OrderedBatch]:
    """Batches of ``examples[order]`` in that order, with split-level example ids and padding counts."""
    chosen = [examples[i] for i in order]
    for batch in task.batches(chosen, text, labels, batch_size, max_len, False, None):
        batch.example_ids = [order[i] for i in batch.example_ids]
        pad = 0 if batch.padding_mask is None else int(batch.padding_mask.sum())
        yield OrderedBatch(batch, pad, batch.input_ids.numel())


def padding_fraction(lengths: Sequence[int], order: list[int], batch_size: int) -> float:
    """Share of padding positions if ``order`` is cut into ``batch_size`` blocks padded to their longest."""
    padded = total = 0
    for start in range(0, len(order), batch_size):
        block = [lengths[i] for i in order[start:start + batch_size]]
        padded += max(block) * len(block)
        total += sum(block)
    return 1.0 - total / padded if padded else 0.0
