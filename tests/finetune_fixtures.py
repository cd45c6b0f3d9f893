"""Tiny real text pipelines and encoders for the fine-tuning task tests.

The BPE codes merge only a few pairs, so most words split into several subwords (``zebra`` ->
``z@@ e@@ b@@ r@@ a``) while ``cat`` stays whole: first-subword alignment is tested on words of
every length. The vocabulary holds every subword of the given words, so ids are never ``<unk>``.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from pathlib import Path
from typing import Iterable, Iterator

import torch
from torch import nn

from xlt.finetune.task import Batch, Task
from xlt.model.config import EncoderConfig
from xlt.model.encoder import Encoder
from xlt.text.bpe import BPE
from xlt.text.pipeline import TextPipeline
from xlt.text.tokenize import Tokenizer
from xlt.text.vocab import Vocabulary

CODES = "c a 10\nca t</w> 9\nd o 8\nt h 7\nth e</w> 6\n"


def make_pipeline(root: Path, words: Iterable[str], lang: str = "en") -> TextPipeline:
    """A TextPipeline over ``words`` (lower-case Latin letters) with the codes above."""
    root.mkdir(parents=True, exist_ok=True)
    codes = root / "codes"
    codes.write_text(CODES, encoding="utf-8")
    pieces = BPE(codes).apply([" ".join(sorted(set(words)))])[0].split()
    vocab = Vocabulary.from_counts(dict(Counter(pieces)), [lang])
    return TextPipeline(lang, vocab, Tokenizer(lang), str(codes))


def tiny_encoder(vocab_size: int, seed: int = 0) -> Encoder:
    torch.manual_seed(seed)
    return Encoder(EncoderConfig.preset("tiny", vocab_size=vocab_size, languages=["en"], dropout=0.0,
                                        attention_dropout=0.0))


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Tiny models gain nothing from threads, and on a shared, loaded machine two threads can run
    ten times slower than one (OpenMP workers waiting on each other)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@one_thread()
def train_steps(task: Task, head: nn.Module, encoder: Encoder, batches: list[Batch], steps: int,
                lr: float = 3e-3) -> list[float]:
    """Full-batch Adam on encoder + head; the loss of every step."""
    optimizer = torch.optim.Adam(list(encoder.parameters()) + list(head.parameters()), lr=lr)
    encoder.train()
    head.train()
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        total = 0.0
        for batch in batches:
            hidden = encoder(batch.input_ids, "en", batch.padding_mask).last_hidden_state
            loss = head.loss(head(hidden, batch), batch)
            loss.backward()
            total += loss.item()
        optimizer.step()
        losses.append(total)
    return losses


@one_thread()
def predict(head: nn.Module, encoder: Encoder, batches: list[Batch], bf16: bool = False) -> dict[int, list]:
    """What the runner hands ``Task.evaluate``: decoded rows per example id, in batch order.

    With ``bf16``, the forward pass runs under bf16 autocast and decoding outside it, as the runner
    does on a GPU.
    """
    encoder.eval()
    head.eval()
    out: dict[int, list] = {}
    with torch.no_grad():
        for batch in batches:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                outputs = head(encoder(batch.input_ids, "en", batch.padding_mask).last_hidden_state, batch)
            for example_id, row in zip(batch.example_ids, head.decode(outputs, batch)):
                out.setdefault(example_id, []).append(row)
    return out
