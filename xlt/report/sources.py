"""Reading the result files of a pipeline, each into a value or the reason there is none.

A report must show every cell it was asked for, so these readers never raise on a missing or
broken result: they return a :class:`Reading` whose ``gap`` says what is wrong (not run, unreadable,
another target language, no finished run). Malformed files are also logged on stderr.
"""

from __future__ import annotations

import glob
import json
import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

from xlt.utils import log
from xlt.utils.errors import XltError
from xlt.utils.shapes import ListOf, MapOf, matches

FINETUNE_FORMAT = "xlt-finetune-results/1"
BASELINES_FORMAT = "xlt-baselines/1"   # xlt.finetune.baselines writes it (not imported: that loads torch)


@dataclass
class Reading:
    value: Optional[float] = None
    gap: Optional[str] = None
    note: Optional[str] = None
    extra: Optional[dict[str, Any]] = None


def load_json(path: str, expected_format: Optional[str] = None) -> tuple[Optional[dict], Optional[str]]:
    """``(data, None)`` or ``(None, reason)``; a file that is there but broken is also logged."""
    if not os.path.exists(path):
        return None, f"not run yet (no {os.path.basename(path)})"
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError, UnicodeDecodeError) as e:
        log.info(f"xlt report: {path}: unreadable ({e})")
        return None, f"unreadable result file {path}"
    if not isinstance(data, dict):   # every result file xlt writes is one JSON object
        log.info(f"xlt report: {path}: not a JSON object")
        return None, f"damaged result file {path}"
    if expected_format and data.get("format") != expected_format:
        log.info(f"xlt report: {path}: not a {expected_format} file")
        return None, f"{path} is not a {expected_format} file"
    return data, None


def results_of_format(patterns: list[str], expected_format: str,
                      check: Optional[Callable[[dict, str], dict]] = None) -> Iterator[tuple[str, dict]]:
    """``(path, data)`` of every JSON file matching ``patterns`` whose ``format`` is ``expected_format``.

    Other formats (e.g. an assembled table beside its columns) are passed over silently; an
    unreadable file, or one that ``check`` refuses, is logged and skipped, so one broken file leaves
    a gap instead of a crash.
    """
    for path in sorted(p for pattern in patterns for p in glob.glob(pattern)):
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError, UnicodeDecodeError) as e:
            log.info(f"xlt report: {path}: unreadable ({e}); skipped")
            continue
        if not isinstance(data, dict) or data.get("format") != expected_format:
            continue
        if check is not None:
            try:
                check(data, path)
            except XltError as e:
                log.info(f"xlt report: {e}; skipped")
                continue
        yield path, data


def missing_reason(directory: str) -> Optional[str]:
    """The reason recorded in ``DIR/missing.json`` (written by the Makefile for a cell that cannot
    be computed, e.g. Wiki-CC without a web corpus), if any."""
    data, _ = load_json(os.path.join(directory, "missing.json"))
    if isinstance(data, dict) and data.get("reason"):
        return str(data["reason"])
    return None


Loaded = tuple[Optional[dict], Optional[str]]   # what load_json returns


def nested(data: dict, *keys: str) -> dict:
    """``data[k1][k2]...``, or {} where a level is missing or not an object (a damaged file's)."""
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data if isinstance(data, dict) else {}


def finite(x: Any) -> bool:
    """A real number (not a bool, NaN or infinity)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def finetune_score(path: str, lang: str, variant: str = "plain", split: str = "test",
                   loaded: Optional[Loaded] = None) -> Reading:
    """A ``xlt finetune`` results.json's score for ``lang``: the mean of the best two grid points
    over seeds (Wu et al. §3.2), else the selected point's; the gap reason when there is none.
    ``loaded``: the file as :func:`load_json` already read it (one read, one log line, per file)."""
    data, gap = loaded or load_json(path, FINETUNE_FORMAT)
    if data is None:
        return Reading(gap=gap)
    if not matches(data.get("targets", []), ListOf(str)) or not isinstance(data.get("summary") or {}, dict) \
            or not matches(data.get("counts") or {}, MapOf(int)):
        log.info(f"xlt report: {path}: its targets, summary or counts are not names, an object and numbers")
        return Reading(gap=f"damaged result file {path}")
    if lang != data.get("source") and lang not in data.get("targets", []):
        return Reading(gap=f"{path} has no {lang} results (targets: {', '.join(data.get('targets', []))})")
    value = None
    for part in ("best_two", "selected"):
        figure = nested(data, "summary", part, "variants", variant, lang, split)
        if figure.get("mean") is not None:
            value, std, n = figure["mean"], figure.get("std"), figure.get("n")
            break
    if value is None:
        return Reading(gap=f"no finished run with a {variant} {lang} {split} score in {path}")
    if not finite(value) or not (std is None or finite(std)):
        # json reads NaN and Infinity: a diverged run's score is no number to average or compare
        log.info(f"xlt report: {path}: the {variant} {lang} {split} score is {value!r} ± {std!r}")
        return Reading(gap=f"damaged result file {path}: the {lang} {split} score is not a number")
    counts = data.get("counts") or {}
    note = None
    if not data.get("complete", True):
        total = sum(counts.values()) if counts else "?"
        note = f"incomplete grid: {counts.get('done', '?')} of {total} runs done"
    parameters = data.get("encoder_parameters")
    return Reading(value=value, note=note, extra={"std": std, "n_seeds": n, "metric": nested(data, "summary").get("metric"),
                                                  "encoder_parameters": parameters if isinstance(parameters, dict) else {},
                                                  "model": data.get("model")})


def baseline_score(path: str, lang: str, loaded: Optional[Loaded] = None) -> Reading:
    """The best trivial baseline's score on ``lang``'s test file in an ``xlt baselines`` output, with a
    note naming that baseline (``loaded`` as for :func:`finetune_score`)."""
    data, gap = loaded or load_json(path, BASELINES_FORMAT)
    if data is None:
        return Reading(gap=gap)
    everyone = data.get("best") if isinstance(data.get("best"), dict) else {}
    if lang not in everyone:
        return Reading(gap=f"{path} has no {lang} scores (tested on: {', '.join(everyone) or 'nothing'})")
    best = everyone[lang] if isinstance(everyone[lang], dict) else {}
    score, name = best.get("score"), best.get("name")
    if not finite(score) or not isinstance(name, str):
        log.info(f"xlt report: {path}: the best {lang} baseline has no name and score")
        return Reading(gap=f"damaged result file {path}")
    return Reading(value=float(score), note=f"best trivial baseline: {name}",
                   extra={"baseline": name, "metric": best.get("metric")})


def shift_alphas(path: str, lang: str) -> Reading:
    """The shift weights the selected grid point's runs chose for ``lang`` on its dev set."""
    data, gap = load_json(path, FINETUNE_FORMAT)
    if data is None:
        return Reading(gap=gap)
    selected = nested(data, "summary", "selected").get("grid_point")
    runs = data.get("runs", [])
    if not matches(runs, ListOf(dict)) or not all(matches(run.get("shift_alpha") or {}, MapOf(float)) for run in runs):
        log.info(f"xlt report: {path}: its runs are not objects with a number per language as shift_alpha")
        return Reading(gap=f"damaged result file {path}")
    alphas = sorted({run["shift_alpha"][lang] for run in runs
                     if run.get("status") == "done" and run.get("grid_point") == selected
                     and lang in (run.get("shift_alpha") or {})})
    if not alphas:
        return Reading(gap=f"no shift weight for {lang} in {path}")
    note = None if len(alphas) == 1 else f"seeds chose different weights: {', '.join(f'{a:g}' for a in alphas)}"
    return Reading(value=alphas[0], note=note)


# A model has left the unigram plateau when its dev perplexity is below this share of the unigram
# floor its run recorded: a small MLM sits just above the floor for millions of tokens, and drops
# far below it once it reads context (docs/pretrain.md); 0.9 tells the two apart with room to spare.
LEARNED_SHARE = 0.9


def unigram_fit(run_dir: str, lang: str, step: Optional[int] = None) -> Optional[tuple[float, float, int]]:
    """(dev perplexity, unigram floor, step) of an xlt pretraining run in ``lang`` at ``step`` (the
    last evaluation when None); None when the run recorded no floor there (runs made before
    ``xlt pretrain`` wrote ``valid_<lang>_unigram_ppl``) or is not an xlt run."""
    try:
        with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as f:
            records = [json.loads(line) for line in f if '"valid_' in line]
    except (OSError, ValueError):
        return None
    record = next((r for r in reversed(records) if step is None or r.get("step") == step), None)
    if not isinstance(record, dict):
        return None
    ppl, floor = record.get(f"valid_{lang}_mlm_ppl"), record.get(f"valid_{lang}_unigram_ppl")
    if not isinstance(ppl, (int, float)) or not isinstance(floor, (int, float)):
        return None
    return float(ppl), float(floor), int(record.get("step", 0))


def has_lang_embeddings(run_dir: str) -> Optional[bool]:
    """Whether an xlt pretraining run's model adds XLM's language embeddings (its ``config.json``);
    None when the run directory does not say (not an xlt run, or gone)."""
    try:
        with open(os.path.join(run_dir, "config.json"), encoding="utf-8") as f:
            value = json.load(f)["config"]["model"]["lang_embeddings"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return value if isinstance(value, bool) else None


def left_plateau(fit: tuple[float, float, int]) -> bool:
    ppl, floor, _ = fit
    return ppl < LEARNED_SHARE * floor


def plateau_reason(run_dir: str, step: Optional[int], languages: list[str]) -> Optional[str]:
    """Why an xlt pretraining run read at ``step`` cannot speak for a finding: its dev perplexity in
    one of ``languages`` is not below :data:`LEARNED_SHARE` of the unigram floor recorded beside it.
    None when it learned, or when the run recorded no floor (:func:`unigram_fit`)."""
    for lang in languages:
        fit = unigram_fit(run_dir, lang, step)
        if fit is not None and not left_plateau(fit):
            ppl, floor, at = fit
            return (f"{run_dir} did not leave the unigram plateau: {lang} dev perplexity {ppl:,.0f} against "
                    f"the unigram floor's {floor:,.0f} at step {at:,}")
    return None
