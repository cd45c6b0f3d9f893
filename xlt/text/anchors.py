"""Vocabularies for the anchor-point ablations of Wu et al. (2020) §4.2, and how many anchors they share.

* Default anchors: the union of per-language vocabularies (counts summed, every token owned by the
  languages that use it).
* No anchors: the same union with every entry prefixed by its language (``fr:chat``), so no token is shared.
* :func:`anchor_report`: shared token types per language pair and the share of running tokens they cover.
"""

from __future__ import annotations

import os
from typing import Optional, Sequence

from xlt.text.tokenize import check_language
from xlt.text.vocab import Vocabulary
from xlt.utils import log
from xlt.utils.errors import PathLike, XltError
from xlt.utils.outputs import write_json


def _load_language_vocabularies(per_language: Sequence[tuple[str, PathLike]]) -> list[tuple[str, Vocabulary]]:
    for lang, _ in per_language:   # before any file is read: a typo is named first
        check_language(lang)
    loaded = []
    for lang, path in per_language:
        vocab = Vocabulary.load(path)
        if vocab.languages and vocab.languages != [lang]:
            raise XltError(f"its sidecar gives languages {', '.join(vocab.languages)}; expected a vocabulary "
                           f"of {lang} only", path)
        loaded.append((lang, vocab))
    return loaded


def union_vocabulary(per_language: Sequence[tuple[str, PathLike]], output: PathLike,
                     prefix_lang: bool = False) -> Vocabulary:
    """Write the union of per-language vocabularies with its ownership sidecar.

    Default: a token's counts are summed over languages and it is owned by each (*Default anchors*).
    ``prefix_lang``: every entry becomes ``lang:token`` so nothing is shared (*No anchors*).
    """
    if not per_language:
        raise XltError("no vocabulary given (use --vocab LANG FILE, once per language)")
    if os.fspath(output) == "-":
        raise XltError("the union needs -o FILE (its ownership sidecar goes beside it)")
    union = Vocabulary.union(_load_language_vocabularies(per_language), prefix_lang)
    union.save(output)
    return union


def anchor_report(per_language: Sequence[tuple[str, PathLike]]) -> dict:
    """Shared token types (anchors) between every pair of per-language vocabularies.

    For languages ``a`` and ``b`` with vocabularies (token counts) ``V_a`` and ``V_b``:
    ``shared_types = |V_a & V_b|``, ``type_share[a] = shared_types / |V_a|``, and
    ``token_coverage[a] = sum of a's counts over shared types / all of a's counts`` -- the share of
    a's running tokens that are anchors.
    """
    loaded = _load_language_vocabularies(per_language)
    if len(loaded) < 2:
        raise XltError("anchors compare languages: give at least two --vocab LANG FILE")
    if len({lang for lang, _ in loaded}) != len(loaded):
        raise XltError("a language is given more than once")
    for (lang, path), (_, v) in zip(per_language, loaded):
        if sum(v.counts) == 0:  # token shares would divide by zero
            raise XltError("every count is 0: not a vocabulary counted from text", path)
    counts = {lang: dict(zip(v.tokens, v.counts)) for lang, v in loaded}
    report = {"format": "xlt-anchors/1", "vocabularies": {
        lang: {"path": os.fspath(path), "sha256": v.sha256, "types": len(v.tokens), "tokens": sum(v.counts)}
        for (lang, path), (_, v) in zip(per_language, loaded)}, "pairs": []}
    for i, (a, _) in enumerate(loaded):
        for b, _ in loaded[i + 1:]:
            shared = counts[a].keys() & counts[b].keys()
            sizes = report["vocabularies"]
            report["pairs"].append({
                "languages": [a, b], "shared_types": len(shared),
                "type_share": {x: len(shared) / sizes[x]["types"] for x in (a, b)},
                "token_coverage": {x: sum(counts[x][t] for t in shared) / sizes[x]["tokens"] for x in (a, b)}})
    return report


def report_anchors(per_language: Sequence[tuple[str, PathLike]], json_path: Optional[PathLike] = None) -> dict:
    """Compute :func:`anchor_report`, print it as a table and optionally write it as JSON.

    The table goes to stdout, or to stderr when the JSON itself goes to stdout (``--json -``).
    """
    report = anchor_report(per_language)
    rows = []
    for pair in report["pairs"]:
        a, b = pair["languages"]
        rows.append([f"{a}-{b}", f"{pair['shared_types']:,}",
                     f"{a} {pair['type_share'][a]:.1%} / {b} {pair['type_share'][b]:.1%}",
                     f"{a} {pair['token_coverage'][a]:.1%} / {b} {pair['token_coverage'][b]:.1%}"])
    json_to_stdout = json_path is not None and os.fspath(json_path) == "-"
    log.print_table("Anchors: token types shared between languages",
                    ["pair", "shared types", "share of types", "share of running tokens"], rows, stderr=json_to_stdout)
    if json_path is not None:
        write_json(json_path, report)
    return report
