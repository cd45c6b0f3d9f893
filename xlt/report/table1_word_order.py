"""K et al.'s (2020) word-order control beside the Fake-English table: Default pretrained and tested
with Fake-English's words permuted within each sentence (the pair en-``fakeperm``,
:mod:`xlt.text.word_order`), against Default on Fake-English in its order.

A table of its own follows the Fake-English one (Default, No pretraining and the best trivial
baseline of the permuted pair, each baseline on its own test set: the next word as the head scores
far less in a permuted sentence), with one finding: whether Default's zero-shot margin over the
best trivial baseline is smaller into the permuted language. Margins, not scores, are compared,
since the floors differ.

What the comparison cannot separate: a task may need order in any language (a tagger reads its
neighbours), so part of a drop may be the permuted test set's own difficulty rather than lost
transfer; the relative transfer (over each model's English margin) is printed beside it.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

from xlt.report.findings import Finding, Inconclusive, Verdict, check
from xlt.report.noise import SINGLE_SEED_SD, Noise, estimate, judge, settle
from xlt.report.render import ReportTable
from xlt.report.sources import plateau_reason
from xlt.report.table1_cells import SOURCE, Row, collect, model_dirs, noise_of, pair_table
from xlt.report.table1_findings import (BASELINES, CONTROL, MIN_MARGIN, TASKS, EnglishScores, Values, gated,
                                        unlearned)
from xlt.report.table1_scores import relative_transfer
from xlt.text.fake import FAKE, PERMUTED

ROWS = ("default", CONTROL, BASELINES)
CLAIM = ("Transfer rests on word order (K et al. 2020): with Fake-English's words permuted within each sentence "
         "(in pretraining and test alike), Default's zero-shot margin over the best trivial baseline is smaller, "
         "on every task where Default transfers to Fake-English in its order.")


def margin_terms(task: str, lang: str, sign: float = 1.0) -> dict:
    """Default's margin over the best trivial baseline on ``lang`` (times ``sign``) as terms."""
    return {("default", task, lang): sign, (BASELINES, task, lang): -sign}


def word_order_matters(english: Values, noise: Optional[Noise] = None) -> Callable[[Values], Verdict]:
    """The rule on values holding both languages (``english``: the English scores, for the relative
    transfers printed beside each task)."""
    def relative(values: Values, lang: str, task: str) -> str:
        try:
            return f"{relative_transfer(values, english, 'default', task, lang):.2f}"
        except Inconclusive:
            return "-"

    def rule(values: Values) -> Verdict:
        parts, texts, skipped = [], [], []
        for task, _ in TASKS:
            cells = [values.get(row, {}).get(task, {}).get(lang) for row in ("default", BASELINES)
                     for lang in (FAKE, PERMUTED)]
            if None in cells:
                skipped.append(f"{task}: a Default or baseline score missing or left out")
                continue
            ordered = estimate(values, noise, margin_terms(task, FAKE))
            if ordered.value < MIN_MARGIN:
                skipped.append(f"{task}: Default {ordered.value:+.1f} over the baseline in order, under {MIN_MARGIN:g}: "
                               "nothing to lose")
                continue
            permuted = estimate(values, noise, margin_terms(task, PERMUTED))
            lost = estimate(values, noise, {**margin_terms(task, FAKE), **margin_terms(task, PERMUTED, -1.0)})
            parts.append((task, judge(lost)))
            texts.append(f"{task}: over the baseline {ordered.value:+.1f} in order, {permuted.value:+.1f} permuted "
                         f"(relative transfer {relative(values, FAKE, task)} vs {relative(values, PERMUTED, task)}); "
                         + lost.after("lost "))
        if not parts:
            raise Inconclusive("; ".join(skipped) or "no task to compare")
        return settle(parts, "; ".join(texts) + (f" (left out: {'; '.join(skipped)})" if skipped else ""))
    return rule


def merged(a: Values, b: Values) -> Values:
    """Two tables' values (one language each) as one, rows and tasks in their first table's order."""
    return {row: {task: {**a.get(row, {}).get(task, {}), **b.get(row, {}).get(task, {})}
                  for task in dict.fromkeys([*a.get(row, {}), *b.get(row, {})])}
            for row in dict.fromkeys([*a, *b])}


def section(results_dir: str, rows: Sequence[Row], values: Values, english: Values, readings: dict,
            noise: Noise) -> tuple[ReportTable, Finding]:
    """The permuted pair's table (the Fake-English table's columns; Default, No pretraining and the
    best trivial baseline) and the finding; ``values``, ``english``, ``readings`` and ``noise``: the
    ordered pair's zero-shot and English scores, its cells' readings and their noise."""
    rows = [row for row in rows if row.key in ROWS]
    p_values, p_readings, p_english, p_english_readings = collect(results_dir, rows, [PERMUTED])
    table = pair_table("Word order (K et al. 2020): Fake-English with its words permuted within each sentence",
                       PERMUTED, rows, p_values, p_english, p_readings, p_english_readings)
    table.remarks = [
        f"The pair en-{PERMUTED}: the Fake-English pretraining text and test sets with each sentence's words "
        "permuted (entities whole, heads renumbered; xlt permute-words), pretrained and fine-tuned as the "
        "Fake-English table's Default; zero-shot on the permuted test sets, each baseline on its own test set. "
        "The other rows are not run on this pair."]
    # the permuted pair has one pretrained row, whose spread over two models is a one-degree-of-freedom
    # guess: its models are pooled with the ordered pair's rows (noise.py's rule), not read alone. The
    # ordered pair's cells keep the noise its own table decides with, unless that counts no pretraining
    # seeds (the ordered pair pretrained once a row) where the permuted pair's count them
    joint = noise_of({**readings, **p_readings}, SINGLE_SEED_SD, pools={PERMUTED: FAKE})
    both = Noise({c: s if c[2] != PERMUTED and s.pretraining_sd is not None else joint.spreads.get(c, s)
                  for c, s in {**joint.spreads, **noise.spreads}.items()}, noise.single_seed_sd, joint.correlations)
    both_english = merged(english, p_english)
    # as the other findings: a Default model that did not learn English is left out, named; here by its
    # pretraining too, since a model on the unigram plateau transfers nothing whatever the word order,
    # and its English fine-tuning can still edge past the control's
    gaps = {**unlearned(EnglishScores(both_english)), **plateaued({**readings, **p_readings})}
    rule = gated(word_order_matters(both_english, both), gaps, ())
    return table, check(f"Fake-English: {CLAIM}", rule, merged(values, p_values), None)


def plateaued(readings: dict) -> dict:
    """(default, task, lang) -> why, for the Default cells of either pair with a model whose English dev
    perplexity did not leave the unigram plateau (:func:`xlt.report.sources.plateau_reason`)."""
    out, reasons = {}, {}
    for (row, task, lang), reading in readings.items():
        if row != "default":
            continue
        for path in model_dirs(reading):
            if path not in reasons:
                reasons[path] = plateau_reason(path, None, [SOURCE])
            if reasons[path]:
                out[row, task, lang] = reasons[path]
    return out
