"""Static word embeddings as the fine-tuning runner's "pretrained model": ``xlt finetune --model static:FILE``.

The runner asks a model for its encoder (``.model.encoder``), its sizes (``.config``), a text
pipeline per language (``.text(lang)``) and an identity (:class:`xlt.loader.kinds.FinetuneModel`);
:class:`StaticVectorsModel` answers with a BiLSTM over the file's frozen vectors
(:mod:`xlt.model.bilstm`) and xlt's own pipeline: Moses tokenization (jieba for Chinese), then BPE
with ``--codes`` when the vectors were trained on BPE'd text (a file with ``@@`` rows needs them).
Tokens are looked up by the file's words; a token with no row is a zero vector, counted per language
(:meth:`StaticVectorsModel.coverage`, in results.json) -- each example once, since tasks memoise
encodings per pipeline.

Why a model seam rather than a second runner: everything else (grid, seeds, exact resume, selection
on English dev, prediction files, results.json) is the same experiment, so it is the same code.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import torch

from xlt.embed.formats import read_word2vec
from xlt.model.bilstm import BiLSTMConfig, BiLSTMEncoder, embedding_table
from xlt.text.pipeline import TextPipeline
from xlt.text.tokenize import Tokenizer
from xlt.text.vocab import SPECIALS, UNK_ID
from xlt.utils.errors import XltError, require_file
from xlt.utils.textio import file_sha256, read_json

PREFIX = "static:"


class StaticVocab:
    """Token -> row id of the file (specials first, as xlt's vocabularies), counting misses per language."""

    def __init__(self, words: Sequence[str], sha256: str):
        self.words, self.sha256 = list(words), sha256
        self._index = {w: i + len(SPECIALS) for i, w in enumerate(self.words)}
        self.tokens: Counter = Counter()
        self.unknown: Counter = Counter()

    def encode(self, tokens: Sequence[str], lang: str) -> list[int]:
        ids = [self._index.get(t, UNK_ID) for t in tokens]
        self.tokens[lang] += len(ids)
        self.unknown[lang] += ids.count(UNK_ID)
        return ids

    def has_subwords(self) -> bool:
        return any(w.endswith("@@") for w in self.words)


@dataclass
class _Model:
    encoder: BiLSTMEncoder


@dataclass
class StaticVectorsModel:
    """What :class:`~xlt.model.xlt_run.PretrainedRun` is to the runner, for a static embedding file."""

    path: str
    codes: Optional[str]
    config: BiLSTMConfig
    vocab: StaticVocab
    model: _Model
    languages: list[str]
    step: int = 0
    _texts: dict[str, TextPipeline] = field(default_factory=dict, repr=False)

    @classmethod
    def load(cls, spec: str, codes: Optional[str], lstm_dim: int) -> "StaticVectorsModel":
        path = spec[len(PREFIX):] if spec.startswith(PREFIX) else spec
        require_file(path, "static embedding file")
        if codes is not None:
            require_file(codes, "BPE codes")
        emb = read_word2vec(path)
        vocab = StaticVocab(emb.words, file_sha256(path))
        if vocab.has_subwords() and codes is None:
            raise XltError("the file has BPE pieces (rows ending in @@): give the codes its text was segmented "
                           "with, --codes FILE", path)
        config = BiLSTMConfig(embedding_dim=emb.dim, lstm_dim=lstm_dim)
        # The LSTM's initial weights are drawn here, once per command, and every run copies them: seeded,
        # so that a run directory (named without them) holds the same results whichever command made it.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            encoder = BiLSTMEncoder(config, embedding_table(emb.vectors, len(SPECIALS)))
        return cls(path, codes, config, vocab, _Model(encoder), sidecar_languages(path))

    def text(self, lang: str) -> TextPipeline:
        if lang not in self._texts:
            self._texts[lang] = TextPipeline(lang, self.vocab, Tokenizer(lang), self.codes)  # type: ignore[arg-type]
        return self._texts[lang]

    def identity(self) -> dict[str, Any]:
        """What decides the trained model, for the run directory's hash and results.json."""
        return {"static_embeddings": os.path.abspath(self.path), "embeddings_sha256": self.vocab.sha256,
                "codes_sha256": file_sha256(self.codes) if self.codes else None, "encoder": "bilstm-max",
                "lstm_dim": self.config.lstm_dim}

    def coverage(self) -> dict[str, dict[str, Any]]:
        """Per language: tokens looked up, those without a row (zero vectors), and their share."""
        return {lang: {"tokens": n, "unknown": self.vocab.unknown[lang],
                       "unknown_fraction": round(self.vocab.unknown[lang] / n, 6) if n else None}
                for lang, n in sorted(self.vocab.tokens.items())}


def sidecar_languages(path: str) -> list[str]:
    """The languages of ``xlt embed train``'s FILE.json (its inputs), else none: targets must then be named."""
    sidecar = path + ".json"
    if not os.path.exists(sidecar):
        return []
    try:
        return list(dict.fromkeys(str(i["lang"]) for i in read_json(sidecar).get("inputs", [])))
    except (KeyError, TypeError, AttributeError, ValueError):
        return []


def coverage_markdown(coverage: dict[str, dict[str, Any]]) -> str:
    """Lines for summary.md: how many tokens of each language had no vector."""
    lines = ["", "Static embeddings: tokens without a vector (zero vectors), per language:", ""]
    for lang, c in coverage.items():
        share = "" if c["unknown_fraction"] is None else f" ({100 * c['unknown_fraction']:.1f} %)"
        lines.append(f"- {lang}: {c['unknown']} of {c['tokens']}{share}")
    return "\n".join(lines) + "\n"
