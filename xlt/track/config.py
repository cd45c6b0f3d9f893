"""The settings of ``xlt track`` (:class:`TrackConfig`) and the measures it knows.

Kept free of numpy and torch: ``xlt track --help`` builds its options from this module.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

from xlt.utils.errors import XltError, require_file
from xlt.utils.typed import help_field

# The record format's names (docs/cron.md, the report reads them); in the order a snapshot runs them.
MEASURES = ("dev_ppl", "cka", "word_p1", "word_mrr", "sentence_p1", "lang_id", "ner_f1")
# word_p1 and word_mrr come from one retrieval: computed together, recorded as two measures.
NEEDS = {"dev_ppl": "the run's own dev stores (config.json)", "cka": "--parallel",
         "word_p1": "--dictionary", "word_mrr": "--dictionary", "sentence_p1": "--tatoeba",
         "lang_id": "--parallel or --tatoeba", "ner_f1": "--ner-data-dir"}
RANDOM = "random"   # the snapshot name of the random-encoder bound
RANDOM_SEED = 0     # the same seed as xlt finetune --checkpoint untrained: one random encoder per run


@dataclass
class TrackConfig:
    """What ``xlt track`` evaluates, on which data, and where the records go."""

    runs: list[str] = help_field("pretraining run directory whose snapshots (checkpoints/step-N.pt) are tracked, "
                                 "or a transformers Trainer's output (its checkpoint-N/ folders)", metavar="DIR")
    output: str = help_field("tracking directory: records.jsonl (appended), locks/, cache/, ner/", metavar="TRACKDIR")
    labels: list[str] = help_field("display name of each --run, in the same order (default: the run directory's "
                                   "last two parts, e.g. default/en-fr)", default_factory=list, metavar="TEXT")
    measures: list[str] = help_field("measures to compute (default: every one whose data is given): "
                                     + ", ".join(MEASURES), default_factory=list, metavar="NAME")
    source_lang: str = help_field("the language the others are compared with (retrieval queries, NER training)",
                                  default="en", metavar="LANG")
    target_lang: Optional[str] = help_field(
        "the other language: required for a transformers Trainer's output whose config names no languages "
        "(an xlt run's is its second language)", default=None, metavar="LANG")
    parallel: Optional[tuple[str, str]] = help_field(
        "line-parallel sentences of the source and the other language (a .tsv: its first column): CKA, the "
        "language-identity signal and the corpus of contextual words", default=None, metavar="SRC_FILE TGT_FILE")
    dictionary: Optional[str] = help_field("bilingual dictionary source -> other language (MUSE format): word "
                                           "retrieval P@1 and MRR", default=None, metavar="FILE")
    word_corpus: Optional[tuple[str, str]] = help_field(
        "raw text of the source and the other language, one sentence per line: the corpus of the contextual "
        "word vectors of word retrieval (layers 1..L; default: the --parallel sentences; without either, "
        "word retrieval has layer 0 only)", default=None, metavar="SRC_FILE TGT_FILE")
    word_sentences: int = help_field("contextual word retrieval: sentences read of each --word-corpus file (the "
                                     "first)", default=2000)
    tatoeba: Optional[tuple[str, str]] = help_field("Tatoeba test sentences of the source and the other language "
                                                    "(line-parallel): sentence retrieval P@1",
                                                    default=None, metavar="SRC_FILE TGT_FILE")
    ner_data_dir: Optional[str] = help_field(
        "NER data in the layout xlt finetune --data-dir reads (ner/wikiann/LANG/{train,dev,test}): zero-shot "
        "and English NER F1, fine-tuned on the source language", default=None, metavar="DIR")
    max_sentences: int = help_field("sentences used of each parallel, Tatoeba and NER dev/test file (the first)",
                                    default=1000)
    max_words: int = help_field("contextual word retrieval: the most frequent words of the corpus kept per language",
                                default=5000)
    ner_train_sentences: int = help_field("NER training sentences used (the first)", default=2000)
    ner_epochs: int = help_field("NER fine-tuning epochs per snapshot", default=3)
    ner_lr: float = help_field("NER fine-tuning learning rate (encoder and head; the demo scale's 3e-3 suits "
                               "64-wide models)", default=3e-3)
    ner_batch_size: int = help_field("NER fine-tuning batch size", default=32)
    ner_max_len: Optional[int] = help_field("NER fine-tuning: subword positions per sentence (default: xlt "
                                            "finetune's, 128; at most the model's positions)", default=None)
    batch_size: int = help_field("sentences per forward pass", default=32)
    device: str = "auto"  # help: the CLI's DEVICE_HELP

    def __post_init__(self) -> None:
        self.labels = list(self.labels)
        self.runs = list(self.runs)
        self.measures = list(dict.fromkeys(self.measures))

    def validate(self) -> None:
        """Bad options and missing files -> XltError before any model is loaded."""
        if not self.runs:
            raise XltError("give at least one --run DIR")
        if self.labels and len(self.labels) != len(self.runs):
            raise XltError(f"{len(self.labels)} --label for {len(self.runs)} --run: give one per run, or none")
        for name in self.measures:
            if name not in MEASURES:
                raise XltError(f"unknown measure {name!r} (one of: {', '.join(MEASURES)})")
        for name in ("max_sentences", "max_words", "word_sentences", "ner_train_sentences", "ner_epochs", "ner_batch_size",
                     "batch_size"):
            if getattr(self, name) < 1:
                raise XltError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.ner_max_len is not None and self.ner_max_len < 3:
            raise XltError(f"--ner-max-len must be at least 3, got {self.ner_max_len}")
        if not self.ner_lr > 0:
            raise XltError(f"--ner-lr must be positive, got {self.ner_lr}")
        for run in self.runs:
            check_run_directory(run)
        for pair in (self.parallel, self.tatoeba, self.word_corpus):
            for path in pair or ():
                require_file(path, "sentence file")
        if self.dictionary is not None:
            require_file(self.dictionary, "dictionary")
        if self.ner_data_dir is not None and not os.path.isdir(self.ner_data_dir):
            raise XltError("no such NER data directory", self.ner_data_dir)

    def label(self, index: int) -> str:
        if self.labels:
            return self.labels[index]
        parts = os.path.normpath(os.path.abspath(self.runs[index])).split(os.sep)
        return "/".join(parts[-2:])

    def has_data(self, measure: str) -> bool:
        """Whether the data ``measure`` needs was given (dev_ppl's comes with the run)."""
        return {"dev_ppl": True, "cka": self.parallel is not None, "word_p1": self.dictionary is not None,
                "word_mrr": self.dictionary is not None, "sentence_p1": self.tatoeba is not None,
                "lang_id": self.parallel is not None or self.tatoeba is not None,
                "ner_f1": self.ner_data_dir is not None}[measure]


def is_trainer_series(run: str) -> bool:
    """A transformers Trainer's output (``checkpoint-N/`` folders holding a model), not an xlt run."""
    from xlt.model.spec import trainer_snapshots

    return not os.path.exists(os.path.join(run, "text.json")) and bool(trainer_snapshots(run))


def check_run_directory(run: str) -> None:
    """A pretraining run directory or a Trainer's output, or one error line naming it."""
    if not os.path.exists(run):
        raise XltError("no such run directory", run)
    if not os.path.isdir(run):
        raise XltError("not a directory, expected a pretraining run directory", run)
    if is_trainer_series(run):
        return
    for needed in ("config.json", "vocab", "text.json"):
        if not os.path.exists(os.path.join(run, needed)):
            raise XltError(f"not a pretraining run directory (no {needed}) nor a transformers Trainer's output "
                           "(no checkpoint-N/ folder with a model)", run)
