"""Table 1 for the Fake-English pair (K et al. 2020; Dufter & Schütze 2020): English against its
twin whose every character is a new symbol (``xlt fake-english``), so that the two share no token
but have one structure.

The files are the real pairs' (``RESULTS_DIR/<row>/en-fake/...``), but the pair gets a table of its
own: no paper prints these numbers, and a mean over fr and fake would mix two questions. Per task
it gives the zero-shot score on the Fake-English test set, the same model's score on the English
test set (its twin, where fine-tuning was supervised), and the **relative transfer**::

    (zero-shot - best trivial baseline on Fake-English) / (English - best trivial baseline on English)

1 when the model does on Fake-English what it does on English, 0 when it does no better than a
model-free rule. Rows that need shared strings (Default anchors, No anchors) or another corpus
(Wiki-CC) cannot exist here: make records why (``missing.json``), and the table shows it. One row
that is not the paper's is shown where its cells exist (make's ``EXTRA_ROWS_fake=sep-l1``): Sep L1,
layer 1 language-specific, the separated rows' dose at one layer, with a finding of its own.
K et al.'s word-order control (the pair ``fakeperm``) follows in a table of its own
(:mod:`xlt.report.table1_word_order`).

The paper's findings are decided on these numbers with the best trivial baseline as the floor:
on Fake-English chance is none (the next word as the head already scores LAS, and an English
entity list finds no Fake-English entity). As for the real pairs, rows whose model did not learn
English are left out of a claim, by name.
"""

from __future__ import annotations

import os
from dataclasses import replace
from functools import partial
from typing import Callable, Optional, Sequence

from xlt.report import table1_word_order
from xlt.report.findings import Finding, Inconclusive, Verdict, check
from xlt.report.noise import SINGLE_SEED_SD, SINGLE_SEED_SD_ENGLISH, Noise, estimate, judge, judge_tied, settle
from xlt.report.render import ReportTable
from xlt.report.table1_cells import (NOISE, Row, baseline_names, collect, frozen_more, lang_embeddings_remark,
                                    noise_of, one_model_remark, pair_table)
from xlt.report.table1_findings import (BASELINES, CONTROL, TASKS, TIE, EnglishScores, Floor, Values,
                                        deeper_separation_hurts, extra_anchors_help, gated, sep_emb_l16_collapses,
                                        transfers, unlearned)
from xlt.report.table1_scores import relative_transfer
from xlt.text.fake import FAKE

FLOOR = Floor("the best trivial baseline", BASELINES)
SEPARATED = ("sep-emb", "sep-emb+l1-3", "sep-emb+l1-6", "sep-l1-3", "sep-l1-6")
# Not a row of the paper (make/table1.mk's ROW_sep-l1): shown before Sep L1-3 where its cells exist.
ONE_LAYER = Row("sep-l1", "Sep L1 (not in the paper)")
# Its chain: the three rows with per-language BPE (Default's is joint), one, three and six layers apart.
DOSE = (ONE_LAYER.key, "sep-l1-3", "sep-l1-6")
REFERENCE = {CONTROL: "No pretraining", BASELINES: "the baseline"}


def score(values: Values, row: str, task: str) -> Optional[float]:
    return values.get(row, {}).get(task, {}).get(FAKE)


# ---- findings ----------------------------------------------------------------------------------------
def pretraining_transfers(english: Values) -> Callable[..., Verdict]:
    """Default against both references on every task: whatever it gains over them crossed to a
    language that shares no token with English."""
    def rule(values: Values, noise: Optional[Noise] = None) -> Verdict:
        parts, texts, missing = [], [], False
        for task, _ in TASKS:
            default, control, floor = (score(values, row, task) for row in ("default", CONTROL, BASELINES))
            if None in (default, control, floor):
                texts.append(f"{task}: a Default, No pretraining or baseline score missing or left out")
                missing = True
                continue
            margin = default - max(control, floor)
            try:
                relative = f"relative transfer {relative_transfer(values, english, 'default', task, FAKE):.2f}"
            except Inconclusive as reason:
                relative = f"no relative transfer: {reason}"
            over = {ref: estimate(values, noise, {("default", task, FAKE): 1.0, (ref, task, FAKE): -1.0})
                    for ref in (CONTROL, BASELINES)}
            noises = "; ".join(f"over {REFERENCE[ref]}: {e.beside()}" for ref, e in over.items()
                               if not e.exact)
            parts += [(f"{task} over {ref}", judge_tied(e, TIE)) for ref, e in over.items()]
            texts.append(f"{task}: Default {default:.1f}, No pretraining {control:.1f}, best trivial baseline "
                         f"{floor:.1f} ({margin:+.1f}; {relative}{'; ' + noises if noises else ''})")
        detail = "; ".join(texts)
        if missing and not any(p is False for _, p in parts):
            raise Inconclusive(f"{detail} (a task is missing)")
        return settle(parts, detail + (f" (within {TIE:g} point is a tie)" if any(p is None for _, p in parts) else ""))
    return rule


def separation_hurts(values: Values, noise: Optional[Noise] = None) -> Verdict:
    usable = transfers(values, floor=FLOOR)
    texts, parts = [], []
    for task in usable.tasks():
        below = {row: estimate(values, noise, {(row, task, FAKE): 1.0, ("default", task, FAKE): -1.0})
                 for row in SEPARATED if score(values, row, task) is not None}
        if not below:
            usable.skipped.append(f"left out: no separated row has a {task} score")
            continue
        if unmeasured := [row for row in SEPARATED if row not in below]:
            # "every Sep row" then reads over fewer rows: say which
            usable.skipped.append(f"left out: no {task} score for {', '.join(unmeasured)}")
        # the claim is row < Default: judged on Default - row > 0
        parts += [(f"{task} {row}", judge(replace(e, value=-e.value))) for row, e in below.items()]
        texts.append(f"{task}: " + ", ".join(e.after(f"{row} ") for row, e in below.items()))
    usable.require(texts)
    return settle(parts, usable.detail("each row - Default: " + "; ".join(texts)))


def claims(english: Values) -> list[tuple[str, Callable[[Values], Verdict], Sequence[str]]]:
    """(claim, rule, the rows whose cells it reads besides Default); ``english``: the English scores."""
    return [
        ("Pretraining transfers without any anchor: Default, whose vocabulary shares no token with English, "
         f"beats the No pretraining control and the best trivial baseline zero-shot by {TIE:g} point or more "
         "on every task (K et al. 2020).", pretraining_transfers(english), ()),
        ("Anchors added by code-switching help: Extra anchors (English words swapped for their twins and back) "
         "beat Default on the mean over tasks (§4.2).", partial(extra_anchors_help, base="default", floor=FLOOR),
         ("extra-anchors",)),
        ("Separated embeddings or layers hurt: every Sep row is below Default on every task (§4.3).",
         separation_hurts, SEPARATED),
        ("More separation hurts more: Sep L1-3 > Sep L1-6 and Sep Emb > Sep Emb + L1-3 > Sep Emb + L1-6 on "
         "every task (§4.3).", partial(deeper_separation_hurts, floor=FLOOR), SEPARATED),
        ("Sep Emb + L1-6 loses at least half of Default's margin over the best trivial baseline on every task "
         "(§4.3).", partial(sep_emb_l16_collapses, floor=FLOOR), ("sep-emb+l1-6",)),
    ]


DOSE_CLAIM = ("More separation hurts more, layer by layer: Sep L1 > Sep L1-3 > Sep L1-6 on every task (Sep L1, "
              "layer 1 language-specific, is not in the paper; its link to Sep L1-3 must be decided).",
              partial(deeper_separation_hurts, floor=FLOOR, chains=(DOSE,), needed=(DOSE[:2],)), DOSE)


def findings(values: Values, english: EnglishScores, noise: Optional[Noise] = None,
             dose: bool = False) -> list[Finding]:
    """The claims on the pair's zero-shot scores, without the rows that did not learn English, each
    decided only beyond ``noise`` (the zero-shot cells' seed spreads; None: exact numbers); with
    ``dose``, Sep L1's chain too."""
    gaps = unlearned(english)
    return [check(f"Fake-English: {claim}", gated(partial(rule, noise=noise), gaps, rows, english.frozen_more),
                  values, None) for claim, rule, rows in claims(english.values) + ([DOSE_CLAIM] if dose else [])]


# ---- the table ---------------------------------------------------------------------------------------
def build(results_dir: str, rows: Sequence[Row], word_order: bool = False) -> ReportTable:
    """The pair's table (Table 1's rows) with its findings; with ``word_order``, K et al.'s control as a
    section after it, and its finding with the others (:mod:`xlt.report.table1_word_order`)."""
    dose = os.path.isdir(os.path.join(results_dir, ONE_LAYER.key, f"en-{FAKE}"))
    if dose:
        at = next((i for i, row in enumerate(rows) if row.key == "sep-l1-3"), len(rows))
        rows = [*rows[:at], ONE_LAYER, *rows[at:]]
    values, readings, english, english_readings = collect(results_dir, rows, [FAKE])
    table = pair_table("Fake-English (K et al. 2020): zero-shot transfer from English to its twin that shares no "
                       "token with it", FAKE, rows, values, english, readings, english_readings)
    table.remarks = [
        "Zero-shot: the en-fake model's score on the Fake-English test set (English's, every character mapped, "
        "labels kept); English: the same model on the English test set. relative = (zero-shot - best trivial "
        "baseline) / (English - best trivial baseline), each baseline on its own test set: 1 = as good as on "
        "English, 0 = no better than a model-free rule. No paper prints these numbers.", NOISE]
    if remark := lang_embeddings_remark(readings, rows):
        table.remarks.append(remark)
    noise = noise_of(readings, SINGLE_SEED_SD)
    # the word-order pair's models are pooled with these (table1_word_order), made with the same seeds
    if remark := one_model_remark(noise):
        table.remarks.append(remark)
    table.findings = findings(values, EnglishScores(english, baseline_names(english_readings),
                                                    frozen_more(english_readings),
                                                    noise_of(english_readings, SINGLE_SEED_SD_ENGLISH)), noise,
                              dose)
    if word_order:
        permuted, finding = table1_word_order.section(results_dir, rows, values, english, readings, noise)
        table.sections.append(permuted)
        table.findings.append(finding)
    return table
