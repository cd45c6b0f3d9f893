"""A toy sentence-classification task implementing :mod:`xlt.finetune.task`, for the runner's tests.

Files are ``sentence<TAB>label`` lines. The head is a linear layer on the first position (the
``</s>`` that opens every input), as XNLI's. Nothing here is known to the runner: if the runner
works with this task, it relies on the contract only. The CLI loads it as ``finetune_toy:ToyTask``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import synthetic
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from xlt.finetune.task import Batch, Task, TaskHead
from xlt.text.pipeline import TextPipeline, model_input
from xlt.text.vocab import PAD, SPECIALS
from xlt.utils.errors import XltError
from xlt.utils.textio import read_numbered_lines

PAD_ID = SPECIALS.index(PAD)
ANIMALS = {"cat", "dog", "bird", "child", "chat", "chien", "oiseau", "enfant"}


@dataclass
class Example:
    text: str
    label: str


class ToyHead(TaskHead):
    def __init__(self, d_model: int, n_labels: int):
        super().__init__()
        self.linear = nn.Linear(d_model, n_labels)

    def forward(self, hidden: Tensor, batch: Batch) -> Tensor:
        return self.linear(hidden[:, 0])

    def loss(self, outputs: Tensor, batch: Batch) -> Tensor:
        return F.cross_entropy(outputs, batch.fields["label"])

    def decode(self, outputs: Tensor, batch: Batch) -> list[Any]:
        return outputs.argmax(-1).tolist()


class ToyTask(Task):
    name = "toy"
    main_metric = "accuracy"

    def __init__(self, **settings: Any):
        self.settings = settings

    def read(self, path: str) -> list[Example]:
        examples = []
        for lineno, line in read_numbered_lines(path):
            parts = line.split("\t")
            if len(parts) != 2 or not parts[0].strip():
                raise XltError("expected 'sentence<TAB>label'", path, lineno)
            examples.append(Example(*parts))
        if not examples:
            raise XltError("empty split", path)
        return examples

    def labels(self, train_examples: Sequence[Example]) -> list[str]:
        return sorted({ex.label for ex in train_examples})

    def make_head(self, d_model: int, labels: list[str]) -> TaskHead:
        return ToyHead(d_model, len(labels))

    def batches(self, examples: Sequence[Example], text: TextPipeline, labels: list[str], batch_size: int,
                max_len: int, shuffle: bool, generator: torch.Generator | None) -> Iterator[Batch]:
        if batch_size == self.settings.get("fail_at_batch_size"):  # lets a test make one grid point fail
            raise RuntimeError(f"toy failure at batch size {batch_size}")
        order = torch.randperm(len(examples), generator=generator).tolist() if shuffle else range(len(examples))
        order = list(order)
        for start in range(0, len(order), batch_size):
            ids = order[start:start + batch_size]
            encoded = text.encode_lines([examples[i].text for i in ids])
            rows = [model_input(seq)[:max_len] for seq in encoded]
            width = max(map(len, rows))
            input_ids = torch.full((len(rows), width), PAD_ID, dtype=torch.long)
            for r, row in enumerate(rows):
                input_ids[r, :len(row)] = torch.tensor(row)
            pad = input_ids == PAD_ID
            label = torch.tensor([labels.index(examples[i].label) for i in ids])
            yield Batch(input_ids, pad if pad.any() else None, ids, {"label": label})

    def evaluate(self, examples: Sequence[Example], predictions: dict[int, list[Any]],
                 labels: list[str]) -> dict[str, float]:
        correct = sum(labels[predictions[i][0]] == ex.label for i, ex in enumerate(examples))
        return {"accuracy": 100.0 * correct / len(examples), "n": float(len(examples))}


def write_split(path: Path, n: int, seed: int, lang: str, variable_length: bool = False) -> Path:
    """``n`` synthetic sentences of ``lang`` labelled by whether their first noun is an animal.

    The same seed gives parallel en/fr files (translations with the same labels). With
    ``variable_length`` a random number of ``.`` tokens pads sentences to 7..27 tokens.
    """
    en, fr = synthetic.corpus(n, seed=seed)
    rng = random.Random(seed)
    lines = []
    for sentence in (en if lang == "en" else fr):
        words = sentence.split()
        noun = words[2] if lang == "en" else words[1]
        if variable_length:
            words += ["."] * rng.randrange(0, 21)
        lines.append(f"{' '.join(words)}\t{'animal' if noun in ANIMALS else 'thing'}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@dataclass
class ToyWorld:
    """A tiny pretrained en/fr run with language-specific embeddings and layer 1, and toy task files."""

    root: Path
    run: Path

    def split(self, lang: str, split: str) -> Path:
        return self.root / f"{lang}.{split}.tsv"

    def args(self, *targets: str) -> list[str]:
        """CLI arguments naming the en source files and each target's dev/test files."""
        out = ["--train", "en", str(self.split("en", "train")), "--dev", "en", str(self.split("en", "dev"))]
        for lang in targets:
            out += ["--eval", lang, str(self.split(lang, "dev")), str(self.split(lang, "test"))]
        return out


def build_toy_world(root: Path) -> ToyWorld:
    """Pretrain the tiny model once per test session (``root/done`` marks a finished build)."""
    from conftest import run_xlt
    from pretrain_fixtures import build_inputs, tiny_args

    world = ToyWorld(root, root / "run")
    if (root / "done").exists():
        return world
    inputs = build_inputs(root / "inputs")
    run_xlt("pretrain", "--run-dir", world.run, *inputs["args"], *tiny_args(10), "--sharing", "sep-emb",
            "--separate-layers", "1", "1", check=True)
    for lang in ("en", "fr"):
        for split, n, seed in (("train", 64, 10), ("dev", 24, 11), ("test", 24, 12)):
            write_split(world.split(lang, split), n, seed, lang, variable_length=True)
    (root / "done").write_text("")
    return world


def write_nli(path: Path, n: int, seed: int, lang: str) -> Path:
    """XNLI-format pairs from the synthetic grammar: the same sentence (entailment), another noun
    (contradiction), an unrelated sentence (neutral); parallel across languages for one seed."""
    en, fr = synthetic.corpus(2 * n, seed=seed)
    sentences = en if lang == "en" else fr
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        premise, label = sentences[i], ("entailment", "contradiction", "neutral")[i % 3]
        words = premise.split()
        if label == "entailment":
            hypothesis = premise
        elif label == "contradiction":
            position = 2 if lang == "en" else 1
            nouns = [pair[0 if lang == "en" else 1] for pair in synthetic.LEXICON["noun"]]
            words[position] = rng.choice([n for n in nouns if n != words[position]])
            hypothesis = " ".join(words)
        else:
            hypothesis = sentences[n + i]
        lines.append(f"{premise}\t{hypothesis}\t{label}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
