"""The test dictionary pairs a word retrieval scores: chosen, restricted, written out, fingerprinted.

``xlt align word|contextual-word`` scores the test dictionary's pairs whose two words its spaces can
represent. Two systems of different coverage (a static file represents almost every dictionary word,
BERT's contextual words only those of its sampled sentences) would then be scored on different
pairs, with different queries and different MRR candidates. To compare them like for like:

* ``--pairs-out FILE`` writes the pairs a run scored, one ``source target`` per line in the test
  dictionary's order (a MUSE dictionary itself);
* ``--pairs-from FILE`` (repeatable) scores only the test pairs found in *every* given file, e.g.
  each system's ``--pairs-out``: their intersection. A pair of that set the system cannot represent
  is refused (one error line), never scored as a miss, so that every system scored with the same
  files is scored on exactly the same pairs and ranks among the same candidates.

The result's ``test`` entry records the set: ``usable`` (pairs scored), ``checksum`` (sha256 of the
sorted pairs, the same for the same set whatever its order), and with ``--pairs-from`` the files.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from xlt.analysis.dictionaries import read_muse_dictionary
from xlt.utils.errors import XltError
from xlt.utils.outputs import atomic_output

Pair = tuple[str, str]


def checksum(pairs: Sequence[Pair]) -> str:
    """``sha256:<hex>`` of the sorted ``source<TAB>target`` lines: one set, one checksum."""
    digest = hashlib.sha256()
    for source, target in sorted(set(pairs)):
        digest.update(f"{source}\t{target}\n".encode("utf-8"))
    return f"sha256:{digest.hexdigest()}"


def write_pairs(path: str, pairs: Sequence[Pair]) -> None:
    """``source target`` per line, atomically: a MUSE dictionary that --pairs-from reads back."""
    with atomic_output(path) as f:
        f.writelines(f"{source} {target}\n" for source, target in pairs)


def read_pair_sets(paths: Sequence[str]) -> set[Pair]:
    """The pairs found in every file (each read as a MUSE dictionary); an empty intersection -> XltError."""
    common: Optional[set[Pair]] = None
    for path in paths:
        pairs = set(read_muse_dictionary(path))
        common = pairs if common is None else common & pairs
    if not common:
        raise XltError(f"the {len(paths)} --pairs-from files have no pair in common", paths[-1])
    return common


def _example(pairs) -> str:
    source, target = sorted(pairs)[0]
    return f"'{source} {target}'"


@dataclass
class ScoredPairs:
    """The dictionary pairs a run scores (dictionary order), their rows int [P,2] in the spaces, and
    the ``train``/``test`` entry of the result that describes them."""

    pairs: list[Pair]
    rows: np.ndarray
    info: dict


def scored_pairs(path: str, source, target, source_key=str, target_key=str, drop_identical: bool = False,
                 pairs_from: Sequence[str] = ()) -> ScoredPairs:
    """Read a MUSE dictionary and keep the pairs the spaces can represent (``source``/``target``:
    :class:`~xlt.analysis.align.WordSpace`; ``*_key`` turn a dictionary word into the space's key);
    ``drop_identical`` also drops pairs of one string; ``pairs_from`` keeps only the pairs in every
    file and refuses when one of them is not kept. Nothing left -> XltError naming the dictionary."""
    pairs = read_muse_dictionary(path)
    info = {"file": path, "pairs": len(pairs)}
    wanted = read_pair_sets(pairs_from) if pairs_from else None
    if wanted is not None:
        foreign = wanted - set(pairs)
        if foreign:
            raise XltError(f"{len(foreign)} of the {len(wanted)} --pairs-from pairs are not in the test dictionary "
                           f"{path} (e.g. {_example(foreign)}): pairs files of another dictionary?", pairs_from[0])
        pairs = [p for p in pairs if p in wanted]
    kept, rows = [], []
    for s, t in pairs:
        row = (source.row.get(source_key(s)), target.row.get(target_key(t)))
        if None not in row:
            kept.append((s, t))
            rows.append(row)
    if not kept and wanted is None:
        raise XltError(f"none of the {len(pairs)} dictionary pairs has both words in the vocabularies "
                       f"({len(source.words)} source and {len(target.words)} target words)", path)
    if drop_identical:
        keep = [source.words[s] != target.words[t] for s, t in rows]
        if kept and not any(keep) and wanted is None:
            raise XltError("every usable pair has two identical words (--drop-identical leaves none)", path)
        info["identical_dropped"] = len(keep) - sum(keep)
        kept = [p for p, k in zip(kept, keep) if k]
        rows = [r for r, k in zip(rows, keep) if k]
    if wanted is not None:
        missing = wanted - set(kept)
        if missing:
            why = "a word outside this system's spaces" + (", or two identical words (--drop-identical)"
                                                          if drop_identical else "")
            raise XltError(f"{len(missing)} of the {len(wanted)} --pairs-from pairs cannot be scored here ({why}), "
                           f"e.g. {_example(missing)}: give --pairs-from the --pairs-out of every system compared",
                           pairs_from[0])
        info["pairs_from"] = {"files": list(pairs_from), "pairs": len(wanted)}
    array = np.array(rows, dtype=np.int64).reshape(-1, 2)
    info.update(usable=len(kept), source_words=int(len(np.unique(array[:, 0]))), checksum=checksum(kept))
    return ScoredPairs(kept, array, info)
