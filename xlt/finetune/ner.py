"""NER as BIO tagging of words, read from their first subword (Wu et al. 2020, §3.2).

Files: CoNLL-style columns, one word per line, a blank line between sentences. The layout is
recognised per file (:func:`read_tagged`): ``word ... tag`` (CoNLL 2003, MSRA characters, WikiANN
``en:word<TAB>tag`` whose language prefix is stripped), or CoNLL-U-like numbered columns ``id word
tag ...`` (Universal NER ``.iob2`` with ``# `` comment lines, WikiNEuRal). IOB1 tags are rewritten
as IOB2 on reading; tags must be ``O``, ``B-X`` or ``I-X``.

A sentence longer than ``max_len`` becomes several overlapping windows (:func:`plan_windows`),
never a truncated one: each word is predicted in exactly one window. Predictions are repaired
with the paper's heuristic (:func:`~xlt.finetune.metrics.postprocess_tags`), then scored by
span F1 (seqeval).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import Iterator, Optional, Sequence, TextIO

import torch
import torch.nn.functional as F
from torch import Tensor

from xlt.finetune.inputs import (IGNORE, EncodingMemo, example_order, model_input, pad_model_inputs, pad_rows,
                                  settings_from, special_positions)
from xlt.finetune.metrics import F1_MODES, postprocess_tags, span_f1, tag_type
from xlt.finetune.predictions import write_tagged
from xlt.finetune.task import TAGGING_RECIPE, Batch, DataLayout, LinearHead, Task
from xlt.text.pipeline import TextPipeline
from xlt.text.tagged_lines import check_tag, language_prefix
from xlt.utils.errors import XltError
from xlt.utils.textio import read_numbered_lines

COMMENT = re.compile(r"#\s*([\w.\- ]+=|newdoc\b|newpar\b)")   # CoNLL-U comments: "# key = value", "# newdoc"
WINDOW_OWNERS = ("center", "first")
POSTPROCESSING = ("paper", "none")


@dataclass(eq=False)   # identity hashing: examples are keys of the encoding memo
class TaggedSentence:
    """Words and IOB2 tags; word ``i`` is on line ``line + i`` of ``path``."""

    words: list[str]
    tags: list[str]
    path: str
    line: int


@dataclass
class NERSettings:
    dropout: float = field(default=0.1, metadata={"help": "dropout before the tag classifier"})
    window_owner: str = field(default="center", metadata={
        "help": "which of the overlapping windows of a long sentence predicts a word: center (the one "
                "giving it the most context on its cut side) or first (crosslingual-nlp)"})
    postprocess: str = field(default="paper", metadata={"scoring": True,
        "help": "repair predicted tags before scoring: paper (standalone I-X -> B-X; B-X I-Y I-Z -> "
                "B-Z I-Z I-Z, Wu et al. 2020) or none"})
    f1_mode: str = field(default="conlleval", metadata={"scoring": True,
        "help": "span F1 reading of tags: conlleval (seqeval default) or strict (IOB2-valid spans only)"})

    def __post_init__(self) -> None:
        for name, allowed in (("window_owner", WINDOW_OWNERS), ("postprocess", POSTPROCESSING),
                              ("f1_mode", F1_MODES)):
            if getattr(self, name) not in allowed:
                raise XltError(f"ner {name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}")


# ---- reading -----------------------------------------------------------------------------------
def iob1_to_iob2(tags: Sequence[str]) -> list[str]:
    """Every ``I-X`` that opens a chunk (after ``O``, another type, or at the start) becomes ``B-X``.

    IOB1 uses ``B-X`` only between two adjacent X chunks, so this is the IOB1 -> IOB2 conversion;
    on IOB2 input it changes nothing.
    """
    out = list(tags)
    for i, tag in enumerate(tags):
        if tag.startswith("I-") and (i == 0 or tags[i - 1] == "O" or tag_type(tags[i - 1]) != tag[2:]):
            out[i] = "B-" + tag[2:]
    return out


class _Layout:
    """Which column holds the word and which the tag, fixed by a file's first sentence."""

    def __init__(self, rows: list[list[str]], path: str, line: int):
        self.columns = len(rows[0])
        if self.columns < 2:
            raise XltError("expected at least two columns (word and tag)", path, line)
        self.numbered = self.columns >= 3 and _numbered(rows)
        self.word, self.tag = (1, 2) if self.numbered else (0, self.columns - 1)
        self.prefix = language_prefix(r[self.word] for r in rows)

    def parse(self, rows: list[list[str]], path: str, line: int) -> tuple[list[str], list[str]]:
        for offset, row in enumerate(rows):
            if len(row) != self.columns:
                raise XltError(f"expected {self.columns} columns like the file's first sentence, got {len(row)}",
                               path, line + offset)
        if self.numbered and not _numbered(rows):
            raise XltError("expected numbered tokens (1, 2, ... like the file's first sentence)", path, line)
        words, tags = [], []
        for offset, row in enumerate(rows):
            word, tag = row[self.word], row[self.tag]
            if self.prefix is not None:
                if not word.startswith(self.prefix):
                    raise XltError(f"expected a {self.prefix!r}-prefixed word (WikiANN layout, as in the file's "
                                   f"first sentence)", path, line + offset)
                word = word[len(self.prefix):]
            if not word.strip():   # the parse reader refuses an empty FORM alike
                raise XltError("empty word", path, line + offset)
            check_tag(tag, path, line + offset)
            words.append(word)
            tags.append(sys.intern(tag))
        return words, iob1_to_iob2(tags)


def _numbered(rows: list[list[str]]) -> bool:
    first = rows[0][0]
    return first in ("0", "1") and all(r[0] == str(int(first) + i) for i, r in enumerate(rows))


def _columns(line: str) -> list[str]:
    return line.split("\t") if "\t" in line else line.split()


def read_tagged(path: str) -> list[TaggedSentence]:
    """All sentences of a tagged file (see the module docstring for the layouts)."""
    sentences: list[TaggedSentence] = []
    layout: Optional[_Layout] = None
    rows: list[list[str]] = []
    first_line = 0

    def close() -> None:
        nonlocal layout, rows
        if rows:
            if layout is None:
                layout = _Layout(rows, path, first_line)
            sentences.append(TaggedSentence(*layout.parse(rows, path, first_line), path, first_line))
            rows = []

    for lineno, line in read_numbered_lines(path):
        if not line.strip():
            close()
        elif not rows and (COMMENT.match(line) or line.startswith("-DOCSTART-")):
            continue
        else:
            if not rows:
                first_line = lineno
            rows.append(_columns(line))
    close()
    if not sentences:
        raise XltError("no sentences in this split", path)
    return sentences


# ---- windows -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Window:
    """Words ``first .. end-1`` of a sentence, of which ``owned`` are predicted here."""

    first: int
    end: int
    owned: tuple[int, ...]


def plan_windows(lengths: Sequence[int], budget: int, owner: str = "center") -> list[Window]:
    """Cut a sentence of words with ``lengths`` subwords into windows of at most ``budget`` subwords.

    Windows are whole words (a word longer than ``budget`` keeps its first ``budget`` subwords).
    Each window after the first repeats up to ``budget // 2`` subwords of the previous one as left
    context (crosslingual-nlp's shift), and always takes at least one new word. Every word is
    owned by exactly one window: ``first`` -- the first window that holds it (crosslingual-nlp);
    ``center`` -- the window where its first subword has the most context on the cut side(s),
    ties to the earlier window. Windows owning nothing are dropped.
    """
    if budget < 1:
        raise XltError(f"max_len leaves no room for a word (windows of {budget} subwords)")
    clipped = [min(n, budget) for n in lengths]
    n = len(clipped)
    prefix = [0]
    for size in clipped:
        prefix.append(prefix[-1] + size)
    spans: list[tuple[int, int]] = []
    start = 0
    while n:
        end = start
        while end < n and prefix[end + 1] - prefix[start] <= budget:
            end += 1
        spans.append((start, end))
        if end == n:
            break
        # Left context for the next window: as many trailing words as fit in half a window while
        # leaving room for the next new word; at least one word further than this window's start.
        keep = min(budget // 2, budget - clipped[end])
        start = end
        while start - 1 > spans[-1][0] and prefix[end] - prefix[start - 1] <= keep:
            start -= 1
    best: dict[int, tuple[float, int]] = {}
    for k, (s, e) in enumerate(spans):
        for w in range(s, e):
            if owner == "first":
                score = 0.0
            else:
                left = prefix[w] - prefix[s] if s > 0 else float("inf")
                right = prefix[e] - prefix[w] - 1 if e < n else float("inf")
                score = min(left, right)
            if w not in best or score > best[w][0]:
                best[w] = (score, k)
    owned: list[list[int]] = [[] for _ in spans]
    for w in range(n):
        owned[best[w][1]].append(w)
    return [Window(s, e, tuple(o)) for (s, e), o in zip(spans, owned) if o]


# ---- head --------------------------------------------------------------------------------------
class TaggerHead(LinearHead):
    """First-subword tagger: hidden [B,T,D] -> logits [B,W,C] at ``fields["word_positions"]`` [B,W]."""

    def forward(self, hidden: Tensor, batch: Batch) -> Tensor:
        positions = batch.fields["word_positions"]
        states = hidden.gather(1, positions.unsqueeze(-1).expand(-1, -1, hidden.shape[-1]))
        return self.classifier(self.dropout(states))

    def loss(self, outputs: Tensor, batch: Batch) -> Tensor:
        return F.cross_entropy(outputs.flatten(0, 1), batch.fields["tags"].flatten(), ignore_index=IGNORE)

    def decode(self, outputs: Tensor, batch: Batch) -> list[list[tuple[int, str]]]:
        """Per row: (word index in the sentence, predicted tag) of each word the row owns."""
        best = outputs.argmax(-1).tolist()
        words = batch.fields["word_index"].tolist()
        return [[(w, self.labels[t]) for w, t in zip(row_words, row_tags) if w >= 0]
                for row_words, row_tags in zip(words, best)]


# ---- task --------------------------------------------------------------------------------------
class NERTask(Task):
    name = "ner"
    main_metric = "f1"
    prediction_suffix = ".ner"
    Settings = NERSettings
    recipe = TAGGING_RECIPE
    # WikiANN; it has no Chinese, Universal NER's Chinese GSD stands in.
    layout = DataLayout({split: {"zh": f"ner/uner/zh_gsdsimp/zh_gsdsimp-ud-{split}.iob2",
                                 "*": f"ner/wikiann/{{lang}}/{split}"} for split in ("train", "dev", "test")})

    def __init__(self, **settings) -> None:
        self.settings = settings_from(NERSettings, settings, self.name)
        self._memo = EncodingMemo()

    def read(self, path: str) -> list[TaggedSentence]:
        return read_tagged(path)

    def labels(self, train_examples: Sequence[TaggedSentence]) -> list[str]:
        """``O`` then ``B-X``, ``I-X`` for every type X seen in training, types sorted."""
        types = sorted({tag_type(t) for s in train_examples for t in s.tags} - {None})
        return ["O"] + [f"{prefix}-{kind}" for kind in types for prefix in "BI"]

    def check(self, examples: Sequence[TaggedSentence], labels: list[str]) -> None:
        known = set(labels)
        for sentence in examples:
            for i, tag in enumerate(sentence.tags):
                if tag not in known:
                    raise XltError(f"tag {tag!r} was not seen in training (known: {', '.join(labels)})",
                                   sentence.path, sentence.line + i)

    def make_head(self, d_model: int, labels: list[str]) -> TaggerHead:
        return TaggerHead(d_model, labels, self.settings.dropout)

    def batches(self, examples: Sequence[TaggedSentence], text: TextPipeline, labels: list[str], batch_size: int,
                max_len: int, shuffle: bool, generator: Optional[torch.Generator]) -> Iterator[Batch]:
        """Rows are windows (one per sentence unless it is longer than ``max_len``), ``batch_size`` per batch.

        fields: ``word_positions`` [B,W] (row position of each owned word's first subword, 0 at pads),
        ``word_index`` [B,W] (its index in the sentence, -1 at pads), ``tags`` [B,W] (label ids, -100 at pads).
        """
        self.check(examples, labels)
        tag_id = {t: i for i, t in enumerate(labels)}
        budget = max_len - special_positions(text, 1)
        rows: list[tuple[int, list[int], list[int], list[int], list[int]]] = []
        for i in example_order(len(examples), shuffle, generator):
            sentence = examples[i]
            ids, starts = self._memo.get(text, sentence, lambda: text.encode_words(sentence.words))
            lengths = [b - a for a, b in zip(starts, starts[1:] + [len(ids)])]
            for window in plan_windows(lengths, budget, self.settings.window_owner):
                row_ids, position = [], {}
                for w in range(window.first, window.end):
                    position[w] = 1 + len(row_ids)          # 1: after the opening special token
                    row_ids.extend(ids[starts[w]:starts[w] + min(lengths[w], budget)])
                rows.append((i, model_input(text, row_ids), [position[w] for w in window.owned], list(window.owned),
                             [tag_id[sentence.tags[w]] for w in window.owned]))
            while len(rows) >= batch_size:
                yield self._batch(text, rows[:batch_size])
                rows = rows[batch_size:]
        if rows:
            yield self._batch(text, rows)

    @staticmethod
    def _batch(text: TextPipeline, rows: list) -> Batch:
        example_ids, inputs, positions, words, tags = zip(*rows)
        input_ids, padding_mask = pad_model_inputs(text, inputs)
        return Batch(input_ids, padding_mask, list(example_ids),
                     {"word_positions": pad_rows(positions, 0), "word_index": pad_rows(words, -1),
                      "tags": pad_rows(tags, IGNORE)})

    def predicted_tags(self, example: TaggedSentence, rows: list[list[tuple[int, str]]]) -> list[str]:
        """One sentence's tags from its decoded windows (each word exactly once), post-processed."""
        tags: list[Optional[str]] = [None] * len(example.words)
        for row in rows:
            for w, tag in row:
                if tags[w] is not None:
                    raise ValueError(f"word {w} of {example.path}:{example.line} was predicted twice")
                tags[w] = tag
        if None in tags:
            raise ValueError(f"word {tags.index(None)} of {example.path}:{example.line} has no prediction")
        return postprocess_tags(tags) if self.settings.postprocess == "paper" else list(tags)  # type: ignore[arg-type]

    def evaluate(self, examples: Sequence[TaggedSentence], predictions: dict[int, list[list[tuple[int, str]]]],
                 labels: list[str]) -> dict[str, float]:
        self.check(examples, labels)
        predicted = [self.predicted_tags(e, predictions[i]) for i, e in enumerate(examples)]
        return span_f1([e.tags for e in examples], predicted, self.settings.f1_mode)

    def write_predictions(self, examples: Sequence[TaggedSentence], predictions: dict[int, list[list[tuple[int, str]]]],
                          labels: list[str], out: TextIO) -> None:
        """``word gold predicted`` lines, the tags as :meth:`evaluate` scores them."""
        write_tagged(out, [(e.words, e.tags, self.predicted_tags(e, predictions[i])) for i, e in enumerate(examples)])
