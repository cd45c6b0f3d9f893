"""Bilingual dictionaries: MUSE word lists, and parallel contextual words from word alignment.

* :func:`read_muse_dictionary` -- ``src tgt`` per line (space or tab), as MUSE ships them
  (``en-fr.0-5000.txt`` to train, ``en-fr.5000-6500.txt`` to test).
* :func:`grow_diag_final_and` -- Koehn's symmetrisation of a forward and a reverse alignment.
* :func:`one_to_one` -- the links whose two words have no other link.
* :func:`read_pos_lexicon` / :func:`pos_breakdown` -- each word's most frequent UPOS in a CoNLL-U
  treebank, and retrieval scores per tag (Liu et al. 2020, "What makes ...", Table 1);
  :func:`rank_breakdown` the same per any label (the spelling breakdown of ``xlt align``).
* :func:`contextual_dictionary` -- fast_align forward + reverse on a parallel corpus,
  grow-diag-final-and, one-to-one links: the "dictionary of parallel contextual words" of Wu et al.
  (2020) §5.1.2, and crosslingual-nlp's recipe.

A link is ``(source word index, target word index)`` within one sentence pair.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from xlt.analysis.fastalign import FastAlignSettings, Link, align_directions
from xlt.text.conllu_lines import sentence_blocks, word_lines
from xlt.utils.errors import PathLike, XltError, require_file
from xlt.utils.textio import read_numbered_lines

# Universal Dependencies' word classes (universaldependencies.org/u/pos): Liu et al. group their
# tags into open and closed classes the same way; PUNCT, SYM and X belong to neither.
OPEN_CLASS = ("ADJ", "ADV", "INTJ", "NOUN", "PROPN", "VERB")
CLOSED_CLASS = ("ADP", "AUX", "CCONJ", "DET", "NUM", "PART", "PRON", "SCONJ")
NO_TAG = "none"  # a word the treebank never has

# Koehn's neighbourhood: the four sides, then the diagonals.
NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


def read_muse_dictionary(path: PathLike) -> list[tuple[str, str]]:
    """(source word, target word) pairs in file order, duplicates kept out. Blank lines are skipped.

    A line is two words separated by a space or a tab (a third numeric column, a weight, is
    allowed and ignored). Anything else is an error naming the line.
    """
    path = require_file(path, "dictionary")
    pairs: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for number, line in read_numbered_lines(path):
        fields = line.split()
        if not fields:
            continue
        if len(fields) == 3:
            try:
                float(fields[2])
            except ValueError:
                fields = []
        if len(fields) not in (2, 3):
            raise XltError("expected 'source target' (two words separated by a space or a tab)", path, number)
        pair = (fields[0], fields[1])
        if pair not in seen:
            seen.add(pair)
            pairs.append(pair)
    if not pairs:
        raise XltError("empty dictionary", path)
    return pairs


def read_pos_lexicon(path: PathLike) -> dict[str, str]:
    """{lowercased word form: its most frequent UPOS} over a CoNLL-U file (ties: the tag first in
    alphabetical order). Multi-word token lines (``1-2``) and empty nodes (``1.1``) are skipped.

    Lowercased because MUSE dictionaries are lowercase and treebanks are not ("The" counts as "the").
    """
    path = require_file(path, "CoNLL-U file")
    counts: dict[str, Counter] = defaultdict(Counter)
    for block, _ in sentence_blocks(read_numbered_lines(path)):
        try:
            words = word_lines(block)
        except XltError as error:
            raise XltError(error.message, path, error.line) from None
        for _, fields in words:
            counts[fields[1].lower()][fields[3]] += 1
    if not counts:
        raise XltError("no word lines (not a CoNLL-U file?)", path)
    return {form: min(tags.items(), key=lambda tc: (-tc[1], tc[0]))[0] for form, tags in counts.items()}


def rank_breakdown(ranks: np.ndarray, labels: Sequence[str], candidates: Optional[int] = None) -> dict[str, dict]:
    """Retrieval scores per label: {label: {"mrr", "p@1", ..., "queries"}}; ranks float [Q], labels [Q];
    ``candidates`` as for :func:`~xlt.analysis.retrieval.rank_scores`."""
    from xlt.analysis.retrieval import rank_scores

    ranks, labels = np.asarray(ranks), np.asarray(list(labels), dtype=object)
    if len(ranks) != len(labels):
        raise ValueError(f"{len(ranks)} ranks for {len(labels)} labels")
    return {label: {**rank_scores(ranks[labels == label], candidates=candidates), "queries": int((labels == label).sum())}
            for label in sorted(set(labels.tolist()))}


def pos_breakdown(ranks: np.ndarray, tags: Sequence[str], candidates: Optional[int] = None) -> dict[str, dict]:
    """:func:`rank_breakdown` per UPOS tag, plus the open and the closed class as two more groups.

    ranks float [Q] (1 = first), tags [Q] one UPOS (or :data:`NO_TAG`) per query.
    """
    from xlt.analysis.retrieval import rank_scores

    scores = rank_breakdown(ranks, tags, candidates)
    ranks, tags = np.asarray(ranks), np.asarray(list(tags), dtype=object)
    for name, members in (("open", OPEN_CLASS), ("closed", CLOSED_CLASS)):
        mask = np.isin(tags, members)
        if mask.any():
            scores[name] = {**rank_scores(ranks[mask], candidates=candidates), "queries": int(mask.sum())}
    return scores


def grow_diag_final_and(forward: Sequence[Link], reverse: Sequence[Link]) -> list[Link]:
    """Symmetrise two directional alignments of one sentence pair (Koehn et al., 2003).

    1. Start from the intersection.
    2. grow-diag: repeatedly add a union link that touches (side or diagonal) an accepted link,
       when its source word or its target word is still unaligned; until nothing changes.
    3. final-and: add the remaining forward links, then the reverse links, whose source word AND
       target word are both still unaligned.

    Candidates are visited in (source, target) order in every pass, as fast_align's ``atools -c
    grow-diag-final-and`` does, and a link counts as soon as it is added. Returns sorted links.
    """
    forward_set, reverse_set = set(forward), set(reverse)
    union = forward_set | reverse_set
    accepted = forward_set & reverse_set
    source_aligned = {i for i, _ in accepted}
    target_aligned = {j for _, j in accepted}

    def add(link: Link) -> None:
        accepted.add(link)
        source_aligned.add(link[0])
        target_aligned.add(link[1])

    candidates = sorted(union - accepted)
    grew = True
    while grew:
        grew = False
        for i, j in candidates:
            if (i, j) in accepted or (i in source_aligned and j in target_aligned):
                continue
            if any((i + di, j + dj) in accepted for di, dj in NEIGHBOURS):
                add((i, j))
                grew = True
    for directional in (forward_set, reverse_set):
        for i, j in sorted(directional):
            if i not in source_aligned and j not in target_aligned:
                add((i, j))
    return sorted(accepted)


def one_to_one(links: Sequence[Link]) -> list[Link]:
    """The links whose source word and target word appear in no other link. Sorted."""
    sources = Counter(i for i, _ in links)
    targets = Counter(j for _, j in links)
    return sorted({(i, j) for i, j in links if sources[i] == 1 and targets[j] == 1})


@dataclass
class ContextualDictionary:
    """Aligned word pairs of a parallel corpus.

    Attributes:
        links: per sentence pair, its one-to-one (source word, target word) links.
        n_sentences: sentence pairs read; n_links: links kept; n_identical_dropped: links whose two
            words were the same string and ``drop_identical`` removed.
    """

    links: list[list[Link]]
    n_sentences: int
    n_links: int
    n_identical_dropped: int


def contextual_dictionary(source: Sequence[Sequence[str]], target: Sequence[Sequence[str]],
                          drop_identical: bool = False,
                          settings: FastAlignSettings = FastAlignSettings()) -> ContextualDictionary:
    """fast_align both ways, grow-diag-final-and, one-to-one links (crosslingual-nlp's recipe).

    ``source``/``target``: tokenized sentence pairs (lists of words). ``drop_identical`` removes
    links between identical strings (e.g. names and numbers, or shared anchors when studying them).
    """
    forward, reverse = align_directions(source, target, settings)
    kept: list[list[Link]] = []
    dropped = 0
    for words_s, words_t, fwd, rev in zip(source, target, forward, reverse):
        links = one_to_one(grow_diag_final_and(fwd, rev))
        if drop_identical:
            distinct = [(i, j) for i, j in links if words_s[i] != words_t[j]]
            dropped += len(links) - len(distinct)
            links = distinct
        kept.append(links)
    return ContextualDictionary(kept, len(source), sum(map(len, kept)), dropped)
