"""XNLI: premise/hypothesis pairs -> entailment, neutral or contradiction (Wu et al. 2020, §3.2).

Data: one pair per line, ``premise<TAB>hypothesis<TAB>label``, no header: the English training
file ``data/nli/mnli/mnli_20k.tsv`` and ``data/xnli/{dev,test}-LANG.tsv``.

Input: ``</s> premise </s> hypothesis </s>`` (:func:`~xlt.finetune.inputs.model_input`; a Hugging Face
model's own pair layout, e.g. ``[CLS] premise [SEP] hypothesis [SEP]``), cut to ``max_len`` by dropping the last subword of the longer segment (the hypothesis on a tie) until
it fits. Head: the state at position 0 (the "first token", XLM's; or the mean of the input's states,
``pooling mean``) -> dropout -> linear softmax classifier; or, ``pooling pair-max`` (the XNLI paper's
BiLSTM-max baseline, the default with ``--model static:FILE``), u and v max-pooled over the premise's
and the hypothesis's positions, [u, v, |u-v|, u*v] -> MLP (:class:`xlt.model.bilstm.PairMaxHead`).
Metric: accuracy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Optional, Sequence, TextIO

import torch
import torch.nn.functional as F
from torch import Tensor

from xlt.finetune.inputs import EncodingMemo, example_order, model_input, pad_model_inputs, settings_from, special_positions
from xlt.finetune.metrics import accuracy
from xlt.finetune.predictions import write_labels
from xlt.finetune.task import Batch, DataLayout, LinearHead, Task, TaskHead, TaskRecipe
from xlt.model.bilstm import PairMaxHead
from xlt.text.nli_lines import NLI_LABELS, nli_columns
from xlt.text.pipeline import TextPipeline
from xlt.utils.errors import XltError
from xlt.utils.textio import read_numbered_lines


@dataclass(eq=False)   # identity hashing: examples are keys of the encoding memo
class NLIPair:
    premise: str
    hypothesis: str
    label: str
    path: str
    line: int


@dataclass
class XNLISettings:
    dropout: float = field(default=0.1, metadata={"help": "dropout before the classifier (XLM: 0.1)"})
    pooling: str = field(default="first", metadata={
        "help": "what the classifier reads: first (the state at position 0, XLM's) or mean (the mean state of "
                "the input: small models, whose first token learned nothing in pretraining, fit it far sooner) or "
                "pair-max (premise and hypothesis max-pooled apart, [u, v, |u-v|, u*v] -> MLP: the XNLI paper's "
                "BiLSTM-max baseline; the default with --model static:FILE)"})
    mlp_dim: int = field(default=128, metadata={"help": "hidden units of the pair-max MLP"})

    def __post_init__(self) -> None:
        if self.pooling not in POOLINGS:
            raise XltError(f"xnli setting pooling must be one of {', '.join(POOLINGS)}, got {self.pooling!r}")


POOLINGS = ("first", "mean", "pair-max")


def truncate_pair(a: list[int], b: list[int], budget: int) -> tuple[list[int], list[int]]:
    """Drop last subwords of the longer of ``a``/``b`` (``b`` on a tie) until ``len(a)+len(b) <= budget``."""
    excess = len(a) + len(b) - budget
    if excess <= 0:
        return a, b
    if budget < 2:
        raise XltError(f"max_len leaves {max(budget, 0)} subword(s) for a pair after its special tokens; each segment needs one")
    # Longest-first, one subword at a time, in closed form: first even the lengths out, then cut both.
    na, nb = len(a), len(b)
    even = min(excess, abs(na - nb))
    if na > nb:
        na -= even
    else:
        nb -= even
    rest = excess - even
    na, nb = na - rest // 2, nb - (rest - rest // 2)
    return a[:na], b[:nb]


class ClassifierHead(LinearHead):
    """Sentence-pair classifier: hidden [B,T,D] -> pooled [B,D] -> logits [B,C]."""

    def __init__(self, d_model: int, labels: Sequence[str], dropout: float, pooling: str = "first"):
        super().__init__(d_model, labels, dropout)
        self.pooling = pooling

    def forward(self, hidden: Tensor, batch: Batch) -> Tensor:
        if self.pooling == "first":
            pooled = hidden[:, 0]
        elif batch.padding_mask is None:
            pooled = hidden.mean(1)
        else:
            kept = (~batch.padding_mask).unsqueeze(-1).to(hidden.dtype)  # [B,T,1]
            pooled = (hidden * kept).sum(1) / kept.sum(1)
        return self.classifier(self.dropout(pooled))

    def loss(self, outputs: Tensor, batch: Batch) -> Tensor:
        return F.cross_entropy(outputs, batch.fields["label"])

    def decode(self, outputs: Tensor, batch: Batch) -> list[str]:
        return [self.labels[i] for i in outputs.argmax(-1).tolist()]


class XNLITask(Task):
    name = "xnli"
    main_metric = "accuracy"
    prediction_suffix = ".tsv"
    Settings = XNLISettings
    # Wu et al. (2020) §3.2, following XLM's recipe (the code they used): Adam with fixed learning rates,
    # an "epoch" of 20,000 training pairs (XLM's --epoch_size), 200 epochs.
    recipe = TaskRecipe(batch_size=(4, 8), encoder_lr=(1.25e-6, 2.5e-6, 5e-6), head_lr=(5e-6, 2.5e-5, 1.25e-4),
                        epochs=200, epoch_size=20000, schedule="constant", max_len=256)
    # English trains on MNLI's 20k sample; every language has XNLI's dev and test sets.
    layout = DataLayout({"train": {"en": "nli/mnli/mnli_20k.tsv"}, "dev": "xnli/dev-{lang}.tsv",
                         "test": "xnli/test-{lang}.tsv"})
    pair_inputs = True

    @classmethod
    def settings_for_model(cls, kind: str, settings: Mapping[str, Any], model: str) -> dict[str, Any]:
        """Static vectors: the XNLI paper's BiLSTM-max head unless asked otherwise. A transformers model
        cannot take pair-max, which reads xlt's ``</s>``-delimited segments."""
        if kind == "static" and "pooling" not in settings:
            return {**settings, "pooling": "pair-max"}
        if kind == "hf" and settings.get("pooling") == "pair-max":
            raise XltError("xnli pooling pair-max reads xlt's </s>-delimited segments; with a transformers "
                           "model use pooling first or mean", model)
        return dict(settings)

    def __init__(self, **settings) -> None:
        self.settings = settings_from(XNLISettings, settings, self.name)
        if "mlp_dim" in settings and self.settings.pooling != "pair-max":   # else unused, yet in the run hash
            raise XltError(f"xnli setting mlp_dim sizes the pair-max head's MLP; with pooling {self.settings.pooling} "
                           "it plays no part: leave it out")
        self._memo = EncodingMemo()

    def read(self, path: str) -> list[NLIPair]:
        pairs = []
        for lineno, line in read_numbered_lines(path):
            premise, hypothesis, label = nli_columns(line, path, lineno)
            pairs.append(NLIPair(premise, hypothesis, label, path, lineno))
        if not pairs:
            raise XltError("no examples in this split", path)
        return pairs

    def labels(self, train_examples: Sequence[NLIPair]) -> list[str]:
        # The label set is the task's, not the data's: a head always has the three classes.
        return list(NLI_LABELS)

    def make_head(self, d_model: int, labels: list[str]) -> TaskHead:
        if self.settings.pooling == "pair-max":
            return PairMaxHead(d_model, labels, self.settings.mlp_dim, self.settings.dropout)
        return ClassifierHead(d_model, labels, self.settings.dropout, self.settings.pooling)

    def batches(self, examples: Sequence[NLIPair], text: TextPipeline, labels: list[str], batch_size: int,
                max_len: int, shuffle: bool, generator: Optional[torch.Generator]) -> Iterator[Batch]:
        label_id = {label: i for i, label in enumerate(labels)}
        order = example_order(len(examples), shuffle, generator)
        for start in range(0, len(order), batch_size):
            chosen = order[start:start + batch_size]
            rows = []
            for i in chosen:
                pair = examples[i]
                a, b = self._memo.get(text, pair, lambda: text.encode_lines([pair.premise, pair.hypothesis]))
                if not a or not b:   # the model would read the pair as its special tokens alone
                    raise XltError(f"the {'hypothesis' if a else 'premise'} is no token at all once tokenized as "
                                   f"{text.lang} (xlt's tokenizer blanks Unicode's "
                                   "control, format, private-use and unassigned characters; give Fake-English "
                                   "under the code fake)", pair.path, pair.line)
                rows.append(model_input(text, *truncate_pair(a, b, max_len - special_positions(text, 2))))
            input_ids, padding_mask = pad_model_inputs(text, rows)
            gold = torch.tensor([label_id[examples[i].label] for i in chosen], dtype=torch.long)
            yield Batch(input_ids, padding_mask, chosen, {"label": gold})

    def evaluate(self, examples: Sequence[NLIPair], predictions: dict[int, list[str]],
                 labels: list[str]) -> dict[str, float]:
        predicted = [predictions[i][0] for i in range(len(examples))]
        return {"accuracy": accuracy([e.label for e in examples], predicted)}

    def write_predictions(self, examples: Sequence[NLIPair], predictions: dict[int, list[str]], labels: list[str],
                          out: TextIO) -> None:
        """``id gold predicted`` lines (see :mod:`xlt.finetune.predictions`); every line of an XNLI file is a
        pair, so ``id`` is also the line number minus one."""
        write_labels(out, [e.label for e in examples], [predictions[i][0] for i in range(len(examples))])
