"""``xlt finetune``: zero-shot transfer over a grid of runs that survive kills, cron and a second process.

:func:`finetune` plans (:func:`xlt.finetune.plan.make_plan`: the configuration resolved once, every
file checked), then :func:`execute` reads and checks every input (so a bad file fails before any
training), then for each grid point and seed:

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
import os
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch

from xlt.finetune import selection
from xlt.finetune.config import FinetuneConfig, RunSettings
from xlt.finetune.evaluations import evaluations
from xlt.finetune.ordering import ExampleSizes, evaluation_order, example_sizes, ordered_batches
from xlt.finetune.plan import FinetunePlan, make_plan, run_name_prefix
from xlt.finetune.records import RunEvaluations, RunIdentity, RunRecord
from xlt.finetune.registry import resolve_task
from xlt.finetune.runfiles import RunFiles, TrainingSummary, output_files_lock
from xlt.finetune.task import Batch
from xlt.finetune.trainer import RunTrainer, SourceData, frozen_parameter_names
from xlt.loader.kinds import kind_named
from xlt.loader.static_vectors import coverage_markdown
from xlt.model.interventions import LayerMap, TargetShift, load_map, load_shift
from xlt.utils import log
from xlt.utils.device import resolve_device
from xlt.utils.errors import XltError
from xlt.utils.outputs import atomic_output, json_text, make_directory, write_json, written_together
from xlt.utils.rundir import environment, exclusive_lock, held_elsewhere, write_run_description
from xlt.utils.textio import file_sha256, read_json

RESULTS_FORMAT = "xlt-finetune-results/1"
EXIT_OK, EXIT_FAILED, EXIT_BUSY = 0, 1, 75  # 75 = EX_TEMPFAIL: runs held by another process, try later


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
    """One ``xlt finetune`` command's inputs, loaded and checked once, and the runs of its plan."""

    def __init__(self, plan: FinetunePlan):
        self.plan = plan
        self.task = resolve_task(plan.task, plan.task_settings)
        self.source, self.targets = plan.source, list(plan.targets)
        loaded = kind_named(plan.model.kind).for_finetuning(plan.model, plan.model_use)
        self.pretrained, self.model_identity, self.model_source = loaded.model, loaded.identity, loaded.source
        if set(self.pretrained.languages) != set(plan.model_languages):  # the plan read them from metadata
            raise XltError(f"the model's weights are for {', '.join(self.pretrained.languages) or 'any language'}, "
                           f"its metadata names {', '.join(plan.model_languages) or 'none'}", plan.model.spec)
        self.splits = self._read_splits()
        self.labels = self.task.labels(self.splits[self.source, "train"].examples)
        for split in self.splits.values():  # a bad evaluation file fails now, not after every run has trained
            self.task.check(split.examples, self.labels)
        self.max_len = plan.max_len
        config, spec = self.pretrained.config, plan.model.spec
        if self.max_len > config.max_positions:
            raise XltError(f"--max-len {self.max_len} is more than the model's {config.max_positions} positions", spec)
        if plan.model_use.freeze_bottom > config.n_layers:  # else every run would fail alone
            raise XltError(f"--freeze-bottom {plan.model_use.freeze_bottom}: the model has only {config.n_layers} "
                           "layers", spec)
        self.device = resolve_device(plan.device)
        self.maps, self.shifts = self._read_transforms()
        self.runs_dir = plan.output.runs

    # ---- inputs ---------------------------------------------------------------------------------
    def _read_splits(self) -> dict[tuple[str, str], Split]:
        """Every split of the plan by (language, split), read and checksummed."""
        splits = {}
        for f in self.plan.splits:
            examples = self.task.read(f.path)
            if not examples:
                raise XltError("empty split", f.path)
            splits[f.lang, f.split] = Split(f.lang, f.split, f.path, file_sha256(f.path), examples)
        return splits

    def _read_transforms(self) -> tuple[dict[str, LayerMap], dict[str, TargetShift]]:
        """Test-time maps and shifts, one per target at most, checked against the model and targets."""
        config, t = self.pretrained.config, self.plan.transforms
        maps: dict[str, LayerMap] = {}
        shifts: dict[str, TargetShift] = {}
        loaded = [(d, load_map(d, t.map_layer, self.source, config.d_model, config.n_layers), maps)
                  for d in t.map_dirs]
        loaded += [(f, load_shift(f, t.shift_layer, self.source, config.d_model, config.n_layers,
                                  self.pretrained.step), shifts) for f in t.shifts]
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
                                                            self.labels, self.plan.eval_batch_size, self.max_len)]
        return s.batches

    def encoder_parameters(self) -> dict[str, int]:
        """How many encoder parameters every run of this command trains and how many it freezes (the
        language-specific copies, as the paper's protocol does, and ``--freeze-bottom``'s layers).
        The report compares a row's English score with the untrained control's only when the row
        froze no more than the control did: fewer trained parameters cap the English score."""
        encoder = self.pretrained.model.encoder
        frozen = frozen_parameter_names(encoder, self.plan.model_use.freeze_bottom)
        counts = {"trained": 0, "frozen": 0}
        for name, param in encoder.named_parameters():
            counts["frozen" if name in frozen else "trained"] += param.numel()
        return counts

    def data_files(self) -> dict[str, dict[str, str]]:
        """Every split's file and checksum, as config.json's inputs and results.json's data name them."""
        return {f"{s.split}_{s.lang}": {"path": s.path, "sha256": s.sha256} for s in self.splits.values()}

    def autocast_dtype(self) -> Optional[torch.dtype]:
        return autocast_dtype(self.plan.precision, self.device)

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
        return RunIdentity(self.plan.task, self.plan.task_settings, self.model_identity, self.source,
                           self.splits[self.source, "train"].sha256, self.splits[self.source, "dev"].sha256,
                           self.labels, settings, precision)

    def run_dir(self, settings: RunSettings) -> str:
        return os.path.join(self.runs_dir, run_name_prefix(settings) + self.identity(settings).short_hash())

    def cached(self, files: RunFiles) -> Optional[tuple[TrainingSummary, RunEvaluations]]:
        """A finished run's training summary and evaluations, read from its files alone (a finished grid
        loads no weights and encodes no data); None for a run still to train or evaluate."""
        summary = files.training_summary()
        evaluated = evaluations(self, files) if summary else None
        return None if evaluated is None else (summary, evaluated)

    def encode_splits(self) -> None:
        """Every split encoded once, before any run trains: text the model would read as nothing (a
        task's XltError naming file and line) is the command's error, not each run's failure."""
        for lang, split in self.splits:
            self.sizes(lang, split)

    def run_one(self, settings: RunSettings, on_epoch_end: Optional[Callable],
                cached: Optional[tuple[TrainingSummary, RunEvaluations]]) -> RunRecord:
        """Bring one run up to date (``cached``: what :meth:`cached` read of it); return its record
        (status done, busy or failed)."""
        run_dir = self.run_dir(settings)
        files = RunFiles(run_dir)

        def record(status: str, **outcome: Any) -> RunRecord:
            return RunRecord(os.path.basename(run_dir), os.path.relpath(run_dir, self.plan.output.root), settings,
                             status, **outcome)

        if cached is not None:
            return record("done", worked=False, training=cached[0], evaluations=cached[1])
        make_directory(run_dir)
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(exclusive_lock(files.path("lock"), "fine-tuning run"))
            except XltError:
                return record("busy")
            try:
                data = self.source_data()
                if not os.path.exists(files.path("config.json")):
                    write_run_description(run_dir, self.identity(settings).to_dict(), self.data_files(),
                                          device=self.device)
                trainer = RunTrainer(data, settings, run_dir)
                summary = trainer.train(on_epoch_end)
                evaluated = evaluations(self, files, trainer)
                if not self.plan.output.keep_weights and os.path.exists(files.path(summary.best_file)):
                    os.unlink(files.path(summary.best_file))
                if os.path.exists(files.path("error.txt")):  # an earlier attempt's failure
                    os.unlink(files.path("error.txt"))
                return record("done", worked=True, training=summary, evaluations=evaluated)
            except Exception as e:  # one failed run must not stop the grid: record it, go on, exit non-zero
                with atomic_output(files.path("error.txt")) as f:
                    f.write(traceback.format_exc())
                return record("failed", error=f"{type(e).__name__}: {e}")


    def settled(self, settings: RunSettings, files: RunFiles, record: dict) -> dict:
        """``record`` (busy or failed, as this process left the run) as the run stands now: done if
        another process has finished it, failed if the process that held it failed and let go."""
        if (now := self.cached(files)) is not None:
            return self.run_one(settings, None, now).to_dict()
        error = files.path("error.txt")
        if record["status"] == "busy" and not held_elsewhere(files.path("lock")) and os.path.exists(error):
            with open(error, encoding="utf-8", errors="replace") as f:
                last = [line.strip() for line in f if line.strip()][-1:] or ["error.txt is empty"]
            return {**record, "status": "failed", "error": f"in another process: {last[0]}"}
        return record


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
    """Plan ``cfg``, then run (or resume, or skip) every grid point and seed; write results.json and summary.md."""
    return execute(make_plan(cfg), on_epoch_end)


def execute(plan: FinetunePlan, on_epoch_end: Optional[Callable[[dict[str, Any]], None]] = None) -> Outcome:
    """Run (or resume, or skip) every grid point and seed of ``plan``; write results.json and summary.md."""
    exp = Experiment(plan)
    grid = list(plan.grid)
    files = [RunFiles(exp.run_dir(settings)) for settings in grid]
    cached = [exp.cached(f) for f in files]
    # Runs another process is training (cron's overlapping calls) are skipped as busy: no need to encode.
    if any(c is None and not held_elsewhere(f.path("lock")) for f, c in zip(files, cached)):
        exp.encode_splits()
    make_directory(exp.runs_dir)
    metric = exp.task.main_metric
    log.info(f"{plan.task}: {len(grid)} run(s), model {exp.model_source}, source {exp.source}, "
             f"targets {', '.join(exp.targets)}, device {exp.device}")
    records = []
    for i, (settings, done) in enumerate(zip(grid, cached), 1):
        record = exp.run_one(settings, on_epoch_end, done)
        records.append(record.to_dict())
        log.info(f"[{i}/{len(grid)}] " + describe(record, metric, exp.source, exp.targets))
    output = plan.output
    with output_files_lock(output.root):
        # Another process may have finished a run since this one passed it (busy here) or failed it
        # (a retry elsewhere), or failed one it held: read every unfinished run again under the lock, so
        # that whoever writes last writes each run as it stands, not its own old view.
        for i, (settings, f) in enumerate(zip(grid, files)):
            if records[i]["status"] != "done":
                records[i] = exp.settled(settings, f, records[i])
        results, text, counts = write_results(exp, plan, records)
    code = EXIT_FAILED if counts["failed"] else EXIT_BUSY if counts["busy"] else EXIT_OK
    if counts["busy"]:
        log.info(f"{counts['busy']} run(s) in progress in another process: the summary is partial; run again later")
    log.info(f"{output.root}: {counts['done']}/{len(grid)} run(s) done, {counts['failed']} failed, "
             f"{counts['busy']} busy elsewhere")
    return Outcome(code, results, text, counts)


def write_results(exp: Experiment, plan: FinetunePlan, records: list[dict]) -> tuple[dict, str, dict]:
    """results.json and summary.md of the grid from its runs' ``records`` (under the output's lock);
    returns (results, the summary's text, counts by status)."""
    metric, output = exp.task.main_metric, plan.output
    counts = {status: sum(r["status"] == status for r in records) for status in ("done", "busy", "failed")}
    summary = selection.summarize(records, metric, exp.source, exp.targets)
    test_time = plan.transforms
    results = {"format": RESULTS_FORMAT, "task": plan.task, "model": exp.model_source,
               "model_identity": exp.model_identity, "source": exp.source, "targets": exp.targets,
               "complete": counts["done"] == len(records), "counts": counts,
               "encoder_parameters": exp.encoder_parameters(), "data": exp.data_files(),
               "test_time": {"lang_embedding_at_test": test_time.lang_embedding_at_test,
                             "maps": {t: {"layer": m.layer, "identity": m.identity} for t, m in exp.maps.items()},
                             "shifts": {t: {"layer": m.layer, "identity": m.identity,
                                            "alphas": list(test_time.shift_alpha)} for t, m in exp.shifts.items()}},
               "config": plan.config, "summary": summary, "runs": records,
               # this command's machine (CPU kind, torch's kernel path): runs read from cache may have
               # trained elsewhere; their run directories' config.json name their own
               "environment": environment(exp.device)}
    text = selection.markdown(summary, f"xlt finetune {plan.task}: {exp.source} -> {', '.join(exp.targets)}", counts)
    coverage = getattr(exp.pretrained, "coverage", None)
    if coverage is not None:
        # a model kind that counts tokens without a vector (static:FILE) counted them while this
        # command encoded the splits; a command that only read cached runs encoded none, and
        # reports what the command that did wrote down
        counted, kept = coverage(), output.file("static_coverage.json")
        if counted:
            write_json(kept, counted)
        elif os.path.exists(kept):
            counted = read_json(kept)
        if counted:
            results["static_coverage"] = counted
            text += coverage_markdown(counted)
            for lang, c in counted.items():
                log.info(f"{lang}: {c['unknown']} of {c['tokens']} tokens have no vector (zero vectors)")
    with written_together({output.file("results.json"): json_text(results), output.file("summary.md"): text}):
        pass   # results.json, which make targets and which says the grid is complete, lands last
    return results, text, counts
