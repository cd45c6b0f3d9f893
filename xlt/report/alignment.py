"""Wu et al. (2020) §5.1: Procrustes alignment of two monolingual models at three levels.

Reads ``RESULTS_DIR/en-<lang>.{word,contextual-word,sentence}.json`` (``xlt align`` outputs) and lays
out, per language pair and layer: word translation (embedding tables; row L0), contextual word
translation (CSLS P@1, MUSE test dictionary) and sentence retrieval (Tatoeba P@1), in percent. The
paper's Figures 4-6 did not survive the text conversion, so there are no paper numbers beside them.
"""

from __future__ import annotations

import os
from typing import Callable, Optional, Sequence

from xlt.report import paper as paper_numbers
from xlt.report.findings import Inconclusive, Verdict, check, decide
from xlt.report.plots import Panel, Series, per_layer
from xlt.report.render import Cell, ReportTable
from xlt.report.sources import load_json
from xlt.utils.shapes import matches

LEVELS = (("word", "word"), ("contextual-word", "contextual word"), ("sentence", "sentence"))
# Word translation counts as aligned when P@1 is at least this multiple of chance (1 / target words);
# with fewer test words than MIN_QUERIES (small vocabularies keep few whole-word entries) P@1 says little.
ABOVE_CHANCE = 10.0
MIN_QUERIES = 50


def _entries(result: dict) -> list[dict]:
    """The per-layer entries of an align result; a damaged file's odd ones are passed over (gaps)."""
    entries = result.get("results")
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def _word_p1(result: dict) -> tuple[Optional[float], Optional[int], int]:
    """CSLS P@1 of the embedding tables (percent), the target space size and the number of queries."""
    entry = next((r for r in _entries(result) if r.get("layer") in ("embeddings", 0)), None) or {}
    csls, space, queries = entry.get("csls"), result.get("space"), entry.get("queries", 0)
    p1 = csls.get("p@1") if isinstance(csls, dict) else None
    words = space.get("target_words") if isinstance(space, dict) else None
    # a damaged file's odd fields read as missing: the finding then says "no word-level result"
    return (100.0 * p1 if matches(p1, float) else None), (words if matches(words, int) else None), \
        (queries if matches(queries, int) else 0)


def _per_layer(result: dict, level: str) -> dict[int, float]:
    """layer -> P@1 in percent (CSLS for contextual words, Tatoeba retrieval for sentences)."""
    out = {}
    for entry in _entries(result):
        layer = entry.get("layer")
        csls = entry.get("csls") if isinstance(entry.get("csls"), dict) else {}
        value = csls.get("p@1") if level == "contextual-word" else entry.get("p_at_1")
        if isinstance(layer, int) and isinstance(value, (int, float)):
            out[layer] = 100.0 * value
    return out


def build(results_dir: str, languages: Sequence[str], numbers: Optional[dict] = None
          ) -> tuple[ReportTable, Callable[[str], None]]:
    data = numbers or paper_numbers.load()
    pairs = [f"en-{lang}" for lang in languages]
    results: dict[tuple[str, str], tuple[Optional[dict], Optional[str]]] = {
        (pair, level): load_json(os.path.join(results_dir, f"{pair}.{level}.json")) for pair in pairs for level, _ in LEVELS}
    layered = {(pair, level): _per_layer(r, level) for (pair, level), (r, _) in results.items() if r and level != "word"}
    layers = sorted({layer for values in layered.values() for layer in values}) or list(range(9))
    table = ReportTable(name="alignment", title="Wu et al. (2020) §5.1: Procrustes alignment of monolingual models",
                        stub="Layer", groups=[(pair, [title for _, title in LEVELS]) for pair in pairs],
                        source=paper_numbers.describe(data["wu2020_alignment"]["source"]))
    words: dict[str, tuple[Optional[float], Optional[int], int]] = {}
    for pair in pairs:
        result, gap = results[pair, "word"]
        words[pair] = _word_p1(result) if result else (None, None, 0)
    for layer in layers:
        cells = []
        for pair in pairs:
            for level, _ in LEVELS:
                result, gap = results[pair, level]
                if level == "word":
                    # a file read but holding no P@1 (damaged, edited) is a named gap, not a blank cell
                    gap = gap or (None if words[pair][0] is not None else "no word-level P@1 in the file")
                    cells.append(Cell(value=words[pair][0], gap=gap) if layer == layers[0] else Cell())
                else:
                    cells.append(Cell(value=layered.get((pair, level), {}).get(layer), gap=gap))
        table.add_row(f"L{layer}", cells)
    table.remarks = ["Percent. word: CSLS P@1 of the aligned embedding tables (row L0; single-token words); "
                     "contextual word: CSLS P@1 of mean contextual word vectors; sentence: Tatoeba P@1 after a map "
                     "learned on XNLI parallel sentences.",
                     *data["wu2020_alignment"].get("notes", [])]
    table.findings = [
        check(f"Independently trained monolingual models align at the word level: CSLS P@1 at least "
              f"{ABOVE_CHANCE:g} x chance (1 / target words) for every pair.", lambda w: aligned(w, pairs), words, None),
        check("Closer languages align better: word-level P@1 en-fr > en-ru > en-zh.", closer_is_better, words, None),
    ]

    def plot(output_dir: str) -> None:
        panels = []
        for pair in pairs:
            panel = Panel(pair)
            for color, (level, title) in enumerate(LEVELS[1:]):
                values = layered.get((pair, level))
                if values:
                    panel.series.append(Series(title, sorted(values), [values[k] for k in sorted(values)], color))
            panels.append(panel)
        per_layer(panels, os.path.join(output_dir, "alignment.png"), "P@1 (%)", table.title)

    return table, plot


def _word(words: dict, pair: str) -> tuple[float, int]:
    p1, space, queries = words.get(pair, (None, None, 0))
    if p1 is None or not space:
        raise Inconclusive(f"no word-level result for {pair}")
    if queries < MIN_QUERIES:
        raise Inconclusive(f"{pair}: only {queries} test words are whole vocabulary tokens of both models "
                           f"(fewer than {MIN_QUERIES})")
    return p1, space


def aligned(words: dict, pairs: Sequence[str]) -> Verdict:
    details, failing = [], []
    for pair in pairs:
        p1, space = _word(words, pair)
        chance = 100.0 / space
        details.append(f"{pair} {p1:.1f}% (chance {chance:.3f}%)")
        if p1 < ABOVE_CHANCE * chance:
            failing.append(pair)
    return decide(not failing, "; ".join(details))


def closer_is_better(words: dict) -> Verdict:
    p1 = {lang: _word(words, f"en-{lang}")[0] for lang in ("fr", "ru", "zh")}
    return decide(p1["fr"] > p1["ru"] > p1["zh"], ", ".join(f"en-{l} {v:.1f}%" for l, v in p1.items()))
