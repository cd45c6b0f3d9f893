"""The fine-tuning configuration: one typed dataclass, as ``xlt finetune`` parses it.

:class:`FinetuneConfig` is what ``xlt finetune`` parses (and what a JSON/TOML ``--config`` file may
hold): the command's options as given. Grid-able fields are lists; fields left ``None`` take the
task's default (its :class:`~xlt.finetune.task.TaskRecipe`: Wu et al. 2020 §3.2), so ``xlt finetune
xnli`` alone runs the paper's grid. :func:`xlt.finetune.plan.make_plan` resolves it once into a
complete, frozen :class:`~xlt.finetune.plan.FinetunePlan`, whose grid is :class:`RunSettings`, the
complete, hashable description of ONE training run.

Data paths default to the task's layout under ``--data-dir`` (:class:`~xlt.finetune.task.DataLayout`,
the layout that ``xlt data fetch`` produces); explicit paths always win. This module imports no task
(nor torch): ``xlt finetune --help`` reads its help texts.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import typing
from dataclasses import dataclass
from typing import Any, Optional

from xlt.utils.checkpoint_names import check_checkpoint_name
from xlt.utils.errors import XltError, require_file
from xlt.utils.typed import conform, help_field
from xlt.utils.textio import read_text

SCHEDULES = ("constant", "linear")
LANG_EMBEDDING_AT_TEST = ("target", "source")


def naming_option(split: str, lang: str = "LANG") -> str:
    """The option that names ``lang``'s ``split`` file instead of the layout's."""
    return {"train": f"--train {lang} PATH", "dev": f"--dev {lang} PATH"}.get(split, f"--eval {lang} DEV TEST")


def default_path(task: str, data_dir: Optional[str], lang: str, split: str) -> str:
    """The task's layout file (:attr:`~xlt.finetune.task.Task.layout`) for (language, split) under
    ``data_dir`` (default: where ``xlt data fetch`` writes), or XltError saying which option names it."""
    # Imported here, not above: the tasks import torch, and `xlt finetune --help` reads this module.
    from xlt.data.recipes import data_dir as fetched_data_dir
    from xlt.finetune.registry import task_factory

    layout = getattr(task_factory(task), "layout", None)
    if layout is None or layout.pattern(lang, split) is None:
        raise XltError(f"no default {split} file for task {task!r} in language {lang!r}; give {naming_option(split)}")
    return layout.path(str(fetched_data_dir()) if data_dir is None else data_dir, lang, split)


# "untrained" is the honest baseline the papers lack: what fine-tuning alone reaches with the same
# architecture, vocabulary and settings, so a score can be read as what pretraining bought.


@dataclass(frozen=True)
class RunSettings:
    """Everything that decides what ONE fine-tuning run computes (its directory is named by a hash of
    these plus the model and data checksums). Test-time settings are not here: changing them
    re-evaluates a finished run instead of training it again."""

    batch_size: int
    encoder_lr: float
    head_lr: float
    seed: int
    epochs: int
    epoch_size: Optional[int]
    schedule: str
    warmup_fraction: float
    max_len: int
    dropout: Optional[float]
    freeze_bottom: int
    clip_norm: float
    bucket: bool

    def grid_point(self) -> dict[str, Any]:
        """The searched hyper-parameters (the seed is not one: runs differing only in it are replicas)."""
        return {"batch_size": self.batch_size, "encoder_lr": self.encoder_lr, "head_lr": self.head_lr}

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class FinetuneConfig:
    """A zero-shot transfer experiment: fine-tune on the source language, evaluate on every target."""

    task: str = help_field(
        "task name (xnli, ner, parse) or a plugin 'module:Class' implementing xlt.finetune.task.Task")
    model: str = help_field("pretrained run directory (xlt pretrain --run-dir); a transformers model directory or "
                            "hf:NAME (its own tokenizer and input layout, fine-tuned whole; docs/hf.md); or "
                            "static:FILE: frozen word vectors (word2vec text format) under a BiLSTM-max encoder, "
                            "the XNLI paper's baseline", metavar="MODEL")
    output: str = help_field("results directory: results.json, summary.md and runs/<hash>/ per run", metavar="DIR")
    checkpoint: str = help_field("which pretrained checkpoint to start from: best (dev perplexity), last, a "
                                 "snapshot step-N (xlt pretrain --snapshot-every), or "
                                 "untrained (the run's architecture and vocabulary, freshly initialised: the "
                                 "no-pretraining control); a transformers model: best (its weights), step-N (a Trainer's "
                                 "checkpoint-N folder) or untrained (its config under its own initialisation)",
                                 default="best")
    source: Optional[str] = help_field("source (training) language; default: the language of --train/--dev, else en",
                                       default=None, metavar="LANG")
    train: Optional[tuple[str, str]] = help_field("source language and its training file (default: the task's layout "
                                                  "under --data-dir)", default=None, metavar="LANG PATH")
    dev: Optional[tuple[str, str]] = help_field("source language and its dev file: model selection uses it and nothing "
                                                "else", default=None, metavar="LANG PATH")
    targets: list[str] = help_field("target languages (repeatable or comma list; default: every language of the model "
                                    "but the source)", default_factory=list, metavar="LANG")
    eval: dict[str, tuple[str, str]] = help_field(
        "a target language with explicit dev and test files (repeatable); implies --target LANG",
        default_factory=dict, metavar="LANG DEV_FILE TEST_FILE")
    data_dir: Optional[str] = help_field("root of the default data layout (default: where xlt data fetch writes, "
                                         "$XLT_DATA, else ~/.cache/xlt; make runs use data/)", default=None)
    task_settings: dict[str, Any] = help_field("settings passed to the task's constructor (JSON values)",
                                               default_factory=dict, metavar="KEY VALUE")
    batch_size: Optional[list[int]] = help_field("batch sizes to search (XNLI default 4,8; NER/parsing 16,32)",
                                                 default=None, metavar="N[,N...]")
    encoder_lr: Optional[list[float]] = help_field(
        "encoder learning rates to search (XNLI default 1.25e-6,2.5e-6,5e-6; NER/parsing 2e-5,3e-5,5e-5)",
        default=None, metavar="LR[,LR...]")
    head_lr: Optional[list[float]] = help_field(
        "task-head learning rates to search (XNLI default 5e-6,2.5e-5,1.25e-4); unset for NER/parsing: the "
        "head uses the encoder's rate", default=None, metavar="LR[,LR...]")
    seeds: list[int] = help_field("seeds: every grid point runs once per seed (crosslingual-nlp: 12,156,78,37,8)",
                                  default_factory=lambda: [12], metavar="N[,N...]")
    epochs: Optional[int] = help_field("epochs (XNLI default 200; NER/parsing 10); a checkpoint after each",
                                       default=None)
    epoch_size: Optional[int] = help_field("training examples per epoch, drawn without replacement across passes "
                                           "(XLM's --epoch_size; XNLI default 20000); unset: one pass over the data",
                                           default=None)
    schedule: Optional[str] = help_field("learning-rate schedule: constant (XNLI default) or linear (warm-up, then "
                                         "linear decay to 0; NER/parsing default)", default=None)
    warmup_fraction: float = help_field("share of all steps spent warming up under the linear schedule", default=0.1)
    max_len: Optional[int] = help_field("maximum subword positions per input (XNLI/parsing 256, NER 128)", default=None)
    eval_batch_size: int = help_field("batch size for evaluation (does not change results)", default=64)
    dropout: Optional[float] = help_field("dropout in the encoder while fine-tuning; unset: the pretrained model's",
                                          default=None)
    freeze_bottom: int = help_field("also freeze the embeddings and the bottom K shared layers (Liu et al. 2020 "
                                    "fine-tune the last 6 of 12: K=6); 0 freezes only language-specific parts",
                                    default=0, metavar="K")
    lang_embedding_at_test: str = help_field("language-embedding id fed for a target at test time: target (as "
                                             "crosslingual-nlp) or source", default="target")
    clip_norm: float = help_field("gradient clipping, max L2 norm (0 disables; XLM's default 5)", default=5.0)
    bucket: bool = help_field("group training batches by length within chunks of 100 batches (less padding)",
                              default=True)
    map_dir: list[str] = help_field("test-time linear maps: a directory from xlt align dictionary (map.json + "
                                    "W_layer{i}.npy) mapping one target's layer output into the source space "
                                    "(repeatable, one per target)", default_factory=list, metavar="DIR")
    map_layer: Optional[int] = help_field("layer whose output is mapped (0 = embeddings); needed when a map "
                                          "directory holds several layers", default=None)
    shift: list[str] = help_field("test-time mean-difference shift (Liu et al. 2020): a file of xlt shift-decode shift "
                                  "--src means.TARGET.npz --tgt means.SOURCE.npz (repeatable, one per target); the "
                                  "target's layer output gets alpha * (mean_source - mean_target) added",
                                  default_factory=list, metavar="FILE")
    shift_layer: Optional[int] = help_field("layer whose output is shifted (Liu et al.: 6)", default=None)
    shift_alpha: list[float] = help_field(
        "shift weights; with several, each target picks its own on its dev set (as Liu et al.'s Table 4)",
        default_factory=lambda: [1.0], metavar="A[,A...]")
    codes: Optional[str] = help_field("with --model static:FILE: the BPE codes the vectors' text was segmented with "
                                      "(needed when the file has @@ pieces); unset: Moses tokens are looked up as "
                                      "they are", default=None, metavar="FILE")
    lstm_dim: int = help_field("with --model static:FILE: LSTM units per direction (XNLI baseline: 512)",
                               default=512)
    device: str = help_field("cpu, cuda, cuda:N or auto (CUDA when present)", default="auto")
    precision: str = help_field("auto (bf16 autocast on CUDA that supports it natively, else fp32), fp32, or bf16 "
                                "(autocast on any device, CPUs included)", default="auto")
    keep_weights: bool = help_field("keep each run's best fine-tuned weights (trainable parts only) so new targets "
                                    "or test-time transforms can be evaluated later without training again",
                                    default=True)
    predictions: bool = help_field("write every evaluation's predictions to a file in its run directory "
                                   "(predictions/SPLIT.LANG.EXT: CoNLL-U for parsing, word gold predicted for NER, "
                                   "id gold predicted for XNLI), named in results.json", default=True)

    def __post_init__(self) -> None:
        self.targets = [t for item in self.targets for t in str(item).split(",") if t]
        for name in ("batch_size", "encoder_lr", "head_lr", "seeds", "shift_alpha", "shift", "map_dir"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, list):
                setattr(self, name, list(value) if isinstance(value, (tuple, set)) else [value])

    def validate(self) -> None:
        """Raise XltError on any value no run could use. Fields left unset take the task's recipe later
        (:func:`xlt.finetune.plan.make_plan`), whose values are valid by construction."""
        for name in ("batch_size", "encoder_lr", "seeds"):
            if getattr(self, name) is not None and not getattr(self, name):
                raise XltError(f"--{name.replace('_', '-')} needs at least one value")
        for name in ("batch_size", "encoder_lr", "head_lr", "seeds"):
            values = getattr(self, name) or []
            if len(set(values)) != len(values):  # one run counted twice would fake a mean +- std
                raise XltError(f"--{name.replace('_', '-')} lists a value twice: {values}")
        if any(b < 1 for b in self.batch_size or []):
            raise XltError(f"batch sizes must be positive, got {self.batch_size}")
        if any(not 0 < lr < math.inf for lr in (self.encoder_lr or []) + (self.head_lr or [])):
            raise XltError("learning rates must be positive finite numbers")
        if not 0 <= self.clip_norm < math.inf:
            raise XltError(f"--clip-norm must be 0 (off) or a positive number, got {self.clip_norm}")
        if any(not math.isfinite(a) for a in self.shift_alpha):
            raise XltError(f"--shift-alpha takes finite numbers, got {self.shift_alpha}")
        if (self.epochs is not None and self.epochs < 1) or (self.max_len is not None and self.max_len < 3) \
                or self.eval_batch_size < 1:
            raise XltError("epochs and --eval-batch-size must be at least 1, --max-len at least 3")
        if self.epoch_size is not None and self.epoch_size < 1:
            raise XltError("--epoch-size must be positive")
        if self.schedule is not None and self.schedule not in SCHEDULES:
            raise XltError(f"unknown schedule {self.schedule!r}; known: {', '.join(SCHEDULES)}")
        if not 0.0 <= self.warmup_fraction < 1.0:
            raise XltError(f"--warmup-fraction must be in [0, 1), got {self.warmup_fraction}")
        if self.dropout is not None and not 0.0 <= self.dropout < 1.0:
            raise XltError(f"--dropout must be in [0, 1), got {self.dropout}")
        if self.freeze_bottom < 0:
            raise XltError("--freeze-bottom must be 0 or more")
        if self.lang_embedding_at_test not in LANG_EMBEDDING_AT_TEST:
            raise XltError(f"--lang-embedding-at-test must be one of {', '.join(LANG_EMBEDDING_AT_TEST)}")
        check_checkpoint_name(self.checkpoint, also=("untrained",))
        if self.precision not in ("auto", "fp32", "bf16"):
            raise XltError(f"--precision must be auto, fp32 or bf16, got {self.precision!r}")
        if (self.shift_layer is None) != (not self.shift):
            raise XltError("--shift and --shift-layer go together")
        if self.map_layer is not None and not self.map_dir:
            raise XltError("--map-layer chooses a layer of a --map-dir and none is given")

    def source_language(self) -> str:
        """The source language: --source, else the language of --train/--dev, else en; they must agree."""
        named = {pair[0] for pair in (self.train, self.dev) if pair is not None}
        if self.source is not None:
            named.add(self.source)
        if len(named) > 1:
            raise XltError(f"--source, --train and --dev name different languages ({', '.join(sorted(named))}); "
                           "fine-tuning has one source language")
        return named.pop() if named else "en"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def read_config_file(path: str) -> dict[str, Any]:
    """A JSON or TOML file of FinetuneConfig fields (dashes or underscores in names)."""
    require_file(path, "config file")
    text = read_text(path)
    try:
        if path.endswith(".toml"):
            import tomllib

            data = tomllib.loads(text)
        else:
            data = json.loads(text)
    except ValueError as e:  # JSONDecodeError and TOMLDecodeError are ValueErrors
        raise XltError(f"not a valid {'TOML' if path.endswith('.toml') else 'JSON'} config ({e})", path) from None
    if not isinstance(data, dict):
        raise XltError("a config file holds one object of option names and values", path)
    data = {k.replace("-", "_"): v for k, v in data.items()}
    known = {f.name for f in dataclasses.fields(FinetuneConfig)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise XltError(f"unknown option(s): {', '.join(unknown)}", path)
    hints = typing.get_type_hints(FinetuneConfig)
    return {key: conform(value, hints[key], f"option {key}", path=path) for key, value in data.items()}
