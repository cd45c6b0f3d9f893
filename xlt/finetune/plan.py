"""Fine-tuning as plan, then run: a :class:`~xlt.finetune.config.FinetuneConfig` resolved once into a
complete, frozen :class:`FinetunePlan` -- the model and its kind, the task and its settings, the source
and target languages, every data file, the grid of :class:`~xlt.finetune.config.RunSettings`, the
test-time transforms and the output layout -- which :mod:`xlt.finetune.runner` executes and
``xlt finetune --dry-run`` prints.

Planning reads no weights and no data: the model's languages come from its metadata
(:meth:`xlt.loader.kinds.ModelKind.languages`), the files are only checked to exist. So a plan that
cannot run (a missing file, an option the model kind refuses) fails here, before anything loads.
Defaults come from the task (:attr:`~xlt.finetune.task.Task.recipe`, :attr:`~xlt.finetune.task.Task.layout`)
and, where they differ with the model's kind, from :meth:`~xlt.finetune.task.Task.settings_for_model`.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
from dataclasses import dataclass
from typing import Any, Optional

from xlt.finetune.config import FinetuneConfig, RunSettings, default_path, naming_option
from xlt.finetune.registry import resolve_task
from xlt.finetune.task import Task, TaskRecipe
from xlt.loader.kinds import FinetuneUse, ModelChoice, kind_of
from xlt.utils.errors import XltError, require_file
from xlt.utils.textio import read_json


@dataclass(frozen=True)
class SplitFile:
    """One data file of the command: language, split (train, dev, test) and where it is."""

    lang: str
    split: str
    path: str


@dataclass(frozen=True)
class Transforms:
    """Test-time settings: they change what a finished run is evaluated on, not what it trains."""

    lang_embedding_at_test: str          # target or source
    map_dirs: tuple[str, ...]            # xlt align dictionary outputs, one per target
    map_layer: Optional[int]
    shifts: tuple[str, ...]              # xlt shift-decode shift files, one per target
    shift_layer: Optional[int]
    shift_alpha: tuple[float, ...]       # each target picks its weight on its own dev set

    def any(self) -> bool:
        return bool(self.map_dirs or self.shifts)


@dataclass(frozen=True)
class OutputLayout:
    """What the command writes under ``root``: results.json, summary.md and one directory per run."""

    root: str
    keep_weights: bool                   # keep each run's best fine-tuned weights
    predictions: bool                    # write each evaluation's predictions

    @property
    def runs(self) -> str:
        return os.path.join(self.root, "runs")

    def file(self, name: str) -> str:
        return os.path.join(self.root, name)


def check_grid_output(root: str, task: str) -> None:
    """XltError when ``root`` holds something other than a grid output of ``task``: a run's folder (its
    config.json; a later reader would take the folder for one run) or another task's results, which
    this command's results.json and summary.md would replace without a word."""
    if os.path.exists(os.path.join(root, "config.json")):
        raise XltError("holds a run's config.json (a pretraining run, a model or one fine-tuning run), not a "
                       "fine-tuning grid's output: use a new directory", root)
    results = os.path.join(root, "results.json")
    if os.path.exists(results):
        try:
            found = read_json(results, "fine-tuning results")
        except XltError:   # damaged: this command writes it again
            return
        found = found.get("task") if isinstance(found, dict) else None
        if found is not None and found != task:
            raise XltError(f"holds the results of a {found} grid, and this command fine-tunes {task}: "
                           "use a directory of its own", results)


@dataclass(frozen=True)
class FinetunePlan:
    """Everything one ``xlt finetune`` command does, resolved (no field is left to a default)."""

    task: str                            # a built-in name or module:Class
    task_settings: dict[str, Any]        # as given, with the model kind's defaults (run hashes hold them)
    model: ModelChoice
    model_use: FinetuneUse               # what the runs ask of the model (its kind's checks read it)
    model_languages: tuple[str, ...]     # empty: the model takes any language
    source: str
    targets: tuple[str, ...]
    splits: tuple[SplitFile, ...]        # source train, dev (and test); each target's dev and test
    grid: tuple[RunSettings, ...]        # batch size x encoder lr x head lr, then seed
    max_len: int
    eval_batch_size: int
    device: str
    precision: str
    transforms: Transforms
    output: OutputLayout
    config: dict[str, Any]               # results.json's "config": the options, task settings as run

    def describe(self) -> str:
        """The plan as ``xlt finetune --dry-run`` prints it."""
        m = self.model
        lines = [f"task      {self.task}" + (f" {json.dumps(self.task_settings, sort_keys=True)}"
                                             if self.task_settings else ""),
                 f"model     {m.spec} ({m.kind}), checkpoint {m.checkpoint}"
                 + (f", codes {m.codes}, lstm-dim {m.lstm_dim}" if m.kind == "static" else ""),
                 f"languages {self.source} -> {', '.join(self.targets)}",
                 "data"]
        lines += [f"  {s.split:5} {s.lang:4} {s.path}" for s in self.splits]
        first = self.grid[0]   # what every run shares; the grid point and seed name each run below
        dropout = "the model's" if first.dropout is None else f"{first.dropout:g}"
        lines.append(f"grid      {len(self.grid)} run(s): epochs {first.epochs}, epoch size "
                     f"{first.epoch_size or 'one pass'}, schedule {first.schedule}, max len {self.max_len}, "
                     f"dropout {dropout}, freeze bottom {first.freeze_bottom}, clip norm {first.clip_norm:g}, "
                     f"bucket {'on' if first.bucket else 'off'}")
        lines += [f"  {os.path.join(self.output.runs, run_name_prefix(s))}<hash>" for s in self.grid]
        t = self.transforms
        tests = [f"lang embedding at test: {t.lang_embedding_at_test}"]
        tests += [f"map {d} (layer {'from its file' if t.map_layer is None else t.map_layer})" for d in t.map_dirs]
        tests += [f"shift {f} (layer {t.shift_layer}, alpha {', '.join(f'{a:g}' for a in t.shift_alpha)})"
                  for f in t.shifts]
        lines.append("test time " + "; ".join(tests))
        lines.append(f"device    {self.device}, precision {self.precision}, eval batch size {self.eval_batch_size}")
        lines.append(f"output    {self.output.file('results.json')}, {self.output.file('summary.md')}"
                     f"{'' if self.output.keep_weights else ', best weights not kept'}"
                     f"{'' if self.output.predictions else ', no prediction files'}")
        lines.append("          (<hash>: of the run's settings, the model's and the data's checksums, "
                     "read when the plan runs)")
        return "\n".join(lines) + "\n"


def run_name_prefix(settings: RunSettings) -> str:
    """A run directory's name before its identity hash: the grid point and seed, readable."""
    s = settings
    return f"bs{s.batch_size}-lr{s.encoder_lr:g}-head{s.head_lr:g}-seed{s.seed}-"


def resolve_grid(cfg: FinetuneConfig, recipe: TaskRecipe) -> tuple[RunSettings, ...]:
    """Every (grid point, seed) in a fixed order: batch size, encoder lr, head lr, then seed; an option
    left unset takes the task's recipe."""
    def given(name: str) -> Any:
        value = getattr(cfg, name)
        return getattr(recipe, name) if value is None else value

    head_lrs = given("head_lr") or [None]
    return tuple(
        RunSettings(batch_size=int(bs), encoder_lr=float(elr), head_lr=float(elr if hlr is None else hlr),
                    seed=int(seed), epochs=int(given("epochs")), epoch_size=given("epoch_size"),
                    schedule=given("schedule"), warmup_fraction=float(cfg.warmup_fraction),
                    max_len=int(given("max_len")), dropout=cfg.dropout, freeze_bottom=int(cfg.freeze_bottom),
                    clip_norm=float(cfg.clip_norm), bucket=bool(cfg.bucket))
        for bs, elr, hlr, seed in itertools.product(given("batch_size"), given("encoder_lr"), head_lrs, cfg.seeds))


def layout_file(task: str, data_dir: Optional[str], lang: str, split: str) -> str:
    """:func:`~xlt.finetune.config.default_path`, once it exists. A split nobody named is looked for in
    the layout even when the other splits were given as files, so a missing one must say where it was
    looked for and how to name it (a bare "no such file" reads as if the user had named that path)."""
    path = default_path(task, data_dir, lang, split)
    if not os.path.exists(path):
        raise XltError(f"no such {split} file: {lang}'s {split} split was not named, so it is read from the default "
                       f"data layout (--data-dir); name it with {naming_option(split, lang)}", path)
    return path


def _split_files(cfg: FinetuneConfig, task: Task, source: str, targets: tuple[str, ...]) -> tuple[SplitFile, ...]:
    """Every split of the command; the source's test set is optional for a task without a layout."""
    wanted = [(source, "train"), (source, "dev"), (source, "test")]
    wanted += [(t, split) for t in targets for split in ("dev", "test")]
    if cfg.dev is not None and source in cfg.eval and cfg.eval[source][0] != cfg.dev[1]:
        # one of the two would be dropped without a word, and the model is selected on the source's dev set
        raise XltError(f"two dev files for {source}: --dev {cfg.dev[1]} and --eval {source} {cfg.eval[source][0]} ...; "
                       "name it once")
    files = []
    for lang, split in wanted:
        explicit = {"train": cfg.train, "dev": cfg.dev}.get(split)
        if lang == source and explicit is not None:
            path = explicit[1]
        elif lang in cfg.eval and split in ("dev", "test"):
            path = cfg.eval[lang][0 if split == "dev" else 1]
        elif lang == source and split == "test" and type(task).layout is None:
            continue   # a plugin task without a layout: the source test set is optional
        else:
            path = layout_file(cfg.task, cfg.data_dir, lang, split)
        require_file(path, f"{split} file")
        files.append(SplitFile(lang, split, path))
    return tuple(files)


def without_spelled_defaults(name: str, settings: dict[str, Any], kind_defaults: dict[str, Any]) -> dict[str, Any]:
    """``settings`` less those given at the value the task takes anyway: runs are named by a hash of the
    settings as given, so spelling out a default (``strip_subtypes true``) named other run folders and
    trained the whole grid again. A setting the model's kind fills in stays (its runs' hashes hold it);
    a task without a ``settings`` dataclass (a plugin) keeps what it was given."""
    if all(key in kind_defaults for key in settings):
        return settings
    given = getattr(resolve_task(name, settings), "settings", None)
    default = getattr(resolve_task(name, kind_defaults), "settings", None)
    if not (dataclasses.is_dataclass(given) and dataclasses.is_dataclass(default)):
        return settings
    fields = {f.name for f in dataclasses.fields(given)}
    return {key: value for key, value in settings.items()
            if key in kind_defaults or key not in fields or getattr(given, key) != getattr(default, key)}


def make_plan(cfg: FinetuneConfig) -> FinetunePlan:
    """Resolve ``cfg`` once; XltError for anything no run of it could do. Reads no weights, no data."""
    cfg.validate()
    task = resolve_task(cfg.task, cfg.task_settings)
    source = cfg.source_language()
    kind = kind_of(cfg.model)
    settings = type(task).settings_for_model(kind.name, cfg.task_settings, cfg.model)
    settings = without_spelled_defaults(cfg.task, settings, type(task).settings_for_model(kind.name, {}, cfg.model))
    if settings != cfg.task_settings:
        task = resolve_task(cfg.task, settings)
    choice = ModelChoice(cfg.model, kind.name, cfg.checkpoint, cfg.codes, cfg.lstm_dim)
    transforms = Transforms(cfg.lang_embedding_at_test, tuple(cfg.map_dir), cfg.map_layer, tuple(cfg.shift),
                            cfg.shift_layer, tuple(cfg.shift_alpha))
    use = FinetuneUse(task.pair_inputs, transforms.any(), cfg.freeze_bottom, cfg.lang_embedding_at_test)
    kind.check(choice, use)
    languages = tuple(kind.languages(choice))
    for lang in [source, *cfg.targets, *cfg.eval]:
        if languages and lang not in languages:
            raise XltError(f"language {lang!r} is not one of the model's ({', '.join(languages)})", cfg.model)
    named = list(dict.fromkeys([*cfg.targets, *cfg.eval])) or [lang for lang in languages if lang != source]
    targets = tuple(t for t in named if t != source)
    recipe = type(task).recipe
    grid = resolve_grid(cfg, recipe)
    check_grid_output(cfg.output, cfg.task)
    return FinetunePlan(
        task=cfg.task, task_settings=settings, model=choice, model_use=use, model_languages=languages, source=source,
        targets=targets, splits=_split_files(cfg, task, source, targets), grid=grid,
        max_len=int(recipe.max_len if cfg.max_len is None else cfg.max_len), eval_batch_size=cfg.eval_batch_size,
        device=cfg.device, precision=cfg.precision, transforms=transforms,
        output=OutputLayout(cfg.output, cfg.keep_weights, cfg.predictions),
        config={**cfg.to_dict(), "task_settings": settings})
