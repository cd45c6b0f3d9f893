"""Hand-made result files in xlt's own formats (the writers' code where there is one), for the report tests."""

from __future__ import annotations

import json
from pathlib import Path

from xlt.finetune.baselines import BaselineScores
from xlt.finetune.selection import summarize

LANGS = ["fr", "ru", "zh"]
ROWS = ["default", "wiki-cc", "default-anchors", "no-anchors", "extra-anchors",
        "sep-emb", "sep-emb+l1-3", "sep-emb+l1-6", "sep-l1-3", "sep-l1-6"]
METRIC = {"xnli": "accuracy", "ner": "f1", "parse": "las"}


def run_record(point: dict, seed: int, source_dev: float, scores: dict, variant: str = "plain",
               shift: dict | None = None) -> dict:
    """One run as the runner records it: results[variant][lang][split][metric]."""
    return {"grid_point": point, "seed": seed, "status": "done", "source_dev": source_dev,
            "results": {variant: {lang: {s: dict(v) for s, v in splits.items()} for lang, splits in scores.items()}},
            "shift_alpha": shift or {}}


def write_results(path: Path, task: str, target: str, runs: list[dict]) -> None:
    """A results.json in the runner's format (its summary computed by the runner's own code)."""
    metric = METRIC[task]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "format": "xlt-finetune-results/1", "task": task, "source": "en", "targets": [target],
        "complete": True, "counts": {"done": len(runs), "busy": 0, "failed": 0},
        "config": {"freeze_bottom": 4, "shift_layer": 4},
        "summary": summarize(runs, metric, "en", [target]), "runs": runs}))


def one_point(task: str, target: str, test: float, en: float = 80.0, spread: float | None = None) -> list[dict]:
    """One setting's runs: seed 12 alone, or with ``spread`` seeds 12, 156, 78 scoring ``x - spread``,
    ``x``, ``x + spread`` (mean x, sample std ``spread``) on every set."""
    m = METRIC[task]
    seeds = [(12, 0.0)] if spread is None else [(12, -spread), (156, 0.0), (78, spread)]
    return [run_record({"batch_size": 32, "encoder_lr": 1e-4, "head_lr": 1e-4}, seed, en + d,
                       {"en": {"dev": {m: en + d}, "test": {m: en + d}},
                        target: {"dev": {m: test + d}, "test": {m: test + d}}}) for seed, d in seeds]


def fill_table1(root: Path, score, spread: float | None = None) -> None:
    """Every row/task/language with score(row, task, lang) (over three seeds ``spread`` apart where
    given); Wiki-CC ru recorded as missing."""
    for row in ROWS:
        for lang in LANGS:
            if row == "wiki-cc" and lang == "ru":
                (root / row / "en-ru").mkdir(parents=True)
                (root / row / "en-ru" / "missing.json").write_text('{"reason": "no ru web corpus"}')
                continue
            for task in METRIC:
                write_results(root / row / f"en-{lang}" / task / "results.json", task, lang,
                              one_point(task, lang, score(row, task, lang), spread=spread))


def cell(table, row_label: str, group: str, column: str):
    index = table.columns.index((group, column))
    return dict(table.rows)[row_label][index]


def finding(t, start: str):
    """The report finding whose claim starts with ``start``."""
    return next(f for f in t.findings if f.claim.startswith(start))


def write_baselines(path: Path, task: str, best: dict[str, tuple[str, float]]) -> None:
    """An xlt baselines output (its own writer's format) whose best baseline per language is ``best``."""
    metric = METRIC[task]
    scores = {lang: {name: {metric: score}} for lang, (name, score) in best.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(BaselineScores(task, metric, {}, {"lang": "en", "path": "train"}, {}, {}, scores).to_json()))


def write_cka(path: Path, label: str, column: str, values: list[float]) -> None:
    path.write_text(json.dumps({"format": "xlt-cka/1", "label": label, "column": column, "estimator": "linear",
                                "n": 100, "layers": list(range(len(values))), "cka": values,
                                "average": sum(values) / len(values)}))


def write_translation(path: Path, src: str, tgt: str, cr: dict) -> None:
    grid = [{"layer": layer, "alpha": a, "bleu1": 10.0 * layer + a, "convert_rate": cr[a] if layer == 6 else 0.0}
            for layer in range(1, 9) for a in (1.0, 2.0, 3.0)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"format": "xlt-shift-decode/1", "src": src, "tgt": tgt, "n": 5, "grid": grid,
                                "best": {"bleu1": 83.0, "layer": 8, "alpha": 3.0}}))
