"""Task metrics, all in percent (as in the papers' tables).

* :func:`accuracy` -- XNLI.
* :func:`postprocess_tags` and :func:`span_f1` -- NER: Wu et al.'s (2020, §3.2) repair of predicted
  tag sequences, then span-level precision/recall/F1 computed by ``seqeval``.
* :func:`attachment_scores` -- parsing: UAS and LAS over the words that are not punctuation by gold
  UPOS, with relation subtypes stripped (``nsubj:pass`` -> ``nsubj``), as in crosslingual-nlp.
"""

from __future__ import annotations

from typing import Collection, Optional, Sequence

# Gold UPOS whose words LAS/UAS skip by default: crosslingual-nlp ignores PUNCT and SYM (and the PTB
# punctuation tags, which UD's UPOS column never holds).
PUNCT_UPOS = ("PUNCT", "SYM")

F1_MODES = ("conlleval", "strict")


def accuracy(gold: Sequence[str], predicted: Sequence[str]) -> float:
    """Percentage of positions where ``predicted`` equals ``gold`` (0 for no examples)."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold labels but {len(predicted)} predictions")
    if not gold:
        return 0.0
    return 100.0 * sum(g == p for g, p in zip(gold, predicted)) / len(gold)


# ---- NER ---------------------------------------------------------------------------------------
def tag_type(tag: str) -> Optional[str]:
    """``B-PER`` -> ``PER``; ``O`` -> None."""
    return None if tag == "O" else tag[2:]


def postprocess_tags(tags: Sequence[str]) -> list[str]:
    """Wu et al.'s rewrite of predicted BIO tags into well-formed IOB2 spans.

    A chunk starts at every ``B-*`` and at every ``I-*`` that follows ``O`` or opens the sentence,
    and extends over the ``I-*`` tags that follow, whatever their type. Each chunk is rewritten
    ``B-T I-T ... I-T`` with T the type of its LAST token ("following the final entity type"):
    a standalone ``I-X`` becomes ``B-X``; ``B-X I-Y I-Z`` becomes ``B-Z I-Z I-Z``. ``O`` and
    ``B-X B-Y`` stay as they are. The output is valid IOB2, so strict and conlleval-style
    span F1 agree on it.
    """
    out = list(tags)
    start = None
    for i in range(len(tags) + 1):
        continues = i < len(tags) and tags[i].startswith("I-") and start is not None
        if start is not None and not continues:
            kind = tag_type(tags[i - 1])
            out[start:i] = [f"B-{kind}"] + [f"I-{kind}"] * (i - 1 - start)
            start = None
        if i < len(tags) and tags[i] != "O" and start is None:
            start = i
    return out


def span_f1(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]],
            mode: str = "conlleval") -> dict[str, float]:
    """Micro span precision, recall and F1 of IOB2 sentences, computed by seqeval.

    ``mode="conlleval"`` is seqeval's default, the CoNLL script's reading: an ``I-X`` that does not
    continue an X chunk opens one. ``mode="strict"`` only counts spans that are well formed in
    IOB2 (``seqeval``'s ``mode="strict", scheme=IOB2``). They differ only on ill-formed sequences.
    """
    if mode not in F1_MODES:
        raise ValueError(f"unknown span F1 mode {mode!r}; known: {', '.join(F1_MODES)}")
    # seqeval imports scikit-learn (~1.6 s a process), so only the processes that score spans pay for it
    from seqeval.metrics import f1_score, precision_score, recall_score
    from seqeval.scheme import IOB2

    gold, predicted = [list(s) for s in gold], [list(s) for s in predicted]
    kwargs = dict(mode="strict", scheme=IOB2) if mode == "strict" else {}
    return {name: 100.0 * float(score(gold, predicted, zero_division=0, **kwargs))
            for name, score in (("precision", precision_score), ("recall", recall_score), ("f1", f1_score))}


# ---- parsing -----------------------------------------------------------------------------------
def strip_subtype(relation: str) -> str:
    """``nsubj:pass`` -> ``nsubj`` (UD language-specific subtypes)."""
    return relation.split(":", 1)[0]


def attachment_scores(gold_heads: Sequence[Sequence[int]], gold_relations: Sequence[Sequence[str]],
                      gold_upos: Sequence[Sequence[str]], predicted_heads: Sequence[Sequence[Optional[int]]],
                      predicted_relations: Sequence[Sequence[Optional[str]]],
                      exclude_upos: Collection[str] = PUNCT_UPOS, strip_subtypes: bool = True) -> dict[str, float]:
    """UAS and LAS (percent) over all sentences' scored words, plus how many words were scored and
    how many of those the model could not see (``cut_words``: cut by the maximum length).

    Per sentence, every list has one entry per word; heads are 1-based word indices with 0 for
    the root. A prediction of ``None`` (a word the model could not see) is wrong. A word is scored
    unless its gold UPOS is in ``exclude_upos``. With ``strip_subtypes`` both gold and predicted
    relations lose their subtype before comparing.
    """
    excluded = set(exclude_upos)
    scored = heads_right = both_right = cut = 0
    for sentence in zip(gold_heads, gold_relations, gold_upos, predicted_heads, predicted_relations, strict=True):
        lengths = {len(part) for part in sentence}
        if len(lengths) != 1:
            raise ValueError(f"a sentence's gold and predicted lists differ in length: {sorted(lengths)}")
        for g_head, g_rel, upos, p_head, p_rel in zip(*sentence):
            if upos in excluded:
                continue
            scored += 1
            cut += p_head is None
            if p_head is None or p_head != g_head:
                continue
            heads_right += 1
            if p_rel is not None and strip_subtypes:
                g_rel, p_rel = strip_subtype(g_rel), strip_subtype(p_rel)
            both_right += p_rel == g_rel
    if not scored:
        return {"uas": 0.0, "las": 0.0, "scored_words": 0.0, "cut_words": 0.0}
    return {"uas": 100.0 * heads_right / scored, "las": 100.0 * both_right / scored, "scored_words": float(scored),
            "cut_words": float(cut)}
