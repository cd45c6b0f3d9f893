"""Liu et al. (2020) Figures 1-4 (BERT against Word2Vec and GloVe on the same data: word retrieval MRR
and XNLI zero-shot, two data sizes, shorter windows) and Table 1 (MRR by part of speech).

Reads what ``make reproduce-liu-figures`` writes (make/liu_figures.mk)::

    RESULTS_DIR/n<N>/mrr/<model>/en-<L>.json      xlt align word / contextual-word --map none
    RESULTS_DIR/n<N>/xnli/<model>/results.json    xlt finetune xnli

with ``<model>`` one of :data:`MODELS`. BERT's MRR is the last layer's by default (``layer="last"``;
the papers do not say which layer; "best" takes the best layer per file, an upper bound). The
paper's figures are bar charts lost in the text conversion: the table shows no paper numbers, and
the findings' paper side is the claim as the text states it. Table 1's numbers are printed.

Models are compared on one pair set: each result's ``test`` entry records the pairs it scored
(``usable``, ``checksum``; :mod:`xlt.analysis.pair_sets`). The report states the count per size and
language, and an MRR claim whose models were scored on different (or unrecorded) pair sets is
inconclusive: BERT's contextual words cover far fewer dictionary words than a static file.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Optional, Sequence

from xlt.report import paper as paper_numbers
from xlt.report.bars import BarPanel, grouped_bars
from xlt.report.findings import HOLDS, Finding, Inconclusive, Verdict, check
from xlt.report.render import Cell, ReportTable
from xlt.report.sources import Reading, finetune_score, load_json, plateau_reason
from xlt.utils.shapes import matches

MODELS = {"bert": "BERT", "bert-w20": "BERT (20-token windows)", "w2v-w5": "Word2Vec (window 5)",
          "w2v-w128": "Word2Vec (window 128)", "w2v-w256": "Word2Vec (window 256)", "glove": "GloVe"}
STATIC = ("w2v-w5", "glove")          # the paper's Figure 1/2 static models (Word2Vec at its usual window)
MRR_MARGIN = 0.01                      # closer than this, two MRRs are a tie (the findings say so)
XNLI_MARGIN = 1.0                      # accuracy points: one seed on ~1,000 test pairs moves about a point
POS_ROWS = {"closed": "Closed", "open": "Open", "NOUN": "Noun", "VERB": "Verb", "ADV": "Adv.", "ADJ": "Adj."}


def mrr_reading(path: str, layer: str = "last", group: Optional[tuple[str, str]] = None) -> Reading:
    """The MRR of one ``xlt align`` result; ``group`` (breakdown, name): of one group of its queries,
    e.g. ("by_pos", "NOUN") or ("by_spelling", "different")."""
    data, gap = load_json(path)
    if data is None:
        return Reading(gap=gap)
    results = data.get("results") or []
    results = [r for r in results if isinstance(r, dict) and matches(r.get("mrr"), float)] if isinstance(results, list) else []
    if not results:
        return Reading(gap=f"{path} holds no MRR")
    if layer == "best":
        chosen = max(results, key=lambda r: r["mrr"])
    elif layer == "last":   # the deepest layer, whatever order --layers gave them in
        chosen = max(results, key=lambda r: r["layer"] if isinstance(r.get("layer"), int) else -1)
    else:
        chosen = next((r for r in results if str(r.get("layer")) == layer), None)
        if chosen is None:
            return Reading(gap=f"{path} has no layer {layer}")
    test = data.get("test") if isinstance(data.get("test"), dict) else {}
    if group is None:  # only here: the plateau check reads the model's metrics file
        pairs = {"pairs": test.get("usable"), "checksum": test.get("checksum"), "plateau": _plateau(data)}
        return Reading(value=float(chosen["mrr"]), extra={"layer": chosen.get("layer"), **pairs})
    breakdown, name = group
    groups = chosen.get(breakdown) if isinstance(chosen.get(breakdown), dict) else {}
    scores = groups.get(name)
    if scores is None:
        how = {"by_pos": " (run with --pos-from)", "by_spelling": " (scored before xlt split MRR by spelling)"}
        return Reading(gap=f"{path} has no {name} queries" + ("" if groups else how.get(breakdown, "")))
    if not isinstance(scores, dict) or not matches(scores.get("mrr"), float):
        return Reading(gap=f"{path}: its {name} queries hold no MRR")   # damaged or edited: a gap
    return Reading(value=float(scores["mrr"]), extra={"queries": scores.get("queries")})


def _plateau(result: dict) -> Optional[str]:
    """Why the xlt model whose contextual words an ``xlt align`` result averaged had not learned (None: it had)."""
    side = result.get("source") if isinstance(result.get("source"), dict) else {}
    target = result.get("target") if isinstance(result.get("target"), dict) else {}
    if side.get("kind") != "xlt" or not isinstance(side.get("run"), str) or not side["run"]:
        return None
    return plateau_reason(side["run"], side.get("step"), [l for l in (side.get("lang"), target.get("lang")) if l])


def _cell(reading: Reading, scale: float = 1.0, paper: Optional[float] = None) -> Cell:
    value = None if reading.value is None else reading.value * scale
    return Cell(value=value, paper=paper, gap=reading.gap, note=reading.note)


def _size_cells(found: dict, avg: dict, metric: str, size: int, model: str, languages: Sequence[str]) -> list[Cell]:
    """One model's cells of one size: a cell per language, then their mean."""
    value = avg[metric, size, model]
    return [*(_cell(found[metric, size, model][l]) for l in languages),
            Cell(value=value, gap=None if value is not None else "average needs every language")]


def mean(values: Sequence[Optional[float]]) -> Optional[float]:
    return None if not values or any(v is None for v in values) else sum(values) / len(values)  # type: ignore


def collect(results_dir: str, sizes: Sequence[int], languages: Sequence[str], layer: str) -> dict:
    """{(metric, size, model): {lang: Reading}} for metric mrr, xnli, and different / identical (the MRR
    of the queries whose gold translation is another string / their own)."""
    out: dict = {}
    for n in sizes:
        for model in MODELS:
            root = os.path.join(results_dir, f"n{n}")
            chosen = layer if model.startswith("bert") else "last"
            paths = {l: os.path.join(root, "mrr", model, f"en-{l}.json") for l in languages}
            out["mrr", n, model] = {l: mrr_reading(path, chosen) for l, path in paths.items()}
            out["different", n, model] = {l: mrr_reading(path, chosen, ("by_spelling", "different"))
                                          for l, path in paths.items()}
            out["identical", n, model] = {l: mrr_reading(path, chosen, ("by_spelling", "identical"))
                                          for l, path in paths.items()}
            xnli = os.path.join(root, "xnli", model, "results.json")
            loaded = load_json(xnli)
            out["xnli", n, model] = {l: finetune_score(xnli, l, loaded=loaded) for l in [*languages, "en"]}
    return out


def pair_sets(found: dict, size: int, languages: Sequence[str]) -> tuple[dict[str, int], Optional[str]]:
    """The MRR pair set of every model at ``size``: ({lang: pairs}, None) when every model that has a
    result scored the same pairs (one checksum per language), else ({}, the reason)."""
    counts, differ = {}, []
    for lang in languages:
        sets = {model: (r.extra.get("pairs"), r.extra.get("checksum")) for model in MODELS
                for r in [found["mrr", size, model][lang]] if r.value is not None}
        if not sets:
            continue
        if len(set(sets.values())) == 1 and next(iter(sets.values()))[1] is not None:
            counts[lang] = next(iter(sets.values()))[0]
        else:
            differ.append(f"{lang}: " + ", ".join(f"{MODELS[m]} {'?' if n is None else f'{n:,}'}"
                                                  for m, (n, _) in sets.items()))
    if differ:
        return {}, (f"at n={size} the models' MRR was not scored on one pair set (pairs per model; run "
                    f"`xlt align` with --pairs-from): {'; '.join(differ)}")
    return counts, None


def first_plateau(readings) -> Optional[str]:
    """The first reason among ``readings`` why their model had not learned (None: it had, or unknown)."""
    return next((r.extra["plateau"] for r in readings if r.extra and r.extra.get("plateau")), None)


def averages(found: dict, languages: Sequence[str]) -> dict:
    """{(metric, size, model): the mean over the target languages, or None with a gap}."""
    return {key: mean([readings[l].value for l in languages]) for key, readings in found.items()}


# ---- findings --------------------------------------------------------------------------------------

def _need(avg: dict, key: tuple) -> float:
    if avg.get(("plateau", key[1], key[2])):
        raise Inconclusive(avg["plateau", key[1], key[2]])
    if key[0] == "mrr" and avg.get(("pairs", key[1])):
        raise Inconclusive(avg["pairs", key[1]])
    value = avg.get(key)
    if value is None:
        raise Inconclusive(f"{key[0]} of {MODELS[key[2]]} at n={key[1]} is missing")
    return value


def _compare(a: float, b: float, margin: float, a_name: str, b_name: str, what: str) -> Verdict:
    """a > b by more than the margin holds, b > a by more fails, closer is a tie (inconclusive)."""
    detail = f"{what}: {a_name} {a:.3f} vs {b_name} {b:.3f} (tie margin {margin:g})"
    if abs(a - b) <= margin:
        raise Inconclusive(f"a tie: {detail}")
    return Verdict(HOLDS if a > b else "does not hold", detail)


def static_beats_bert_small(numbers: tuple) -> Verdict:
    avg, small, _ = numbers
    bert = _need(avg, ("mrr", small, "bert"))
    weakest = min(STATIC, key=lambda m: _need(avg, ("mrr", small, m)))
    return _compare(_need(avg, ("mrr", small, weakest)), bert, MRR_MARGIN, MODELS[weakest], "BERT",
                    f"mean MRR at n={small}")


def bert_wins_big(numbers: tuple) -> Verdict:
    avg, _, big = numbers
    verdicts, ties = [], []
    for metric, margin in (("mrr", MRR_MARGIN), ("xnli", XNLI_MARGIN)):
        best = max(STATIC, key=lambda m: _need(avg, (metric, big, m)))
        try:
            verdicts.append(_compare(_need(avg, (metric, big, "bert")), _need(avg, (metric, big, best)), margin,
                                     "BERT", MODELS[best], f"mean {'MRR' if metric == 'mrr' else 'XNLI accuracy'} at n={big}"))
        except Inconclusive as tie:
            ties.append(str(tie))
    # Both parts are needed: one lost beyond its margin decides the claim, whatever the other's tie.
    details = "; ".join([v.detail for v in verdicts] + ties)
    if any(v.verdict != HOLDS for v in verdicts):
        return Verdict("does not hold", details)
    if ties:
        raise Inconclusive(details)
    return Verdict(HOLDS, details)


def short_windows_hurt_bert(numbers: tuple) -> Verdict:
    avg, _, big = numbers
    return _compare(_need(avg, ("mrr", big, "bert")), _need(avg, ("mrr", big, "bert-w20")), MRR_MARGIN,
                    "BERT", "BERT (20-token windows)", f"mean MRR at n={big}")


CLAIMS = [("static_beats_bert_small", "With little data, static embeddings (Word2Vec and GloVe) align better than "
           "BERT (word retrieval MRR, small size).", static_beats_bert_small),
          ("bert_wins_big", "With more data, BERT wins (MRR and XNLI above the best static model, big size).",
           bert_wins_big),
          ("short_windows_hurt_bert", "Short windows hurt BERT (20-token windows lower its MRR, big size).",
           short_windows_hurt_bert)]


def stated(finding: Finding, claim: dict) -> Finding:
    """The paper's side of a claim whose figure lost its numbers: the text's statement, with its line."""
    return dataclasses.replace(finding, paper_verdict=f"{claim['verdict']} as stated in the text",
                               paper_detail=f"line {claim['line']}: \"{claim['quote']}\"")


# ---- the tables ---------------------------------------------------------------------------------------

def build(results_dir: str, languages: Sequence[str], sizes: Sequence[int], numbers: Optional[dict] = None,
          layer: str = "last") -> ReportTable:
    data = numbers or paper_numbers.load()
    figures = data["liu2020_figures"]
    sizes = sorted(sizes)
    found = collect(results_dir, sizes, languages, layer)
    avg = averages(found, languages)
    sets = {n: pair_sets(found, n, languages) for n in sizes}
    # ("pairs", n): why the MRRs at size n are not comparable (None: one pair set); read by _need
    avg.update({("pairs", n): reason for n, (_, reason) in sets.items()})
    # ("plateau", n, model): a BERT that never left the unigram plateau speaks for no finding (MRR or XNLI)
    plateaus = {("plateau", n, m): first_plateau(found["mrr", n, m].values()) for n in sizes for m in MODELS}
    avg.update(plateaus)
    groups = [(f"n={n}", [*languages, "avg"]) for n in sizes]
    table = ReportTable("liu-figures", "Liu et al. (2020) Figures 1 and 3a: word retrieval MRR (en-X, joint space, "
                        "cosine)", "model", groups, digits=3, source=paper_numbers.describe(figures["source"]))
    xnli = ReportTable("liu-figures", "Figures 2 and 3b: XNLI zero-shot accuracy (trained on English)", "model",
                       [(f"n={n}", [*languages, "avg", "en"]) for n in sizes], digits=1, part="xnli")
    table.part = "mrr"
    for model, label in MODELS.items():
        row, xrow = [], []
        for n in sizes:
            row += _size_cells(found, avg, "mrr", n, model, languages)
            xrow += [*_size_cells(found, avg, "xnli", n, model, languages), _cell(found["xnli", n, model]["en"])]
        table.add_row(label, row)
        xnli.add_row(label, xrow)
    table.sections.append(xnli)
    table.remarks += [
        f"Sizes: lines per language (the paper: 200k and 1000k sentences). BERT MRR: layer {layer!r} of "
        "`xlt align contextual-word` (each word its states averaged over the corpus); static: the file's rows, a "
        "BPE-split word the mean of its pieces. Word2Vec windows 128/256 are Figure 4.",
        *[reason or f"MRR at n={n}: every model scored on the same dictionary pairs, "
          + ", ".join(f"{lang} {count:,}" for lang, count in counts.items())
          for n, (counts, reason) in sets.items() if counts or reason],
        *[reason for reason in plateaus.values() if reason],
        f"Findings: differences within {MRR_MARGIN:g} MRR or {XNLI_MARGIN:g} accuracy points are ties "
        "(inconclusive). The paper's figures are bar charts whose numbers the text conversion lost."]
    if any(r.value is not None for key, readings in found.items() if key[0] == "different"
           for r in readings.values()):
        table.sections.insert(0, spelling_section(found, avg, sizes, languages))
        table.remarks.append(spelling_remark(found, sizes, languages))
    if len(sizes) < 2:
        table.remarks.append("One size only: the claims need a small and a big size.")
    else:
        small, big = sizes[0], sizes[-1]
        for key, claim, rule in CLAIMS:
            table.findings.append(stated(check(claim, rule, (avg, small, big), None), figures["claims"][key]))
    return table


def spelling_section(found: dict, avg: dict, sizes: Sequence[int], languages: Sequence[str]) -> ReportTable:
    """The MRR of the queries whose gold translation is another string: what the models learned, without
    the pairs of one string that one row of a static joint space ranks first for free."""
    table = ReportTable("liu-figures", "Word retrieval MRR of the queries whose translation is another string",
                        "model", [(f"n={n}", [*languages, "avg"]) for n in sizes], digits=3, part="mrr-different")
    for model, label in MODELS.items():
        table.add_row(label, [cell for n in sizes for cell in _size_cells(found, avg, "different", n, model, languages)])
    return table


def spelling_remark(found: dict, sizes: Sequence[int], languages: Sequence[str]) -> str:
    """How many queries' gold translation is their own string (the same for every model of a size: one pair set)."""
    def count(n: int, lang: str) -> str:
        for model in MODELS:
            same, other = found["identical", n, model][lang], found["different", n, model][lang]
            if other.value is not None:  # a gap in "identical" then means no such query
                same_queries = same.extra.get("queries", 0) if same.value is not None else 0
                return f"{lang} {same_queries:,} of {same_queries + other.extra.get('queries', 0):,}"
        return f"{lang} ?"
    return ("Queries whose gold translation is their own string (in a static joint space one row, ranked first "
            "whatever was learned; the table of the others leaves them out): "
            + "; ".join(f"n={n} " + ", ".join(count(n, l) for l in languages) for n in sizes))


def plot(table: ReportTable, path: str) -> None:
    """Figures 1-3 as the paper lays them out: per size, languages on the x axis, one bar per model."""
    panels = []
    for section in [table, *table.sections]:
        metric = {"mrr": "MRR", "mrr-different": "MRR (another string)"}.get(section.part, "XNLI accuracy")
        for g, (title, columns) in enumerate(section.groups):
            langs = [c for c in columns if c not in ("avg", "en")]
            start = sum(len(cols) for _, cols in section.groups[:g])
            bars = {label: [cells[start + columns.index(l)].value for l in langs] for label, cells in section.rows}
            panels.append(BarPanel(f"{metric}, {title}", langs, bars, metric))
    grouped_bars(panels, path, "Liu et al. (2020) Figures 1-4 at this scale")


def build_pos(results_dir: str, languages: Sequence[str], numbers: Optional[dict] = None,
              layer: str = "last") -> ReportTable:
    """Table 1: MRR by part of speech of the English word (``RESULTS_DIR/en-<L>.json``: BERT at the big size)."""
    data = numbers or paper_numbers.load()
    pos = data["liu2020_pos"]
    table = ReportTable("liu-pos", "Liu et al. (2020) Table 1: MRR by part of speech (BERT, big size)", "MRR",
                        [("", [*languages, "avg"])], digits=3, source=paper_numbers.describe(pos["source"]))
    readings = {tag: {l: mrr_reading(os.path.join(results_dir, f"en-{l}.json"), layer, ("by_pos", tag))
                      for l in languages}
                for tag in POS_ROWS}
    ours: dict[str, Any] = {}  # tag -> mean MRR; "plateau" -> why BERT had not learned
    for tag, label in POS_ROWS.items():
        paper_row = pos["rows"][tag]
        cells = [_cell(readings[tag][l], paper=paper_row.get(l)) for l in languages]
        ours[tag] = mean([readings[tag][l].value for l in languages])
        cells.append(Cell(value=ours[tag], paper=paper_row["avg"],
                          gap=None if ours[tag] is not None else "average needs every language"))
        table.add_row(label, cells)
    table.remarks += [
        "Tags: each English word's most frequent UPOS in UD English EWT (the paper: OntoNotes 5.0, which is not "
        "freely available); open = ADJ ADV INTJ NOUN PROPN VERB, closed = ADP AUX CCONJ DET NUM PART PRON SCONJ.",
        f"The paper's avg is over its six languages ({', '.join(pos['languages'])}); xlt's over {', '.join(languages)}."]
    scored = {l: mrr_reading(os.path.join(results_dir, f"en-{l}.json"), layer) for l in languages}
    if any(r.value is not None for r in scored.values()):
        table.remarks.append("Dictionary pairs scored: " + ", ".join(
            f"{l} {r.extra['pairs']:,}" if r.value is not None and r.extra.get("pairs") is not None else f"{l} ?"
            for l, r in scored.items()))
    paper_avg = {tag: row["avg"] for tag, row in pos["rows"].items()}
    ours["plateau"] = first_plateau(scored.values())
    if ours["plateau"]:
        table.remarks.append(ours["plateau"])
    table.findings += [check("Open-class words align better than closed-class words.", open_beats_closed, ours,
                             paper_avg),
                       check("Among open classes, adjectives align best (above nouns, adverbs and verbs).",
                             adjectives_best, ours, paper_avg)]
    return table


def open_beats_closed(avg: dict) -> Verdict:
    if avg.get("plateau"):
        raise Inconclusive(avg["plateau"])
    if avg.get("open") is None or avg.get("closed") is None:
        raise Inconclusive("the open or the closed class is missing")
    return _compare(avg["open"], avg["closed"], MRR_MARGIN, "open", "closed", "mean MRR")


def adjectives_best(avg: dict) -> Verdict:
    if avg.get("plateau"):
        raise Inconclusive(avg["plateau"])
    missing = [t for t in ("ADJ", "NOUN", "ADV", "VERB") if avg.get(t) is None]
    if missing:
        raise Inconclusive(f"no {', '.join(missing)} words")
    runner_up = max(("NOUN", "ADV", "VERB"), key=lambda t: avg[t])
    return _compare(avg["ADJ"], avg[runner_up], MRR_MARGIN, "ADJ", runner_up, "mean MRR")


def plot_pos(table: ReportTable, path: str) -> None:
    _, columns = table.groups[0]
    groups = [label for label, _ in table.rows]
    bars = {c: [cells[i].value for _, cells in table.rows] for i, c in enumerate(columns)}
    paper = {"paper avg": [cells[-1].paper for _, cells in table.rows]}
    grouped_bars([BarPanel("MRR by part of speech", groups, {**bars, **paper}, "MRR")], path,
                 "Liu et al. (2020) Table 1 at this scale", columns=1)


def figures(results_dir: str, languages: Sequence[str], sizes: Sequence[int], numbers: Optional[dict] = None,
            layer: str = "last"):
    """``xlt report liu-figures``: the table and a function writing OUT/liu-figures.png."""
    table = build(results_dir, languages, sizes, numbers, layer)
    return table, lambda out: plot(table, os.path.join(out, "liu-figures.png"))


def pos_table(results_dir: str, languages: Sequence[str], numbers: Optional[dict] = None, layer: str = "last"):
    """``xlt report liu-pos``: the table and a function writing OUT/liu-pos.png."""
    table = build_pos(results_dir, languages, numbers, layer)
    return table, lambda out: plot_pos(table, os.path.join(out, "liu-pos.png"))
