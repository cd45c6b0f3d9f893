"""The contract between a task (XNLI, NER, parsing) and the fine-tuning runner.

A task knows its data format, how an example becomes model input through a pretrained run's text
pipeline, its head (the network on top of the encoder: ``forward``, ``loss``, ``decode``), and its
metrics. The runner knows nothing of any of these: it loops, selects and records.

Shapes: B examples (or windows) per batch, T subword positions, D = d_model.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Iterator, Mapping, Optional, Sequence, Union

import torch
from torch import Tensor, nn

from xlt.text.pipeline import TextPipeline


@dataclass
class Batch:
    """One padded batch of one language.

    Attributes:
        input_ids: LongTensor[B, T] (``</s>``-bounded inputs, see ``xlt.text.pipeline.model_input``).
        padding_mask: BoolTensor[B, T], True at padding (None when no row is padded).
        example_ids: which example each row belongs to (several rows per example for windowed NER).
        fields: task tensors (labels, word start positions, heads, relations ...), each with batch dim B.
    """

    input_ids: Tensor
    padding_mask: Tensor | None
    example_ids: list[int]
    fields: dict[str, Tensor] = field(default_factory=dict)

    def to(self, device: torch.device | str) -> "Batch":
        return Batch(self.input_ids.to(device), None if self.padding_mask is None else self.padding_mask.to(device),
                     self.example_ids, {k: v.to(device) for k, v in self.fields.items()})


@dataclass(frozen=True)
class TaskRecipe:
    """A task's fine-tuning defaults: what a run takes where ``xlt finetune`` leaves an option unset.
    The grid is ``batch_size x encoder_lr x head_lr``; ``head_lr`` None: the head trains at the
    encoder's rate."""

    batch_size: tuple[int, ...]
    encoder_lr: tuple[float, ...]
    head_lr: Optional[tuple[float, ...]]
    epochs: int
    epoch_size: Optional[int]   # examples per epoch; None: one pass over the data
    schedule: str               # constant or linear (warm-up, then linear decay)
    max_len: int


# Wu et al. (2020) §3.2 for NER and parsing: 10 passes over the data, 10 % warm-up then linear decay,
# one learning rate for encoder and head. A task from a plugin module gets it unless it sets its own.
TAGGING_RECIPE = TaskRecipe(batch_size=(16, 32), encoder_lr=(2e-5, 3e-5, 5e-5), head_lr=None, epochs=10,
                            epoch_size=None, schedule="linear", max_len=128)


# split -> file pattern under --data-dir, or split -> {lang: pattern, "*": pattern for the others};
# ``{lang}`` and ``{split}`` are filled in.
Patterns = Mapping[str, Union[str, Mapping[str, str]]]


@dataclass(frozen=True)
class DataLayout:
    """Where ``xlt data fetch`` puts a task's files, relative to ``--data-dir``."""

    files: Patterns

    def pattern(self, lang: str, split: str) -> Optional[str]:
        entry = self.files.get(split)
        return entry.get(lang, entry.get("*")) if isinstance(entry, Mapping) else entry

    def path(self, data_dir: str, lang: str, split: str) -> Optional[str]:
        """The file of (language, split) under ``data_dir``; None where the layout has none."""
        pattern = self.pattern(lang, split)
        return None if pattern is None else os.path.join(data_dir, pattern.format(lang=lang, split=split))


class TaskHead(nn.Module, ABC):
    """The network on top of the encoder's last hidden state (or a chosen layer's)."""

    @abstractmethod
    def forward(self, hidden: Tensor, batch: Batch) -> Any:
        """hidden [B,T,D] -> task outputs (logits, arc/label scores ...)."""

    @abstractmethod
    def loss(self, outputs: Any, batch: Batch) -> Tensor:
        """Mean loss of the batch (a scalar)."""

    @abstractmethod
    def decode(self, outputs: Any, batch: Batch) -> list[Any]:
        """One prediction per row of the batch (labels, tag sequences, trees)."""


class LinearHead(TaskHead):
    """Dropout then one linear layer over labels: the body of the XNLI classifier and the NER tagger
    (which differ only in which positions they read and how they decode)."""

    def __init__(self, d_model: int, labels: Sequence[str], dropout: float):
        super().__init__()
        self.labels = list(labels)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(d_model, len(self.labels))


class Task(ABC):
    """What a task tells the runner. One instance per task; stateless apart from its settings."""

    name: str          # "xnli", "ner", "parse"
    main_metric: str   # the metric selection uses on the source dev set: "accuracy", "f1", "las"
    # The file ending of the task's prediction files (".conllu", ".ner", ".tsv"); None: the task
    # writes none (a plugin task that does not implement :meth:`write_predictions`).
    prediction_suffix: Optional[str] = None
    # A task with a suffix also defines
    #   write_predictions(examples, predictions, labels, out: TextIO) -> None
    # writing one split's predictions (the same ``predictions`` :meth:`evaluate` scores) in a format
    # another scorer can read back. Checked when the class is defined, not after a run has trained.
    # What a run takes where the command leaves an option unset.
    recipe: ClassVar[TaskRecipe] = TAGGING_RECIPE
    # Where its files are under --data-dir; None: every file is named on the command line (a plugin
    # task's source test set may then be left out).
    layout: ClassVar[Optional[DataLayout]] = None
    # Inputs of two segments (a premise and a hypothesis): a model must have a pair layout.
    pair_inputs: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.prediction_suffix and not callable(getattr(cls, "write_predictions", None)):
            raise TypeError(f"task class {cls.__name__} sets prediction_suffix but defines no write_predictions")

    @classmethod
    def settings_for_model(cls, kind: str, settings: Mapping[str, Any], model: str) -> dict[str, Any]:
        """The task's settings for a model of ``kind`` (``xlt``, ``hf``, ``static``: xlt.loader.kinds),
        before the task is built: a default that differs with the kind filled in, or XltError naming
        ``model`` for a setting the kind cannot honour. As given, by default."""
        return dict(settings)

    @abstractmethod
    def read(self, path: str) -> list[Any]:
        """Examples of one split. Malformed input raises XltError(path, line); an empty split too."""

    @abstractmethod
    def labels(self, train_examples: Sequence[Any]) -> list[str]:
        """The label inventory, from the training split only (unknown labels elsewhere are errors)."""

    def check(self, examples: Sequence[Any], labels: list[str]) -> None:
        """Raise XltError(path, line) if a split holds what a head trained on ``labels`` cannot be scored
        on (NER: a tag unseen in training). The runner checks every split before any training."""

    @abstractmethod
    def make_head(self, d_model: int, labels: list[str]) -> TaskHead:
        """A freshly initialised head (seeded by the caller)."""

    @abstractmethod
    def batches(self, examples: Sequence[Any], text: TextPipeline, labels: list[str], batch_size: int,
                max_len: int, shuffle: bool, generator: torch.Generator | None) -> Iterator[Batch]:
        """Encode and pad; with ``shuffle`` the order comes from ``generator`` (exact resume)."""

    @abstractmethod
    def evaluate(self, examples: Sequence[Any], predictions: dict[int, list[Any]], labels: list[str]) -> dict[str, float]:
        """Metrics from per-example predictions: ``predictions[example_id]`` lists the decoded rows of
        that example in batch order (one row, or several overlapping windows for NER)."""

