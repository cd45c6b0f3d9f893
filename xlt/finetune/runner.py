"""``xlt finetune``: zero-shot transfer over a grid of runs that survive kills, cron and a second process.

:func:`finetune` reads and checks every input first (so a bad file fails before any training), then
for each grid point and seed:

* names the run directory ``OUTPUT/runs/<settings>-<hash>`` from a hash of everything that decides
  the trained model (:class:`~xlt.finetune.records.RunIdentity`: model checkpoint and vocabulary
  checksums, task and its settings, source language, train/dev checksums, labels, the run's
  :class:`~xlt.finetune.config.RunSettings`);
* skips it when it is finished and every evaluation asked for is on disk (no model is loaded);
* otherwise takes the run's lock (``exclusive_lock``, non-blocking): if another process holds it,
  the run is skipped with a message, so several processes (or GPUs, or overlapping cron jobs) can
  work through one grid side by side; else it builds a :class:`~xlt.finetune.trainer.RunTrainer`
  from the command's data and the run's settings, trains or resumes, and runs the evaluations that
  are missing: the source's dev/test, each target's dev/test through its own language-specific
  parts, and the optional test-time map and shift variants.

Evaluations are cached one file each, keyed by language, split, data checksum, variant and its
parameters, and the language-embedding id; so adding a target or a shift weight later only
evaluates what is new; each also writes a prediction file (:mod:`xlt.finetune.evaluations`). At the
end ``results.json`` (every run, the selection, mean of the best two, mean ± std over seeds) and
``summary.md`` are rewritten atomically from what is on disk, one process at a time (``OUTPUT/lock``).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch

from xlt.finetune import selection
from xlt.finetune.config import DATA_LAYOUT, FinetuneConfig, RunSettings, layout_file
from xlt.finetune.evaluations import evaluations
from xlt.finetune.hf import HFRun, is_hf_model
from xlt.finetune.static import StaticRun, coverage_markdown, is_static
from xlt.finetune.ordering import ExampleSizes, evaluation_order, example_sizes, ordered_batches
from xlt.finetune.records import RunIdentity, RunRecord
from xlt.finetune.runfiles import RunFiles, output_files_lock
from xlt.finetune.task import Batch, Task
from xlt.finetune.trainer import RunTrainer, SourceData, frozen_parameter_names
from xlt.model.hf import layer_output_modules
from xlt.model.interventions import LayerMap, TargetShift, load_map, load_shift
from xlt.pretrain.pretrained import PretrainedRun
from xlt.utils import log
from xlt.utils.device import resolve_device
from xlt.utils.errors import XltError, require_file
from xlt.utils.rundir import environment, exclusive_lock, write_run_description
from xlt.utils.textio import atomic_output, file_sha256, make_directory, read_json, write_json

RESULTS_FORMAT = "xlt-finetune-results/1"
EXIT_OK, EXIT_FAILED, EXIT_BUSY = 0, 1, 75  # 75 = EX_TEMPFAIL: runs held by another process, try later


def resolve_task(name: str, settings: dict[str, Any]) -> Task:
    """A built-in task by name (the registry), or ``module:Class`` from your own module."""
    if ":" in name:
        module_name, attr = name.split(":", 1)
        try:
            factory = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as e:
            raise XltError(f"cannot load task {name!r} ({e})") from None
        task = factory(**settings)
        if not isinstance(task, Task):
            raise XltError(f"{name!r} does not make an xlt.finetune.task.Task")
        return task
    from xlt.finetune.registry import get_task

    return get_task(name, **settings)


def autocast_dtype(precision: str, device: torch.device) -> Optional[torch.dtype]:
    """bf16 autocast or None (fp32) for ``--precision``; emulated bf16 (GPUs before Ampere) is slower than fp32."""
    if precision == "bf16":
        return torch.bfloat16
    if precision == "auto" and device.type == "cuda" and torch.cuda.is_bf16_supported(including_emulation=False):
        return torch.bfloat16
    return None


@dataclass
class Split:
    """One data file of the command, read and checksummed once; what is built from it (sizes, the
    evaluation batches) is built on first use and shared by every run."""

    lang: str
    split: str
    path: str
    sha256: str
    examples: list
    sizes: Optional[ExampleSizes] = field(default=None, repr=False)
    batches: Optional[list[Batch]] = field(default=None, repr=False)


@dataclass
class Outcome:
    """What a command did: its exit status, the results file's content, and the run counts."""

    exit_code: int
    results: dict[str, Any]   # results.json's content (its runs: RunRecord.to_dict())
    markdown: str
    counts: dict[str, int] = field(default_factory=dict)


class Experiment:
    """One ``xlt finetune`` command: its inputs, checked once, and the runs of its grid."""

    def __init__(self, cfg: FinetuneConfig):
        cfg.validate()
        self.cfg = cfg
        self.task = resolve_task(cfg.task, cfg.task_settings)
        self.source = cfg.source_language()
        # What results.json and the log name the model by: hf:NAME as it is, a path made absolute.
        self.model_source = os.path.abspath(cfg.model)
        if is_static(cfg.model):
            self.pretrained, self.model_identity = self._load_static(cfg)
        elif is_hf_model(cfg.model):
            self.pretrained, self.model_identity = self._load_hf(cfg)
            self.model_source = self.pretrained.source
        else:
            self.pretrained, self.model_identity = self._load_run(cfg)
        languages = self.pretrained.languages
        for lang in [self.source, *cfg.targets, *cfg.eval]:
            if languages and lang not in languages:
                raise XltError(f"language {lang!r} is not one of the model's ({', '.join(languages)})", cfg.model)
        self.targets = list(dict.fromkeys([*cfg.targets, *cfg.eval])) or [l for l in languages if l != self.source]
        self.targets = [t for t in self.targets if t != self.source]
        self.splits = self._read_splits()
        self.labels = self.task.labels(self.splits[self.source, "train"].examples)
        for split in self.splits.values():  # a bad evaluation file fails now, not after every run has trained
            self.task.check(split.examples, self.labels)
        self.max_len = cfg.resolved("max_len")
        if self.max_len > self.pretrained.config.max_positions:
            raise XltError(f"--max-len {self.max_len} is more than the model's {self.pretrained.config.max_positions} "
                           "positions", cfg.model)
        if cfg.freeze_bottom > self.pretrained.config.n_layers:  # else every run would fail alone
            raise XltError(f"--freeze-bottom {cfg.freeze_bottom}: the model has only "
                           f"{self.pretrained.config.n_layers} layers", cfg.model)
        self.device = resolve_device(cfg.device)
        self.maps, self.shifts = self._read_transforms()
        self.runs_dir = os.path.join(cfg.output, "runs")

    @staticmethod
    def _load_run(cfg: FinetuneConfig) -> tuple[PretrainedRun, dict[str, Any]]:
        # The control starts from the best checkpoint's architecture, re-initialised (seed 0, so every
        # seed and task of the control fine-tunes the same untrained encoder).
        weights = "best" if cfg.checkpoint == "untrained" else cfg.checkpoint
        run = PretrainedRun.load(cfg.model, weights)
        if cfg.checkpoint == "untrained":
            run.model = run.random_encoder_like(seed=0)
        identity = {"checkpoint": cfg.checkpoint, "vocab_sha256": run.vocab.sha256,
                    "checkpoint_sha256": file_sha256(os.path.join(cfg.model, "checkpoints", f"{weights}.pt"))}
        return run, identity

    def _load_static(self, cfg: FinetuneConfig) -> tuple[StaticRun, dict[str, Any]]:
        if cfg.checkpoint != "best" or cfg.map_dir or cfg.shift or cfg.freeze_bottom:
            raise XltError("--model static:FILE takes no --checkpoint, --map-dir, --shift or --freeze-bottom "
                           "(the vectors are frozen, there are no layers)", cfg.model)
        run = StaticRun.load(cfg.model, cfg.codes, cfg.lstm_dim)
        # The XNLI baseline's head unless asked otherwise; set on the task before any run is named,
        # so results.json and the run hashes record it.
        if cfg.task == "xnli" and "pooling" not in cfg.task_settings:
            cfg.task_settings = {**cfg.task_settings, "pooling": "pair-max"}
            self.task = resolve_task(cfg.task, cfg.task_settings)
        return run, run.identity()

    def _load_hf(self, cfg: FinetuneConfig) -> tuple[HFRun, dict[str, Any]]:
        # Options a transformers encoder cannot honour are refused here, before any run.
        if cfg.task == "xnli" and cfg.task_settings.get("pooling") == "pair-max":
            raise XltError("xnli pooling pair-max reads xlt's </s>-delimited segments; with a transformers "
                           "model use pooling first or mean", cfg.model)
        run = HFRun.load(cfg.model, cfg.checkpoint)
        if cfg.lang_embedding_at_test == "source" and not run.languages:
            raise XltError("--lang-embedding-at-test source: this model has no language embeddings (it would "
                           "change nothing)", run.source)
        # An architecture whose layers xlt cannot name fails now, not in every run after its training.
        if cfg.task == "xnli":
            run.text_model.pair_special_count()
        if cfg.freeze_bottom:
            run.model.encoder.bottom_prefixes(cfg.freeze_bottom)
        if cfg.map_dir or cfg.shift:
            layer_output_modules(run.model.encoder.model, run.source)
        return run, run.identity()

    # ---- inputs ---------------------------------------------------------------------------------
    def _path(self, lang: str, split: str) -> Optional[str]:
        cfg = self.cfg
        explicit = {"train": cfg.train, "dev": cfg.dev}.get(split)
        if lang == self.source and explicit is not None:
            return explicit[1]
        if lang in cfg.eval and split in ("dev", "test"):
            return cfg.eval[lang][0 if split == "dev" else 1]
        if lang == self.source and split == "test" and cfg.task not in DATA_LAYOUT:
            return None  # a plugin task without a layout: the source test set is optional
        return layout_file(cfg.task, cfg.data_dir, lang, split)

    def _read_splits(self) -> dict[tuple[str, str], Split]:
        """Every split of the command by (language, split); the source's test set may be absent."""
        wanted = [(self.source, "train"), (self.source, "dev"), (self.source, "test")]
        wanted += [(t, split) for t in self.targets for split in ("dev", "test")]
        splits = {}
        for lang, split in wanted:
            path = self._path(lang, split)
            if path is None:
                continue
            require_file(path, f"{split} file")
            examples = self.task.read(path)
            if not examples:
                raise XltError("empty split", path)
            splits[lang, split] = Split(lang, split, path, file_sha256(path), examples)
        return splits

    def _read_transforms(self) -> tuple[dict[str, LayerMap], dict[str, TargetShift]]:
        """Test-time maps and shifts, one per target at most, checked against the model and targets."""
        config, cfg = self.pretrained.config, self.cfg
        maps: dict[str, LayerMap] = {}
        shifts: dict[str, TargetShift] = {}
        loaded = [(d, load_map(d, cfg.map_layer, self.source, config.d_model, config.n_layers), maps)
                  for d in cfg.map_dir]
        loaded += [(f, load_shift(f, cfg.shift_layer, self.source, config.d_model, config.n_layers,
                                  self.pretrained.step), shifts) for f in cfg.shift]
        for path, transform, table in loaded:
            if transform.target not in self.targets:
                raise XltError(f"it is for {transform.target!r}, not one of the targets ({', '.join(self.targets)})",
                               path)
            if transform.target in table:
                raise XltError(f"a second file for target {transform.target!r}", path)
            table[transform.target] = transform
        return maps, shifts

    def sizes(self, lang: str, split: str) -> ExampleSizes:
        s = self.splits[lang, split]
        if s.sizes is None:
            s.sizes = example_sizes(self.task, s.examples, self.pretrained.text(lang), self.labels, self.max_len)
        return s.sizes

    def eval_batches(self, lang: str, split: str) -> list[Batch]:
        """A split's batches (input_ids [B,T]), longest examples first, built once per command and shared
        by every run."""
        s = self.splits[lang, split]
        if s.batches is None:
            order = evaluation_order(self.sizes(lang, split).lengths)
            s.batches = [ob.batch for ob in ordered_batches(self.task, s.examples, order, self.pretrained.text(lang),
                                                            self.labels, self.cfg.eval_batch_size, self.max_len)]
        return s.batches

    def encoder_parameters(self) -> dict[str, int]:
        """How many encoder parameters every run of this command trains and how many it freezes (the
        language-specific copies, as the paper's protocol does, and ``--freeze-bottom``'s layers).
        The report compares a row's English score with the untrained control's only when the row
        froze no more than the control did: fewer trained parameters cap the English score."""
        encoder = self.pretrained.model.encoder
        frozen = frozen_parameter_names(encoder, self.cfg.freeze_bottom)
        counts = {"trained": 0, "frozen": 0}
        for name, param in encoder.named_parameters():
            counts["frozen" if name in frozen else "trained"] += param.numel()
        return counts

    def data_files(self) -> dict[str, dict[str, str]]:
        """Every split's file and checksum, as config.json's inputs and results.json's data name them."""
        return {f"{s.split}_{s.lang}": {"path": s.path, "sha256": s.sha256} for s in self.splits.values()}

    def autocast_dtype(self) -> Optional[torch.dtype]:
        return autocast_dtype(self.cfg.precision, self.device)

    def source_data(self) -> SourceData:
        autocast = self.autocast_dtype()
        return SourceData(self.task, self.pretrained, self.labels, self.source, self.pretrained.text(self.source),
                          self.splits[self.source, "train"].examples, self.sizes(self.source, "train"),
                          self.splits[self.source, "dev"].examples, lambda: self.eval_batches(self.source, "dev"),
                          self.device, autocast)

    # ---- runs -----------------------------------------------------------------------------------
    def identity(self, settings: RunSettings) -> RunIdentity:
        """Everything that decides the trained model; the run directory is named by its hash."""
        # A bf16 run is another run than an fp32 one.
        precision = "bf16" if self.autocast_dtype() is not None else None
        return RunIdentity(self.cfg.task, self.cfg.task_settings, self.model_identity, self.source,
                           self.splits[self.source, "train"].sha256, self.splits[self.source, "dev"].sha256,
                           self.labels, settings, precision)

    def run_dir(self, settings: RunSettings) -> str:
        s = settings
        name = f"bs{s.batch_size}-lr{s.encoder_lr:g}-head{s.head_lr:g}-seed{s.seed}-{self.identity(s).short_hash()}"
        return os.path.join(self.runs_dir, name)

    def run_one(self, settings: RunSettings, on_epoch_end: Optional[Callable]) -> RunRecord:
        """Bring one run up to date; return its record (status done, busy or failed)."""
        run_dir = self.run_dir(settings)
        files = RunFiles(run_dir)

        def record(status: str, **outcome: Any) -> RunRecord:
            return RunRecord(os.path.basename(run_dir), os.path.relpath(run_dir, self.cfg.output), settings, status,
                             **outcome)

        # Read from the files alone: a finished grid loads no model and encodes no data.
        summary = files.training_summary()
        cached = evaluations(self, files) if summary else None
        if cached is not None:
            return record("done", worked=False, training=summary, evaluations=cached)
        make_directory(run_dir)
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(exclusive_lock(files.path("lock"), "fine-tuning run"))
            except XltError:
                return record("busy")
            try:
                data = self.source_data()
                if not os.path.exists(files.path("config.json")):
                    write_run_description(run_dir, self.identity(settings).to_dict(), self.data_files())
                trainer = RunTrainer(data, settings, run_dir)
                summary = trainer.train(on_epoch_end)
                evaluated = evaluations(self, files, trainer)
                if not self.cfg.keep_weights and os.path.exists(files.path(summary.best_file)):
                    os.unlink(files.path(summary.best_file))
                if os.path.exists(files.path("error.txt")):  # an earlier attempt's failure
                    os.unlink(files.path("error.txt"))
                return record("done", worked=True, training=summary, evaluations=evaluated)
            except Exception as e:  # one failed run must not stop the grid: record it, go on, exit non-zero
                with atomic_output(files.path("error.txt")) as f:
                    f.write(traceback.format_exc())
                return record("failed", error=f"{type(e).__name__}: {e}")


def describe(record: RunRecord, metric: str, source: str, targets: list[str]) -> str:
    """The one stderr line a run gets."""
    s = record.settings
    head = f"bs {s.batch_size} lr {s.encoder_lr:g}/{s.head_lr:g} seed {s.seed}"
    if record.status == "busy":
        return f"{head}: in progress in another process, skipped ({record.dir})"
    if record.status == "failed":
        return f"{head}: FAILED: {record.error} ({record.dir})"
    assert record.training is not None
    row = record.to_dict()
    tests = " ".join(f"{t} {v:.2f}" for t in targets
                     if (v := selection.run_value(row, "plain", t, "test", metric)) is not None)
    return (f"{head}: {'done' if record.worked else 'done earlier'}, best epoch {record.training.best_epoch}, "
            f"{source} dev {metric} {record.training.source_dev_main:.2f}; test {tests} ({record.dir})")


def finetune(cfg: FinetuneConfig, on_epoch_end: Optional[Callable[[dict[str, Any]], None]] = None) -> Outcome:
    """Run (or resume, or skip) every grid point and seed; write results.json and summary.md."""
    exp = Experiment(cfg)
    make_directory(exp.runs_dir)
    grid = list(cfg.grid())
    metric = exp.task.main_metric
    log.info(f"{cfg.task}: {len(grid)} run(s), model {exp.model_source}, source {exp.source}, "
             f"targets {', '.join(exp.targets)}, device {exp.device}")
    records = []
    for i, settings in enumerate(grid, 1):
        record = exp.run_one(settings, on_epoch_end)
        records.append(record.to_dict())
        log.info(f"[{i}/{len(grid)}] " + describe(record, metric, exp.source, exp.targets))
    counts = {status: sum(r["status"] == status for r in records) for status in ("done", "busy", "failed")}
    summary = selection.summarize(records, metric, exp.source, exp.targets)
    results = {"format": RESULTS_FORMAT, "task": cfg.task, "model": exp.model_source,
               "model_identity": exp.model_identity, "source": exp.source, "targets": exp.targets,
               "complete": counts["done"] == len(grid), "counts": counts,
               "encoder_parameters": exp.encoder_parameters(), "data": exp.data_files(),
               "test_time": {"lang_embedding_at_test": cfg.lang_embedding_at_test,
                             "maps": {t: {"layer": m.layer, "identity": m.identity} for t, m in exp.maps.items()},
                             "shifts": {t: {"layer": m.layer, "identity": m.identity, "alphas": cfg.shift_alpha}
                                        for t, m in exp.shifts.items()}},
               "config": cfg.to_dict(), "summary": summary, "runs": records,
               # this command's machine (CPU kind, torch's kernel path): runs read from cache may have
               # trained elsewhere; their run directories' config.json name their own
               "environment": environment()}
    text = selection.markdown(summary, f"xlt finetune {cfg.task}: {exp.source} -> {', '.join(exp.targets)}")
    with output_files_lock(cfg.output):
        if isinstance(exp.pretrained, StaticRun):
            # counted while this command encoded the splits; a command that only read cached runs
            # encoded none, and reports what the command that did wrote down
            coverage, kept = exp.pretrained.coverage(), os.path.join(cfg.output, "static_coverage.json")
            if coverage:
                write_json(kept, coverage)
            elif os.path.exists(kept):
                coverage = read_json(kept)
            if coverage:
                results["static_coverage"] = coverage
                text += coverage_markdown(coverage)
                for lang, c in coverage.items():
                    log.info(f"{lang}: {c['unknown']} of {c['tokens']} tokens have no vector (zero vectors)")
        write_json(os.path.join(cfg.output, "results.json"), results)
        with atomic_output(os.path.join(cfg.output, "summary.md")) as f:
            f.write(text)
    code = EXIT_FAILED if counts["failed"] else EXIT_BUSY if counts["busy"] else EXIT_OK
    if counts["busy"]:
        log.info(f"{counts['busy']} run(s) in progress in another process: the summary is partial; run again later")
    log.info(f"{cfg.output}: {counts['done']}/{len(grid)} run(s) done, {counts['failed']} failed, "
             f"{counts['busy']} busy elsewhere")
    return Outcome(code, results, text, counts)
