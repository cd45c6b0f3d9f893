"""Liu et al. (2020) Table 2 (unsupervised token translation by the mean difference shift) and
Table 4 (XNLI with the shift), from xlt's outputs, beside the paper's m-BERT numbers.

* Table 2 reads every ``xlt shift-decode translate`` output (``format: xlt-shift-decode/1``) in the
  results directory and one level below, keyed by its ``src``/``tgt``. The paper's fixed rows use
  layers 11 (BLEU-1) and 10 (convert rate) of 12; by default xlt uses the same depth in its own
  model: one and two layers below the top of the sweep.
* Table 4 reads ``RESULTS_DIR/en-<lang>/xnli-mds/results.json`` (bottom layers frozen, evaluated
  plain and with ``--shift``) and, for "fine-tune all layers", the Table 1 Default XNLI results -- or,
  for one model studied with every target as the paper's m-BERT (``make ... MODEL=``), one
  ``RESULTS_DIR/xnli-mds/results.json`` and one ``RESULTS_DIR/xnli-all/results.json`` for all targets.

Each title names the model the table is about, as its result files record it (``run`` of a translation,
``model`` of a fine-tuning: ``hf:NAME`` or an absolute directory); several models are listed under the table.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

from xlt.analysis.shift_table import RESULT_FORMAT as TRANSLATE_FORMAT, check_result
from xlt.report import paper as paper_numbers
from xlt.report.findings import Inconclusive, Verdict, check, decide
from xlt.report.noise import SE_MULTIPLE, Estimate, Noise, Spread, add, estimate, judge, mean_terms, settle
from xlt.report.render import Cell, ReportTable
from xlt.report.sources import Reading, finetune_score, load_json, results_of_format, shift_alphas
from xlt.report.table1 import CHANCE, MIN_MARGIN, mean
from xlt.report.table1_cells import spread

UNDEFINED_RATE = "undefined: every decoded token is in both languages' token sets (0/0)"
ALPHAS = (1.0, 2.0, 3.0)


def name_model(table: ReportTable, sources: Iterable[object]) -> None:
    """Put the model(s) the results came from in the title (its first line) and, when several, in a remark."""
    models = sorted({str(s) for s in sources if s})
    if len(models) == 1:
        table.title += f" (model: {models[0]})"
    elif models:
        table.title += f" ({len(models)} models, listed below)"
        table.remarks.insert(0, "Models: " + "; ".join(models) + ".")


def collect_translations(results_dir: str) -> dict[str, dict]:
    """direction ``src-tgt`` -> translate result."""
    found: dict[str, dict] = {}
    patterns = [os.path.join(results_dir, "*.json"), os.path.join(results_dir, "*", "*.json")]
    for _, data in results_of_format(patterns, TRANSLATE_FORMAT, check_result):
        found[f"{data['src']}-{data['tgt']}"] = data
    return found


def _settings(result: dict) -> set[tuple[int, float]]:
    return {(r["layer"], float(r["alpha"])) for r in result["grid"]}


def table2_values(result: dict, bleu_layer: int, cr_layer: int) -> dict[str, Optional[float]]:
    grid = {(r["layer"], float(r["alpha"])): r for r in result["grid"]}
    values = {"bleu1_fixed": (grid.get((bleu_layer, 3.0)) or {}).get("bleu1"),
              "best_bleu1": result["best"]["bleu1"], "best_layer": result["best"]["layer"],
              "best_alpha": result["best"]["alpha"]}
    for alpha in ALPHAS:
        rate = (grid.get((cr_layer, alpha)) or {}).get("convert_rate")
        # 0/0 (NaN): every decoded token belongs to both languages' token sets; no rate to report.
        values[f"cr{alpha:g}"] = None if rate is None or math.isnan(rate) else rate
    values["_layers"] = (bleu_layer, cr_layer)
    return values


def build_table2(results_dir: str, numbers: Optional[dict] = None, bleu_layer: Optional[int] = None,
                 cr_layer: Optional[int] = None, languages: Sequence[str] = ("fr", "ru", "zh")) -> ReportTable:
    data = numbers or paper_numbers.load()
    paper = data["liu2020_table2"]["directions"]
    found = collect_translations(results_dir)
    directions = [f"en-{l}" for l in languages] + [f"{l}-en" for l in languages]
    directions += [d for d in found if d not in directions]
    if found:   # one pair of layers for every direction: the deepest swept layer is the model's top
        top = max(r["layer"] for result in found.values() for r in result["grid"])
        bleu_layer = top - 1 if bleu_layer is None else bleu_layer
        cr_layer = top - 2 if cr_layer is None else cr_layer
    ours = {d: table2_values(found[d], bleu_layer, cr_layer) for d in directions if d in found}
    layers = next(iter(ours.values()))["_layers"] if ours else (bleu_layer or "top-1", cr_layer or "top-2")
    rows = [("bleu1_fixed", f"BLEU-1 (layer={layers[0]}, α=3) [paper: layer 11]", "bleu1_layer11_alpha3", 2),
            ("best_bleu1", "best BLEU-1", "best_bleu1", 2), ("best_layer", "best layer", "best_layer", 0),
            ("best_alpha", "best α", "best_alpha", 1)]
    rows += [(f"cr{a:g}", f"convert rate (layer={layers[1]}, α={a:g}) [paper: layer 10]", ("convert_rate_layer10", f"{a:g}"), 3)
             for a in ALPHAS]
    table = ReportTable(name="liu-table2", title="Liu et al. (2020) Table 2: unsupervised token translation by MDS",
                        stub="", groups=[("", [d.replace("-", "→") for d in directions])],
                        source=paper_numbers.describe(data["liu2020_table2"]["source"]))
    for key, label, paper_key, digits in rows:
        cells = []
        for d in directions:
            theirs = paper.get(d, {})
            paper_value = theirs.get(paper_key[0], {}).get(paper_key[1]) if isinstance(paper_key, tuple) else theirs.get(paper_key)
            gap = None if d in ours else f"no `xlt shift-decode translate` output for {d}"
            value = ours[d][key] if d in ours else None
            if d in ours and value is None:
                gap = (UNDEFINED_RATE if key.startswith("cr") and (layers[1], float(key[2:])) in _settings(found[d])
                       else f"the sweep has no result at this layer and alpha for {d}")
            cells.append(Cell(value=value, paper=paper_value, gap=gap, digits=digits))
        table.add_row(label, cells)
    table.remarks = ["The paper shifts m-BERT (12 layers); xlt's model has its own depth, so fixed rows use the "
                     "same relative depth (one and two layers below the top)."]
    name_model(table, (r.get("run") for r in found.values()))  # an xlt run, or hf:NAME
    cr = {d: [v[f"cr{a:g}"] for a in ALPHAS] for d, v in ours.items()}
    paper_cr = {d: [v["convert_rate_layer10"][f"{a:g}"] for a in ALPHAS] for d, v in paper.items()}
    table.findings = [check("The convert rate rises with α in every direction (the shift moves decoding towards "
                            "the target language).", rising, cr, paper_cr),
                      check("At α = 3 most output tokens are converted (convert rate > 0.5) in every direction.",
                            mostly_converted, cr, paper_cr)]
    return table


def _defined(cr: dict) -> tuple[dict, str]:
    """Directions whose convert rates are all defined, and a note on the others."""
    defined = {d: v for d, v in cr.items() if all(x is not None for x in v)}
    if not defined:
        raise Inconclusive("no direction has a defined convert rate at every alpha" if cr else "no translation results")
    undefined = sorted(set(cr) - set(defined))
    return defined, f" (left out, no rate: undefined, or not swept at this layer: {', '.join(undefined)})" if undefined else ""


def rising(cr: dict) -> Verdict:
    defined, note = _defined(cr)
    flat = [d for d, v in defined.items() if not all(a < b for a, b in zip(v, v[1:]))]
    return decide(not flat, f"{len(defined) - len(flat)} of {len(defined)} directions rise"
                  + (f" (not: {', '.join(flat)})" if flat else "") + note)


def mostly_converted(cr: dict) -> Verdict:
    defined, note = _defined(cr)
    at3 = {d: v[-1] for d, v in defined.items()}
    return decide(all(v > 0.5 for v in at3.values()), ", ".join(f"{d} {v:.2f}" for d, v in at3.items()) + note)


def table4_paths(results_dir: str, table1_dir: Optional[str], languages: Sequence[str]) -> tuple[dict, dict, bool]:
    """(frozen + shift results, all-layers results) per target, and whether one model serves every target.

    One model (``RESULTS_DIR/xnli-mds/results.json`` is there): that file and ``RESULTS_DIR/xnli-all/``
    for every target. Otherwise one model per pair: ``RESULTS_DIR/en-<L>/xnli-mds/`` and the Table 1
    Default cells under ``table1_dir`` (without one, that row is a gap)."""
    one = os.path.join(results_dir, "xnli-mds", "results.json")
    if os.path.exists(one):
        every = os.path.join(results_dir, "xnli-all", "results.json")
        return {lang: one for lang in languages}, {lang: every for lang in languages}, True
    mds = {lang: os.path.join(results_dir, f"en-{lang}", "xnli-mds", "results.json") for lang in languages}
    every = {lang: table1_dir and os.path.join(table1_dir, "default", f"en-{lang}", "xnli", "results.json")
             for lang in languages}
    return mds, every, False


NO_TABLE1 = "no --table1-dir given (its Default XNLI cells are this row)"


def _score(path: Optional[str], lang: str, variant: str) -> Reading:
    return finetune_score(path, lang, variant) if path else Reading(gap=NO_TABLE1)


def build_table4(results_dir: str, table1_dir: Optional[str], languages: Sequence[str],
                 numbers: Optional[dict] = None) -> ReportTable:
    data = numbers or paper_numbers.load()
    paper = data["liu2020_table4"]
    mds_path, all_path, one_model = table4_paths(results_dir, table1_dir, languages)
    loaded = [load_json(p)[0] for p in sorted({*mds_path.values(), *all_path.values()} - {None})]
    config = next((d.get("config", {}) for d in (load_json(p)[0] for p in mds_path.values()) if d), {})
    config = config if isinstance(config, dict) else {}   # a damaged file's cells are gaps below
    frozen = config.get("freeze_bottom")
    top_label = f"fine-tune above layer {frozen} (bottom frozen)" if frozen else "fine-tune the top layers"
    # key: (results file per pair, variant, the paper's row, label)
    rows = {"all": (all_path, "plain", "finetune_all_layers", "fine-tune all layers"),
            "top": (mds_path, "plain", "finetune_last_6_layers", top_label),
            "mds": (mds_path, "shift", "finetune_last_6_layers_mds",
                    f"{top_label} + MDS after layer {config.get('shift_layer', '?')}")}
    table = ReportTable(name="liu-table4", title="Liu et al. (2020) Table 4: XNLI with the mean difference shift",
                        stub="", groups=[("XNLI test accuracy", ["en", *languages, "avg w/o en"])],
                        source=paper_numbers.describe(paper["source"]))
    values: dict[str, dict[str, Optional[float]]] = {}
    spreads: dict[tuple[str, str, str], Spread] = {}
    for key, (paths, variant, paper_key, label) in rows.items():
        paper_row = paper["rows"][paper_key]
        readings = {lang: _score(paths[lang], lang, variant) for lang in languages}
        values[key] = {lang: r.value for lang, r in readings.items()}
        spreads.update({(key, "xnli", lang): s for lang, r in readings.items() if (s := spread(r)) is not None})
        cells = [_english(paths, variant, languages, paper_row.get("en"))]
        cells += [Cell(value=r.value, paper=paper_row.get(lang), gap=r.gap, note=r.note) for lang, r in readings.items()]
        present = [lang for lang in languages if values[key][lang] is not None]
        cells.append(Cell(value=mean([values[key][l] for l in present]) if present else None,
                          paper=mean([paper_row[l] for l in present])
                          if present and all(paper_row.get(l) is not None for l in present) else None,
                          gap=None if present else "no target has a score",
                          note=f"mean over {', '.join(present)}; the paper's over the same languages" if present else None))
        table.add_row(label, cells)
    alpha_cells = [Cell(gap="the source language is not shifted")]
    for lang in languages:
        r = shift_alphas(mds_path[lang], lang)
        alpha_cells.append(Cell(value=r.value, paper=paper["shifting_weight"].get(lang), gap=r.gap, note=r.note,
                                digits=2))
    table.add_row("shifting weight α (chosen on the target's dev set)", alpha_cells + [Cell(gap="not an average")])
    table.remarks = ["The paper fine-tunes one m-BERT (12 layers; the last 6, shift after layer 6); " + (
        "here one model too, fine-tuned once per row with every target." if one_model else
        "xlt has one bilingual model per pair, frozen and shifted at the same relative depth.")]
    name_model(table, (d.get("model") for d in loaded if isinstance(d, dict)))
    paper_values = {key: {l: paper["rows"][pk].get(l) for l in languages} for key, (_, _, pk, _) in rows.items()}
    # one model's targets are one fine-tuning's scores: correlated through its seeds
    noise = Noise(spreads, shared_runs=frozenset(rows) if one_model else frozenset())
    ours, theirs = Table4Numbers(values, noise), Table4Numbers(paper_values)
    table.findings = [check("MDS improves zero-shot XNLI over the same fine-tuning without it for most targets (the "
                            "paper: 9 of 11 languages, not es and fr).", lambda v: mostly_improves(v, languages),
                            ours, theirs),
                      check("Fine-tuning only the top layers is at least as good as fine-tuning all layers, on "
                            "average over the targets.", lambda v: gain(v, "top", "all", languages), ours, theirs)]
    table.remarks.append("A finding is decided only beyond 2 standard errors of the fine-tuning seeds' noise (as "
                         "Table 1's); the shifted and plain scores of one fine-tuning are counted as independent "
                         "draws, which overstates the noise of their difference: an undecided MDS gain may be real."
                         + (" One fine-tuning's scores on different targets are taken as fully correlated (a seed "
                            "that does well on one target does well on all), the bound that overstates, never "
                            "understates, the noise of a mean over targets." if one_model else ""))
    return table


def _english(paths: dict[str, str], variant: str, languages: Sequence[str], paper: Optional[float]) -> Cell:
    """English (the source) test accuracy: one per pair's model, so their mean, noted."""
    if variant == "shift":
        return Cell(gap="the source language is not shifted", paper=paper)
    scores = {lang: _score(paths[lang], "en", variant).value for lang in languages}
    present = [lang for lang, v in scores.items() if v is not None]
    if not present:
        return Cell(gap="no English score yet", paper=paper)
    if len({paths[lang] for lang in present}) == 1:   # one model for every target: its one English score
        return Cell(value=scores[present[0]], paper=paper)
    return Cell(value=mean([scores[l] for l in present]), paper=paper,
                note=f"mean of the English test scores of the en-{', en-'.join(present)} models")


@dataclass
class Table4Numbers:
    """Table 4's scores, ``values[row][lang]``, and the seeds' noise of xlt's cells (None: the paper's
    numbers, compared as they are)."""

    values: dict[str, dict[str, Optional[float]]]
    noise: Optional[Noise] = None

    def difference(self, better: str, worse: str, langs: Sequence[str]) -> Estimate:
        """``better - worse``, the mean over ``langs``, with its noise."""
        cells = {row: {"xnli": self.values[row]} for row in (better, worse)}
        return estimate(cells, self.noise, add(mean_terms(better, "xnli", langs), mean_terms(worse, "xnli", langs, -1)))


def _paired(numbers: Table4Numbers, better: str, worse: str, languages: Sequence[str]) -> list[str]:
    """Targets with both scores, once the baseline transfers above chance (else Inconclusive)."""
    values = numbers.values
    langs = [l for l in languages if values[better].get(l) is not None and values[worse].get(l) is not None]
    if not langs:
        raise Inconclusive(f"no target has both the {better} and {worse} scores")
    margin = mean([values[worse][l] for l in langs]) - CHANCE["xnli"]
    if margin < MIN_MARGIN:
        raise Inconclusive(f"the baseline is within {MIN_MARGIN:g} points of chance ({margin:+.1f}), so the "
                           "difference is noise")
    return langs


def gain(numbers: Table4Numbers, better: str, worse: str, languages: Sequence[str]) -> Verdict:
    langs = _paired(numbers, better, worse, languages)
    diff = numbers.difference(better, worse, langs)
    return settle([("the mean", judge(diff, strict=False))],
                  f"{better} - {worse} over {', '.join(langs)}: {diff.beside(digits=2)}")


def mostly_improves(numbers: Table4Numbers, languages: Sequence[str]) -> Verdict:
    langs = _paired(numbers, "mds", "top", languages)
    diffs = {l: numbers.difference("mds", "top", [l]) for l in langs}
    decided = {l: judge(d) for l, d in diffs.items()}
    better = [l for l, v in decided.items() if v]
    detail = (f"{len(better)} of {len(langs)} improve ("
              + ", ".join(d.after(f"{l} ", digits=2) for l, d in diffs.items()) + ")")
    if len(better) > len(langs) / 2:
        return decide(True, detail)
    if len(better) + sum(v is None for v in decided.values()) <= len(langs) / 2:
        return decide(False, detail)
    raise Inconclusive(f"{detail}; not decided: too many targets within {SE_MULTIPLE:g} SE or without a noise estimate")
