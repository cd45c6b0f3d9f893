"""The evaluations of one finished run, cached one file each, and their prediction files.

An evaluation is a (language, split, test-time variant and its parameters, language-embedding id,
data checksum); its metrics are cached in ``eval/LANG-SPLIT-VARIANT-<key hash>.json`` and, unless
``--no-predictions``, what the model predicted is written to ``predictions/``
(:func:`~xlt.finetune.predictions.prediction_file`) first, so a metrics file only ever names a
complete prediction file. The metrics file records that file's sha256: a prediction file that is
missing, or that a later evaluation of the same name overwrote (another data file, the other
language-embedding id), makes the evaluation missing again. Runs evaluated before prediction files
existed get theirs written on the next command -- except runs whose weights were not kept: their
metrics are reported without predictions.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Mapping, Optional, Protocol

from xlt.finetune.predictions import prediction_file
from xlt.finetune.records import RunEvaluations, short_hash
from xlt.finetune.runfiles import METRICS, RunFiles
from xlt.finetune.trainer import RunTrainer
from xlt.model.encoder import LayerHook
from xlt.utils import log
from xlt.utils.outputs import atomic_output, write_json
from xlt.utils.shapes import MapOf, require_fields
from xlt.utils.textio import file_sha256, read_json

if TYPE_CHECKING:
    from xlt.finetune.plan import FinetunePlan
    from xlt.finetune.task import Batch, Task
    from xlt.model.interventions import LayerMap, TargetShift

Evaluated = tuple[dict[str, float], Optional[str]]   # metrics, run-relative prediction file (None: none)


class Inputs(Protocol):
    """What :func:`evaluations` reads of a command. The runner's ``Experiment`` is one; stated here so
    that this module needs nothing from the runner that calls it (no import loop)."""

    plan: "FinetunePlan"
    task: "Task"
    source: str
    targets: list[str]
    labels: list[str]
    splits: Mapping[tuple[str, str], Any]   # (lang, split) -> the runner's Split: .path, .sha256, .examples
    maps: dict[str, "LayerMap"]
    shifts: dict[str, "TargetShift"]

    def eval_batches(self, lang: str, split: str) -> list["Batch"]: ...



def _intact(run_dir: str, written: Optional[dict[str, str]], name: str) -> bool:
    """Whether the prediction file a metrics file names is ``name`` and still holds what was written."""
    if not written or written.get("file") != name:
        return False
    path = os.path.join(run_dir, name)
    return os.path.exists(path) and file_sha256(path) == written.get("sha256")


def evaluations(exp: Inputs, run: RunFiles, trainer: Optional[RunTrainer] = None) -> Optional[RunEvaluations]:
    """Every evaluation this command asks of the finished run in ``run``, the missing ones computed
    with ``trainer`` (its best model).

    Without a trainer nothing is computed: None as soon as one evaluation is missing.
    """
    task, test_time = exp.task, exp.plan.transforms
    suffix = task.prediction_suffix if exp.plan.output.predictions else None
    results: dict[str, dict] = {}
    files: dict[str, dict] = {}
    unwritable: list[str] = []

    def get(lang: str, split: str, variant: str, params: dict, hook: Optional[LayerHook]) -> Optional[Evaluated]:
        s = exp.splits[lang, split]
        emb = lang if test_time.lang_embedding_at_test == "target" else exp.source
        key = {"lang": lang, "split": split, "data_sha256": s.sha256, "variant": variant, "params": params,
               "lang_embedding": emb}
        path = run.path(os.path.join("eval", f"{lang}-{split}-{variant}-{short_hash(key)}.json"))
        name = None if suffix is None else prediction_file(lang, split, variant, params, suffix)
        if os.path.exists(path):
            cached = require_fields(read_json(path), {"metrics": METRICS}, path, "a cached evaluation",
                                    optional={"predictions": (MapOf(str), None)})
            # the main metric chooses epochs and shift weights: a number (NaN allowed), never absent
            require_fields(cached["metrics"], {task.main_metric: float}, path, "a cached evaluation's metrics")
            if name is None or _intact(run.dir, cached.get("predictions"), name):
                return cached["metrics"], name
            if not run.has_best_weights():   # nothing left to predict with: the metrics stand alone
                unwritable.append(name)
                return cached["metrics"], None
        if trainer is None:
            return None
        predictions = trainer.predict_batches(trainer.best_model(), exp.eval_batches(lang, split), lang, emb, hook)
        metrics = task.evaluate(s.examples, predictions, exp.labels)
        record = {**key, "path": s.path, "metrics": metrics}
        if name is not None:
            target = run.path(name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with atomic_output(target) as f:
                task.write_predictions(s.examples, predictions, exp.labels, f)
            record["predictions"] = {"file": name, "sha256": file_sha256(target)}
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_json(path, record)
        return metrics, name

    def put(variant: str, lang: str, split: str, evaluated: Optional[Evaluated]) -> bool:
        if evaluated is None:
            return False
        metrics, name = evaluated
        results.setdefault(variant, {}).setdefault(lang, {})[split] = metrics
        if name is not None:
            files.setdefault(variant, {}).setdefault(lang, {})[split] = name
        return True

    for lang in [exp.source, *exp.targets]:
        for split in ("dev", "test"):
            if (lang, split) in exp.splits and not put("plain", lang, split, get(lang, split, "plain", {}, None)):
                return None
    for lang, layer_map in exp.maps.items():
        params = {"layer": layer_map.layer, "map": layer_map.identity}
        for split in ("dev", "test"):
            if not put("map", lang, split, get(lang, split, "map", params, layer_map.hook())):
                return None
    alphas: dict[str, float] = {}
    metric = task.main_metric
    for lang, shift in exp.shifts.items():
        per_alpha: dict[float, Evaluated] = {}
        for alpha in test_time.shift_alpha:
            params = {"layer": shift.layer, "alpha": alpha, "shift": shift.identity}
            evaluated = get(lang, "dev", "shift", params, shift.hook(alpha))
            if evaluated is None:
                return None
            per_alpha[alpha] = evaluated
        # Liu et al. pick each target's weight on that target's dev set; ties: the earlier weight.
        alpha = max(test_time.shift_alpha, key=lambda a: (per_alpha[a][0][metric], -test_time.shift_alpha.index(a)))
        alphas[lang] = alpha
        put("shift", lang, "dev", per_alpha[alpha])
        params = {"layer": shift.layer, "alpha": alpha, "shift": shift.identity}
        if not put("shift", lang, "test", get(lang, "test", "shift", params, shift.hook(alpha))):
            return None
    if unwritable:
        log.info(f"{run.dir}: {len(unwritable)} prediction file(s) cannot be written, the run's weights "
                 "were not kept (--no-keep-weights); its metrics are reported without them")
    return RunEvaluations(results, alphas, files if suffix is not None else None)
