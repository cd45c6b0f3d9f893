"""The pretraining configuration: one typed, frozen dataclass, checked once when it is built.

:func:`xlt.pretrain.plan.resolve` turns it into the :class:`~xlt.pretrain.plan.PretrainPlan` the
trainer runs; a changed setting is a new config (``dataclasses.replace``), checked again.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Optional

from xlt.utils.errors import XltError
from xlt.utils.typed import help_field


@dataclass(frozen=True)
class PretrainConfig:
    """Everything that decides what a pretraining run computes (paths are recorded as given).

    Frozen: the checks below hold for the object's lifetime, so nothing downstream checks again.
    """

    vocab: str = help_field("fastBPE vocabulary (with its .langs.json ownership sidecar for ablations)")
    train: dict[str, str] = help_field("language and token-store prefix of its training data", metavar="LANG PREFIX")
    dev: dict[str, str] = help_field("language and token-store prefix of its dev data (every language needs one)",
                                      metavar="LANG PREFIX")
    codes: dict[str, str] = help_field("language and the BPE codes its text was segmented with (copied into "
                                       "the run directory so later stages segment new text the same way)",
                                       metavar="LANG CODES", default_factory=dict)
    lowercase: bool = help_field("the text was lowercased by xlt tokenize (recorded for later stages)", default=False)
    remove_accents: bool = help_field("accents were removed by xlt tokenize (recorded for later stages)", default=False)
    preset: str = help_field("model preset: wu2020 (the paper's), small (4 layers of 256: a CPU model of its own), "
                             "mini (8 narrow layers: every Table 1 row on a CPU) or tiny (tests)", default="small")
    sharing: str = help_field("parameter sharing preset, a row of Wu et al.'s Table 1: default, sep-emb, "
                              "sep-l1-3, sep-l1-6, sep-emb+l1-3, sep-emb+l1-6", default="default")
    separate_layers: Optional[tuple[int, int]] = help_field(
        "any contiguous bottom range of language-specific layers (1-based, inclusive); overrides the preset's",
        default=None)
    lang_embeddings: bool = help_field("add XLM-style language embeddings to the input", default=True)
    stream_len: int = help_field("tokens per training window, cut across sentence boundaries (Liu et al.: 20)",
                                 default=256)
    batch_size: int = help_field("windows per batch and per process (the paper: 96 per GPU)", default=32)
    short_stream_len: Optional[int] = help_field(
        "a two-phase curriculum (BERT's): windows of this many tokens for the first --short-stream-steps "
        "steps, batches grown to the same tokens per step; on long windows small models stay at a unigram "
        "model's perplexity for tens of millions of tokens, on 8-token ones they leave it within a few million "
        "(docs/reproduce.md)", default=None)
    short_stream_steps: int = help_field("steps of the short-window phase (with --short-stream-len)", default=0)
    dropout: Optional[float] = help_field("dropout of the model and its attention, instead of the preset's "
                                          "(0 speeds up small models that underfit)", default=None)
    equal_copies_init: bool = help_field(
        "start every language's copy of the separated position embeddings and layers from the same random "
        "weights (token tables still start independent: equal rows would be anchors); with independent "
        "copies a small model leaves the less sampled language at the unigram plateau (docs/pretrain.md)",
        default=False)
    lang_alpha: float = help_field("language sampling: p(lang) proportional to (share of sentences)^alpha",
                                   default=0.7)
    langs_per_step: int = help_field(
        "batches per optimizer step, each of one language drawn by the sampler, one step on their mean "
        "loss (XLM: 1, one language per step; fairseq and BERT mix languages within a step). Tokens per "
        "step grow with it: divide --batch-size to keep them", default=1)
    max_sentences: Optional[int] = help_field("use only the first N training sentences of each language "
                                              "(Liu et al.'s data-size ablation)", default=None)
    random_within_language: Optional[bool] = help_field(
        "draw the 10% random replacements from the batch language's own tokens; default: yes when "
        "embeddings are separate or the vocabulary is language-prefixed (keeps the ablation clean)", default=None)
    max_steps: int = help_field("optimizer steps in total", default=10000)
    lr: float = help_field("peak learning rate of Adam", default=1e-4)
    warmup_steps: int = help_field("inverse square root schedule: linear warm-up steps", default=30000)
    warmup_init_lr: float = help_field("learning rate at step 0 of the warm-up (XLM: 1e-7)", default=1e-7)
    adam_betas: tuple[float, float] = help_field("Adam betas", default=(0.9, 0.999))
    weight_decay: float = help_field("Adam weight decay", default=0.0)
    clip_norm: float = help_field("gradient clipping (max L2 norm; 0 disables; XLM: 5)", default=5.0)
    precision: str = help_field("auto (bf16 on CUDA that has it, else fp16 with a scaler; fp32 on CPU), "
                                "fp32, bf16 or fp16", default="auto")
    compile: bool = help_field(
        "on CUDA, train through torch.compile: on an H200 a wu2020 step of 96 x 256 took 28.7 ms against "
        "40.9 (47 % MFU against 33 %, bench/README.md); the first steps of each window length compile "
        "(~30 s each); evaluation and checkpoints are unchanged. Ignored on the CPU", default=False)
    seed: int = help_field("seed of every generator: CPU runs are bit-reproducible", default=0)
    eval_every: int = help_field("steps between dev evaluations (XLM's epoch)", default=1000)
    save_every: int = help_field("steps between 'last' checkpoints", default=200)
    snapshot_every: int = help_field(
        "steps between weight-only snapshots checkpoints/step-N.pt, kept for good (0: none), to evaluate "
        "the run's history afterwards with --checkpoint step-N", default=0)
    snapshot_at: list[int] = help_field("also a weight-only snapshot after this step (e.g. log-spaced steps)",
                                        metavar="STEP", default_factory=list)
    eval_batches: Optional[int] = help_field("evaluate on at most this many dev batches per language", default=None)
    select_on: str = help_field("dev perplexity that picks the best checkpoint: a language code or 'mean'",
                                default="en")
    log_every: int = help_field("steps between metric lines", default=10)

    def __post_init__(self) -> None:
        # Own copies of the tables and lists: a caller's later change to the dict it passed in
        # cannot reach a config that was checked (frozen only guards the attributes themselves).
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, (dict, list)):
                object.__setattr__(self, f.name, type(value)(value))
        self.validate()

    def validate(self) -> None:
        """Settings the loop cannot run with -> XltError naming the option, before anything is written
        (a zero interval is a division by zero at the first step, a zero lr one in the schedule)."""
        for name in ("max_steps", "eval_every", "save_every", "log_every", "stream_len", "batch_size",
                     "langs_per_step"):
            _require(getattr(self, name) >= 1, name, "at least 1", getattr(self, name))
        _require(self.snapshot_every >= 0, "snapshot_every", "0 (off) or more", self.snapshot_every)
        for step in self.snapshot_at:
            _require(1 <= step <= self.max_steps, "snapshot_at", f"between 1 and --max-steps ({self.max_steps})",
                     step)
        _require(self.eval_batches is None or self.eval_batches >= 1, "eval_batches", "at least 1 when given",
                 self.eval_batches)  # 0 batches: a dev perplexity of nan
        for name in ("lr", "warmup_init_lr", "weight_decay", "clip_norm", "lang_alpha"):
            _require(math.isfinite(getattr(self, name)), name, "a finite number", getattr(self, name))
        _require(self.lr > 0, "lr", "positive", self.lr)
        _require(self.warmup_steps >= 0, "warmup_steps", "0 or more", self.warmup_steps)
        _require(0 < self.warmup_init_lr <= self.lr, "warmup_init_lr", f"positive and at most --lr ({self.lr:g})",
                 self.warmup_init_lr)
        _require(self.weight_decay >= 0, "weight_decay", "0 or more", self.weight_decay)
        _require(self.clip_norm >= 0, "clip_norm", "0 (off) or more", self.clip_norm)
        _require(self.lang_alpha >= 0, "lang_alpha", "0 or more", self.lang_alpha)
        for beta in self.adam_betas:
            _require(0 <= beta < 1, "adam_betas", "in [0, 1)", beta)
        _require(0 <= self.seed < 2 ** 32, "seed", "between 0 and 2^32 - 1", self.seed)
        if self.short_stream_len is not None:
            _require(1 <= self.short_stream_len < self.stream_len, "short_stream_len",
                     f"between 1 and --stream-len - 1 ({self.stream_len - 1})", self.short_stream_len)
            _require(self.short_stream_steps >= 1, "short_stream_steps", "at least 1 with --short-stream-len",
                     self.short_stream_steps)
        else:
            _require(self.short_stream_steps == 0, "short_stream_steps", "0 without --short-stream-len",
                     self.short_stream_steps)
        _require(self.dropout is None or 0 <= self.dropout < 1, "dropout", "in [0, 1)", self.dropout)
        _require(self.max_sentences is None or self.max_sentences >= 1, "max_sentences", "at least 1 when given",
                 self.max_sentences)
        if self.precision not in PRECISIONS:
            raise XltError(f"--precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")

    @property
    def short_batch_size(self) -> int:
        """Windows per batch in the short phase: as many tokens per step as a long batch."""
        return max(1, self.batch_size * self.stream_len // (self.short_stream_len or self.stream_len))

    def to_dict(self) -> dict:
        d = asdict(self)
        d["separate_layers"] = list(self.separate_layers) if self.separate_layers else None
        d["adam_betas"] = list(self.adam_betas)
        return d


def _require(ok: bool, name: str, what: str, value) -> None:
    if not ok:
        raise XltError(f"--{name.replace('_', '-')} must be {what}, got {value:g}")


PRECISIONS = ("auto", "fp32", "bf16", "fp16")

# Settings a run directory written before they existed was trained with (check_same_config).
ADDED_DEFAULTS = {"short_stream_len": None, "short_stream_steps": 0, "dropout": None, "equal_copies_init": False,
                  "langs_per_step": 1, "compile": False}

# Keys that may change when the same run directory is started again (to train for longer).
# --compile only changes how the same arithmetic is scheduled, so a run may resume with or without it;
# snapshots only copy weights out, so a run may resume with others (and one written before they
# existed resumes, since mutable keys are not compared). --eval-batches is not one: best.pt is the
# lowest dev perplexity, and perplexities over other dev batches are not comparable.
MUTABLE_KEYS = ("max_steps", "log_every", "compile", "snapshot_every", "snapshot_at")
