"""Dependency parsing: a biaffine parser on first subwords, MST decoding, LAS/UAS (Wu et al. 2020, §3.2).

Data: CoNLL-U (UD v2.3 in the paper). Multiword-token ranges (``1-2``) and empty nodes (``3.1``)
are skipped: the parser sees the syntactic words and their basic tree (HEAD, DEPREL).

Model (Dozat & Manning 2017, as configured in crosslingual-nlp): node 0 (ROOT) is the encoder state
at position 0 -- the special token that opens every input (xlt's ``</s>``, BERT's ``[CLS]``) -- and
word i is its first subword's state. Arc MLPs (512) and relation MLPs (128) with ELU and dropout
0.33; arc scores are biaffine (``[dep; 1]^T W head``, [B, n+1, n+1], rows are dependents), relation
scores bilinear plus linear
(``dep^T U_r head + V_r [dep; head] + b_r``). Loss: cross-entropy over each word's head plus
cross-entropy over the relations of its gold head. Decoding: a maximum spanning tree of the arc
log-probabilities with exactly one root child (:mod:`xlt.finetune.mst`), then each word's best
relation given its head.

Sentences longer than ``max_len`` subwords keep the words that fit; the others get no prediction,
count as errors in LAS/UAS, and are reported (parsing needs the whole sentence in one window).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, NamedTuple, Optional, Sequence, TextIO

import torch
import torch.nn.functional as F
from conllu.parser import DEFAULT_FIELD_PARSERS, ParseException
from torch import Tensor, nn

from xlt.finetune.inputs import (IGNORE, EncodingMemo, example_order, model_input, pad_model_inputs, pad_rows,
                                  settings_from, special_positions)
from xlt.finetune.metrics import attachment_scores, strip_subtype
from xlt.finetune.mst import decode_tree
from xlt.finetune.predictions import write_conllu
from xlt.finetune.task import Batch, DataLayout, Task, TaskHead, TaskRecipe
from xlt.text.conllu_lines import check_heads_reach_root
from xlt.text.pipeline import TextPipeline
from xlt.utils.errors import XltError
from xlt.utils.log import info
from xlt.utils.textio import read_numbered_lines

CONLLU_COLUMNS = 10
# The Universal Dependencies treebank of each language (UD v2.3 in the paper).
UD_TREEBANKS = {"en": "en_ewt", "fr": "fr_gsd", "ru": "ru_gsd", "zh": "zh_gsdsimp", "de": "de_gsd"}


@dataclass(eq=False)   # identity hashing: examples are keys of the encoding memo
class Tree:
    """One sentence's words with their gold UPOS, heads (1-based, 0 = root) and relations."""

    words: list[str]
    upos: list[str]
    heads: list[int]
    relations: list[str]
    path: str
    line: int


@dataclass
class ParseSettings:
    arc_dim: int = field(default=512, metadata={"help": "width of the arc MLPs (Dozat & Manning: 500; crosslingual-nlp: 512)"})
    label_dim: int = field(default=128, metadata={"help": "width of the relation MLPs"})
    dropout: float = field(default=0.33, metadata={"help": "dropout after the MLPs' ELU"})
    punct_upos: str = field(default="PUNCT,SYM", metadata={"scoring": True,
        "help": "comma-separated gold UPOS tags LAS/UAS skip (crosslingual-nlp: PUNCT,SYM); empty scores every word"})
    strip_subtypes: bool = field(default=True, metadata={"scoring": True,
        "help": "train and score relations without their subtype (nsubj:pass -> nsubj), as crosslingual-nlp"})
    single_root: bool = field(default=True, metadata={"help": "decode trees with exactly one child of ROOT"})


# ---- reading -----------------------------------------------------------------------------------
def read_conllu(path: str) -> list[Tree]:
    """All sentences of a CoNLL-U file; a malformed word line is an XltError naming its line."""
    trees: list[Tree] = []
    words: list[tuple[int, list[str], int]] = []      # (line, columns, head)

    def close() -> None:
        if not words:
            return
        n = len(words)
        heads = [head for _, _, head in words]
        for lineno, _, head in words:
            if not 0 <= head <= n:
                raise XltError(f"head {head} is outside the sentence (0..{n})", path, lineno)
        check_heads_reach_root(heads, [lineno for lineno, _, _ in words], path)   # a gold tree
        trees.append(Tree([c[1] for _, c, _ in words], [c[3] for _, c, _ in words], [h for _, _, h in words],
                          [c[7] for _, c, _ in words], path, words[0][0]))
        words.clear()

    for lineno, line in read_numbered_lines(path):
        if not line.strip():
            close()
            continue
        if line.startswith("#"):
            continue
        columns = line.split("\t")
        if len(columns) != CONLLU_COLUMNS:
            raise XltError(f"expected {CONLLU_COLUMNS} tab-separated columns, got {len(columns)}", path, lineno)
        try:
            word_id = DEFAULT_FIELD_PARSERS["id"](columns, 0)
        except ParseException:
            raise XltError(f"ID {columns[0]!r} is not a word number (1, 2, ...), a range (1-2) or an empty "
                           "node (3.1)", path, lineno) from None
        if not isinstance(word_id, int):      # "1-2" multiword token, "3.1" empty node
            continue
        try:
            head = DEFAULT_FIELD_PARSERS["head"](columns, 6)
        except ParseException:
            raise XltError(f"HEAD {columns[6]!r} is not a word number (0 for the root)", path, lineno) from None
        if columns[1] == "":
            raise XltError("a word with an empty FORM", path, lineno)
        if word_id != len(words) + 1:
            raise XltError(f"word id {word_id} out of order (expected {len(words) + 1})", path, lineno)
        if head is None:
            raise XltError("a word without a head (HEAD is '_')", path, lineno)
        if columns[7] in ("", "_"):
            raise XltError("a word without a relation (DEPREL is '_')", path, lineno)
        words.append((lineno, columns, head))
    close()
    if not trees:
        raise XltError("no sentences in this split", path)
    return trees


# ---- head --------------------------------------------------------------------------------------
class ParseScores(NamedTuple):
    arcs: Tensor         # [B, n+1, n+1] arc scores, rows = dependents, columns = heads; -inf at absent nodes
    dep_rel: Tensor      # [B, n+1, label_dim] relation features of nodes as dependents
    head_rel: Tensor     # [B, n+1, label_dim] relation features of nodes as heads


def _mlp(d_in: int, d_out: int, dropout: float) -> nn.Sequential:
    return nn.Sequential(nn.Linear(d_in, d_out), nn.ELU(), nn.Dropout(dropout))


def _mean_cross_entropy(logits: Tensor, targets: Tensor) -> Tensor:
    """Mean over non-ignored targets; 0 when a batch has none (never NaN)."""
    total = F.cross_entropy(logits.flatten(0, -2), targets.flatten(), ignore_index=IGNORE, reduction="sum")
    return total / (targets != IGNORE).sum().clamp(min=1)


class BiaffineHead(TaskHead):
    """hidden [B,T,D] -> :class:`ParseScores` over ROOT + the words at ``fields["word_positions"]``."""

    def __init__(self, d_model: int, labels: Sequence[str], settings: ParseSettings):
        super().__init__()
        self.labels = list(labels)
        self.single_root = settings.single_root
        self.arc_dep = _mlp(d_model, settings.arc_dim, settings.dropout)
        self.arc_head = _mlp(d_model, settings.arc_dim, settings.dropout)
        self.rel_dep = _mlp(d_model, settings.label_dim, settings.dropout)
        self.rel_head = _mlp(d_model, settings.label_dim, settings.dropout)
        # Zero-initialised biaffine weights (Dozat & Manning): uniform arc scores at the start.
        self.arc_weight = nn.Parameter(torch.zeros(settings.arc_dim + 1, settings.arc_dim))
        self.rel_bilinear = nn.Bilinear(settings.label_dim, settings.label_dim, len(self.labels))
        self.rel_linear = nn.Linear(2 * settings.label_dim, len(self.labels), bias=False)

    def forward(self, hidden: Tensor, batch: Batch) -> ParseScores:
        positions = batch.fields["word_positions"]                                   # [B, n]
        words = hidden.gather(1, positions.unsqueeze(-1).expand(-1, -1, hidden.shape[-1]))
        nodes = torch.cat([hidden[:, :1], words], dim=1)                             # [B, n+1, D]
        present = torch.arange(nodes.shape[1], device=nodes.device)[None, :] <= batch.fields["n_words"][:, None]
        dep = self.arc_dep(nodes)
        dep = torch.cat([dep, dep.new_ones(*dep.shape[:-1], 1)], dim=-1)
        arcs = torch.einsum("bdi,ij,bhj->bdh", dep, self.arc_weight, self.arc_head(nodes))
        arcs = arcs.masked_fill(~present[:, None, :], float("-inf"))
        return ParseScores(arcs, self.rel_dep(nodes), self.rel_head(nodes))

    def relation_scores(self, scores: ParseScores, heads: Tensor) -> Tensor:
        """Relation logits [B, n, R] of words 1..n attached to ``heads`` [B, n] (node indices)."""
        index = heads.clamp(min=0).unsqueeze(-1).expand(-1, -1, scores.head_rel.shape[-1])
        # fp32: features made under bf16 autocast meet the fp32 weights here, at decoding outside autocast too.
        head = scores.head_rel.gather(1, index).float()
        dep = scores.dep_rel[:, 1:].float()
        # dep^T U_r head over nn.Bilinear's parameters (and so its checkpoints), as one einsum: its own
        # forward (torch's _trilinear) took half of a parsing step's CPU time, seven times the einsum's
        # (docs/notes/2026-12-01-parser-relation-scores.md). Outside autocast, which would run the einsum
        # in bf16 where nn.Bilinear ran in fp32.
        with torch.autocast(dep.device.type, enabled=False):
            bilinear = torch.einsum("bni,rij,bnj->bnr", dep, self.rel_bilinear.weight, head) + self.rel_bilinear.bias
        return bilinear + self.rel_linear(torch.cat([dep, head], -1))

    def loss(self, outputs: ParseScores, batch: Batch) -> Tensor:
        heads, relations = batch.fields["heads"], batch.fields["relations"]
        arc_loss = _mean_cross_entropy(outputs.arcs[:, 1:], heads)
        relation_loss = _mean_cross_entropy(self.relation_scores(outputs, heads), relations)
        return arc_loss + relation_loss

    def decode(self, outputs: ParseScores, batch: Batch) -> list[tuple[list[int], list[str]]]:
        """Per row: (head of each kept word, 0 = root; its relation)."""
        log_probs = outputs.arcs.float().log_softmax(-1).detach().cpu().numpy()
        n_words = batch.fields["n_words"].tolist()
        heads = torch.zeros(outputs.arcs.shape[0], outputs.arcs.shape[1] - 1, dtype=torch.long)
        for row, n in enumerate(n_words):
            heads[row, :n] = torch.from_numpy(decode_tree(log_probs[row, :n + 1, :n + 1], self.single_root)[1:])
        best = self.relation_scores(outputs, heads.to(outputs.arcs.device)).argmax(-1).tolist()
        return [(heads[row, :n].tolist(), [self.labels[r] for r in best[row][:n]]) for row, n in enumerate(n_words)]


# ---- task --------------------------------------------------------------------------------------
class ParseTask(Task):
    name = "parse"
    main_metric = "las"
    prediction_suffix = ".conllu"
    Settings = ParseSettings
    # Wu et al. (2020) §3.2: NER's recipe on longer inputs.
    recipe = TaskRecipe(batch_size=(16, 32), encoder_lr=(2e-5, 3e-5, 5e-5), head_lr=None, epochs=10,
                        epoch_size=None, schedule="linear", max_len=256)
    layout = DataLayout({split: {lang: f"ud/{tb}/{tb}-ud-{split}.conllu" for lang, tb in UD_TREEBANKS.items()}
                         for split in ("train", "dev", "test")})

    def __init__(self, **settings) -> None:
        self.settings = settings_from(ParseSettings, settings, self.name)
        self.punct_upos = frozenset(t.strip() for t in self.settings.punct_upos.split(",") if t.strip())
        self._memo = EncodingMemo()
        self._reported: set[tuple[str, int]] = set()

    def relation(self, relation: str) -> str:
        return strip_subtype(relation) if self.settings.strip_subtypes else relation

    def read(self, path: str) -> list[Tree]:
        return read_conllu(path)

    def labels(self, train_examples: Sequence[Tree]) -> list[str]:
        """The training set's relations, sorted. A relation unseen in training is never predicted, so a
        word carrying one in dev/test always counts as a LAS error (not a reading error)."""
        return sorted({self.relation(r) for tree in train_examples for r in tree.relations})

    def make_head(self, d_model: int, labels: list[str]) -> BiaffineHead:
        return BiaffineHead(d_model, labels, self.settings)

    def batches(self, examples: Sequence[Tree], text: TextPipeline, labels: list[str], batch_size: int,
                max_len: int, shuffle: bool, generator: Optional[torch.Generator]) -> Iterator[Batch]:
        """One row per sentence: ``</s> subwords of the words that fit </s>``.

        fields: ``word_positions`` [B,n] (first subword of each kept word, 0 at pads), ``n_words`` [B],
        ``heads`` [B,n] (gold head node, -100 at pads and where the head did not fit),
        ``relations`` [B,n] (label id, -100 where the head is ignored or the relation is unknown).
        """
        budget = max_len - special_positions(text, 1)
        if budget < 1:
            raise XltError(f"max_len={max_len} leaves no room for a word")
        relation_id = {r: i for i, r in enumerate(labels)}
        order = example_order(len(examples), shuffle, generator)
        cut_sentences = cut_words = 0
        for start in range(0, len(order), batch_size):
            chosen = order[start:start + batch_size]
            inputs, positions, heads, relations = [], [], [], []
            for i in chosen:
                tree = examples[i]
                ids, starts = self._memo.get(text, tree, lambda: text.encode_words(tree.words))
                row: list[int] = []
                kept_positions: list[int] = []
                for w, begin in enumerate(starts):
                    end = starts[w + 1] if w + 1 < len(starts) else len(ids)
                    piece = ids[begin:min(end, begin + budget)]          # an over-long word keeps its start
                    if len(row) + len(piece) > budget:
                        break
                    kept_positions.append(1 + len(row))
                    row.extend(piece)
                n = len(kept_positions)
                if n < len(tree.words):
                    cut_sentences += 1
                    cut_words += len(tree.words) - n
                inputs.append(model_input(text, row))
                positions.append(kept_positions)
                gold = [h if h <= n else IGNORE for h in tree.heads[:n]]
                heads.append(gold)
                relations.append([relation_id.get(self.relation(r), IGNORE) if h != IGNORE else IGNORE
                                  for r, h in zip(tree.relations[:n], gold)])
            input_ids, padding_mask = pad_model_inputs(text, inputs)
            yield Batch(input_ids, padding_mask, chosen,
                        {"word_positions": pad_rows(positions, 0), "n_words": torch.tensor([len(p) for p in positions]),
                         "heads": pad_rows(heads, IGNORE), "relations": pad_rows(relations, IGNORE)})
        if cut_sentences and (examples[0].path, max_len) not in self._reported:
            self._reported.add((examples[0].path, max_len))
            info(f"parse: {cut_sentences} sentence(s) of {examples[0].path} are longer than max_len={max_len}; "
                 f"their last {cut_words} word(s) are left out (no loss in training, errors in LAS/UAS)")

    @staticmethod
    def predicted_trees(examples: Sequence[Tree], predictions: dict[int, list[tuple[list[int], list[str]]]]
                        ) -> tuple[list[list[Optional[int]]], list[list[Optional[str]]]]:
        """Per sentence, every word's predicted head and relation; None for the words cut by max_len."""
        predicted_heads: list[list[Optional[int]]] = []
        predicted_relations: list[list[Optional[str]]] = []
        for i, tree in enumerate(examples):
            heads, relations = predictions[i][0]
            missing = [None] * (len(tree.words) - len(heads))
            predicted_heads.append(list(heads) + missing)
            predicted_relations.append(list(relations) + missing)
        return predicted_heads, predicted_relations

    def evaluate(self, examples: Sequence[Tree], predictions: dict[int, list[tuple[list[int], list[str]]]],
                 labels: list[str]) -> dict[str, float]:
        predicted_heads, predicted_relations = self.predicted_trees(examples, predictions)
        scores = attachment_scores([t.heads for t in examples], [t.relations for t in examples],
                                   [t.upos for t in examples], predicted_heads, predicted_relations,
                                   self.punct_upos, self.settings.strip_subtypes)
        # the counts beside the scores: a LAS lowered by words cut at --max-len shows as such
        return {"las": scores.pop("las"), **scores}

    def write_predictions(self, examples: Sequence[Tree], predictions: dict[int, list[tuple[list[int], list[str]]]],
                          labels: list[str], out: TextIO) -> None:
        """The input CoNLL-U with predicted HEAD and DEPREL (relations as predicted: without subtypes when
        ``strip_subtypes``); every example of a split comes from one file."""
        write_conllu(out, examples[0].path, *self.predicted_trees(examples, predictions))
