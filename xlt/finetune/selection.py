"""Model selection and aggregation over a grid of runs: pure arithmetic on run records.

A run record (one grid point, one seed; see :mod:`xlt.finetune.runner`) carries ``grid_point``,
``seed``, ``status``, ``source_dev`` (the main metric on the SOURCE dev set at the run's best epoch)
and ``results[variant][lang][split][metric]`` (variant ``plain``, ``map`` or ``shift``).

* A grid point's score is the mean of ``source_dev`` over its seeds; the **selected** point is the
  best score (ties: the earlier point in grid order). Target-language numbers never take part.
* **Mean of the best two** (Wu et al. 2020 §3.2: "the average of the best two sets of
  hyper-parameters"): the two best points by score; for each seed both points ran, the average
  of their two values; then mean and std of those per-seed averages.
* Every figure is ``{"mean", "std", "n"}`` over seeds, ``std`` the sample standard deviation
  (n - 1; None for a single seed). ``avg_targets`` averages a run's targets first, then over seeds.
"""

from __future__ import annotations

import json
import math
from typing import Any, Optional, Sequence

SPLITS = ("dev", "test")


def stats(values: Sequence[float]) -> dict[str, Any]:
    n = len(values)
    if n == 0:
        return {"mean": None, "std": None, "n": 0}
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else None
    return {"mean": mean, "std": std, "n": n}


def run_value(run: dict, variant: str, lang: str, split: str, metric: str) -> Optional[float]:
    """One run's metric, or None where it was not evaluated."""
    return run.get("results", {}).get(variant, {}).get(lang, {}).get(split, {}).get(metric)


def run_target_average(run: dict, variant: str, targets: Sequence[str], split: str, metric: str) -> Optional[float]:
    values = [run_value(run, variant, t, split, metric) for t in targets]
    if not targets or any(v is None for v in values):
        return None
    return sum(values) / len(values)  # type: ignore[arg-type]


def _key(grid_point: dict) -> str:
    return json.dumps(grid_point, sort_keys=True)


def _variants(runs: Sequence[dict]) -> list[str]:
    seen = {v for r in runs for v in r.get("results", {})}
    return [v for v in ("plain", "map", "shift") if v in seen] + sorted(seen - {"plain", "map", "shift"})


def _per_seed(runs: Sequence[dict], variant: str, languages: Sequence[str], targets: Sequence[str],
              metric: str) -> dict[int, dict[str, dict[str, Optional[float]]]]:
    """seed -> column ("fr", ..., "avg_targets") -> split -> value."""
    out: dict[int, dict[str, dict[str, Optional[float]]]] = {}
    for run in runs:
        columns = {lang: {s: run_value(run, variant, lang, s, metric) for s in SPLITS} for lang in languages}
        columns["avg_targets"] = {s: run_target_average(run, variant, targets, s, metric) for s in SPLITS}
        out[run["seed"]] = columns
    return out


def _table(per_seed_rows: list[dict], columns: Sequence[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """Stats over seeds of per-seed rows (column -> split -> value); None values are left out."""
    return {col: {s: stats([row[col][s] for row in per_seed_rows if row[col][s] is not None]) for s in SPLITS}
            for col in columns}


def summarize(runs: Sequence[dict], metric: str, source: str, targets: Sequence[str]) -> dict[str, Any]:
    """Grid table, selected point and mean of the best two, per variant; see the module docstring."""
    done = [r for r in runs if r.get("status") == "done"]
    languages = [source, *[t for t in targets if t != source]]
    columns = [*languages, "avg_targets"]
    groups: dict[str, list[dict]] = {}
    for run in done:
        groups.setdefault(_key(run["grid_point"]), []).append(run)
    variants = _variants(done)
    grid = []
    for key, members in groups.items():
        members = sorted(members, key=lambda r: r["seed"])
        entry = {"grid_point": json.loads(key), "seeds": [r["seed"] for r in members],
                 "source_dev": stats([r["source_dev"] for r in members]), "variants": {}}
        for variant in variants:
            rows = list(_per_seed(members, variant, languages, targets, metric).values())
            entry["variants"][variant] = _table(rows, columns)
        grid.append(entry)
    # Stable sort: on equal scores the earlier grid point wins.
    ranked = sorted(range(len(grid)), key=lambda i: -grid[i]["source_dev"]["mean"])
    summary: dict[str, Any] = {"metric": metric, "source": source, "targets": list(targets),
                               "selection": f"mean {metric} on the {source} dev set over seeds, best epoch of "
                                            "each run", "grid": grid, "selected": None, "best_two": None}
    if not ranked:
        return summary
    best = grid[ranked[0]]
    summary["selected"] = {"grid_point": best["grid_point"], "source_dev": best["source_dev"],
                           "variants": best["variants"]}
    top = [grid[i] for i in ranked[:2]]
    summary["best_two"] = {"grid_points": [g["grid_point"] for g in top],
                           "variants": {v: _mean_of_points(top, groups, v, languages, targets, metric)
                                        for v in variants}}
    return summary


def _mean_of_points(points: list[dict], groups: dict[str, list[dict]], variant: str, languages: Sequence[str],
                    targets: Sequence[str], metric: str) -> dict[str, dict[str, dict[str, Any]]]:
    """Per seed shared by all ``points``: the average of their values; then stats over those seeds."""
    tables = [_per_seed(groups[_key(p["grid_point"])], variant, languages, targets, metric) for p in points]
    seeds = sorted(set.intersection(*(set(t) for t in tables)))
    columns = [*languages, "avg_targets"]
    rows = []
    for seed in seeds:
        row = {}
        for col in columns:
            row[col] = {}
            for s in SPLITS:
                values = [t[seed][col][s] for t in tables]
                row[col][s] = None if any(v is None for v in values) else sum(values) / len(values)
        rows.append(row)
    return _table(rows, columns)


def _cell(figure: dict[str, Any]) -> str:
    if figure["mean"] is None:
        return "–"
    return f"{figure['mean']:.2f}" + (f" ± {figure['std']:.2f}" if figure["std"] is not None else "")


def _settings(point: dict) -> str:
    return f"bs {point['batch_size']}, lr {point['encoder_lr']:g} / head {point['head_lr']:g}"


def markdown(summary: dict[str, Any], title: str, counts: Optional[dict[str, int]] = None) -> str:
    """The summary as Markdown tables: test (and dev) per language, selected and best two, per variant.
    ``counts`` (runs done / busy / failed): a grid with runs not done says so first, since its means
    are over fewer seeds than asked and its selection may compare grid points over unequal seeds."""
    source, targets, metric = summary["source"], summary["targets"], summary["metric"]
    languages = [source, *[t for t in targets if t != source]]
    lines = [f"# {title}", ""]
    if counts and (counts.get("busy") or counts.get("failed")):
        total = sum(counts.values())
        lines += [f"**Incomplete:** {counts.get('done', 0)} of {total} runs done ({counts.get('busy', 0)} busy in "
                  f"another process, {counts.get('failed', 0)} failed); the figures are over the done runs.", ""]
    lines += [f"Main metric: {metric}, mean ± sample std over seeds. Selection: {summary['selection']}.", ""]
    if summary["selected"] is None:
        return "\n".join(lines + ["No run has finished yet.", ""])
    for variant, table in summary["selected"]["variants"].items():
        header = [f"{lang} {s}" for lang in languages for s in ("dev", "test")] + ["avg targets test"]
        lines += [f"## {variant}", "", "| setting | " + " | ".join(header) + " |",
                  "|---|" + "---|" * len(header)]
        rows = [(f"selected: {_settings(summary['selected']['grid_point'])}", table),
                ("mean of best two", summary["best_two"]["variants"][variant])]
        for name, t in rows:
            cells = [_cell(t[lang][s]) for lang in languages for s in ("dev", "test")]
            lines.append(f"| {name} | " + " | ".join(cells + [_cell(t["avg_targets"]["test"])]) + " |")
        lines.append("")
    lines += ["## grid (source dev)", "", f"| batch size | encoder lr | head lr | seeds | {source} dev |",
              "|---|---|---|---|---|"]
    for g in summary["grid"]:
        p = g["grid_point"]
        lines.append(f"| {p['batch_size']} | {p['encoder_lr']:g} | {p['head_lr']:g} | {len(g['seeds'])} | "
                     f"{_cell(g['source_dev'])} |")
    return "\n".join(lines) + "\n"
