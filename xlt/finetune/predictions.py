"""Prediction files: what a fine-tuned model predicted on one evaluation split, one file per split.

Every evaluation of ``xlt finetune`` (language, split, test-time variant) writes one beside its
metrics, so errors can be read and every score re-computed by another scorer
(see docs/finetune.md for the layout):

* parsing (``.conllu``) -- the input file with HEAD and DEPREL replaced by the predictions; every
  other column, comment, multiword-token and empty-node line is the input's. A word cut off by
  ``max_len`` (it has no prediction, and counts as wrong) gets ``_`` in both.
* NER (``.ner``) -- ``word<TAB>gold<TAB>predicted`` per word, a blank line after each sentence: the
  words and IOB2 gold tags as scored (IOB1 input converted, a WikiANN ``en:`` prefix stripped) and
  the predicted tags after the post-processing that was scored.
* XNLI (``.tsv``) -- a header ``id<TAB>gold<TAB>predicted``, then one line per pair; ``id`` is the
  pair's 0-based index in its input file.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, TextIO

from xlt.utils.errors import XltError
from xlt.utils.textio import read_numbered_lines

PREDICTIONS_DIR = "predictions"
HEAD, DEPREL = 6, 7      # CoNLL-U columns (0-based)


def prediction_file(lang: str, split: str, variant: str, params: dict[str, Any], suffix: str) -> str:
    """A run-relative name: ``predictions/test.fr.conllu`` (plain), ``.../test.fr.map.conllu``,
    ``.../dev.fr.shift-alpha0.5.conllu`` (one per shift weight tried)."""
    tag = "" if variant == "plain" else f".{variant}"
    if variant == "shift":
        tag += f"-alpha{params['alpha']:g}"
    return f"{PREDICTIONS_DIR}/{split}.{lang}{tag}{suffix}"


def write_labels(out: TextIO, gold: Sequence[str], predicted: Sequence[str]) -> None:
    """XNLI: a header, then ``index<TAB>gold<TAB>predicted`` per example."""
    out.write("id\tgold\tpredicted\n")
    for i, (g, p) in enumerate(zip(gold, predicted, strict=True)):
        out.write(f"{i}\t{g}\t{p}\n")


def write_tagged(out: TextIO, sentences: Sequence[tuple[Sequence[str], Sequence[str], Sequence[str]]]) -> None:
    """NER: per sentence (words, gold tags, predicted tags), a ``word<TAB>gold<TAB>predicted`` line per
    word and a blank line after the sentence."""
    for words, gold, predicted in sentences:
        for word, g, p in zip(words, gold, predicted, strict=True):
            out.write(f"{word}\t{g}\t{p}\n")
        out.write("\n")


def write_conllu(out: TextIO, path: str, heads: Sequence[Sequence[Optional[int]]],
                 relations: Sequence[Sequence[Optional[str]]]) -> None:
    """Parsing: ``path`` (the CoNLL-U file the trees were read from) with each word's HEAD and DEPREL
    replaced; ``heads[s][w]`` / ``relations[s][w]`` are word ``w + 1`` of sentence ``s`` (None: ``_``).

    Sentences are found as :func:`xlt.finetune.parse.read_conllu` finds them (a blank line closes a
    sentence that has words), so the file must be the one that was read.
    """
    sentence, has_words = 0, False

    def changed(lineno: int) -> XltError:
        return XltError("the file changed while xlt finetune ran (its sentences no longer match the "
                        "predictions)", path, lineno)

    lineno = 0
    for lineno, line in read_numbered_lines(path):
        if not line.strip():
            sentence += has_words
            has_words = False
        elif not line.startswith("#"):
            columns = line.split("\t")
            if columns[0].isdigit():   # a syntactic word: ranges (1-2) and empty nodes (3.1) stay as they are
                word = int(columns[0]) - 1
                if sentence >= len(heads) or word >= len(heads[sentence]):
                    raise changed(lineno)
                head, relation = heads[sentence][word], relations[sentence][word]
                columns[HEAD] = "_" if head is None else str(head)
                columns[DEPREL] = "_" if relation is None else relation
                line = "\t".join(columns)
                has_words = True
        out.write(line + "\n")
    if sentence + has_words != len(heads):
        raise changed(lineno)
