"""Raw text of one language -> an xlt model's subword ids, exactly as its training data was made
(Moses tokenization, then BPE, then the vocabulary), and the model's input layout around them.

An xlt run (:class:`~xlt.model.xlt_run.PretrainedRun`) and static word vectors
(:class:`~xlt.loader.static_vectors.StaticVectorsModel`) build one per language; the fine-tuning
tasks encode through it.
"""

from __future__ import annotations

import functools
from typing import Optional, Sequence

from xlt.text.bpe import BPE, WORD_CACHE_LIMIT
from xlt.text.tokenize import Tokenizer
from xlt.text.vocab import EOS_ID, UNK_ID, Vocabulary


def model_input(*segments: Sequence[int]) -> list[int]:
    """The model's input layout for one or more segments: ``</s> a </s> [b </s>]``.

    Pretraining streams separate sentences with ``</s>``, so it also opens and closes every input,
    as in XLM; position 0 (a ``</s>``) is the "first token" that sentence classifiers read.
    """
    out = [EOS_ID]
    for seg in segments:
        out.extend(seg)
        out.append(EOS_ID)
    return out


class TextPipeline:
    """Raw text of one language -> subword ids, exactly as the run's training data was made."""

    def __init__(self, lang: str, vocab: Vocabulary, tokenizer: Tokenizer, codes: Optional[str]):
        self.lang, self.vocab, self.tokenizer = lang, vocab, tokenizer
        self.bpe = BPE(codes) if codes else None
        # encode_words tokenizes word by word, and Moses' normaliser costs ~0.2 ms a call: averaging a
        # corpus's contextual word vectors spent two thirds of its time there, on a few thousand
        # distinct words repeated (Zipf). Tokenizing is a pure function of the word.
        self._word_tokens = functools.lru_cache(maxsize=WORD_CACHE_LIMIT)(tokenizer.tokenize)

    def subwords(self, tokenized_lines: Sequence[str]) -> list[list[str]]:
        """Already tokenized lines -> their subword tokens (``@@``-marked as in the BPE'd corpus)."""
        lines = self.bpe.apply(list(tokenized_lines)) if self.bpe else list(tokenized_lines)
        return [line.split() for line in lines]

    def encode_lines(self, lines: Sequence[str]) -> list[list[int]]:
        """Raw lines -> model ids (no special tokens added)."""
        tokenized = [self.tokenizer.tokenize(line) for line in lines]
        return [self.vocab.encode(sub, self.lang) for sub in self.subwords(tokenized)]

    def encode_words(self, words: Sequence[str]) -> tuple[list[int], list[int]]:
        """Pre-tokenized words (CoNLL) -> (ids, index of each word's first subword).

        Each word is normalised like running text and segmented on its own, so a word is never
        merged with its neighbours; a word the tokenizer reduces to nothing becomes ``<unk>``.
        """
        per_word = self.subwords([self._word_tokens(w) for w in words])
        ids: list[int] = []
        starts: list[int] = []
        for sub in per_word:
            starts.append(len(ids))
            ids.extend(self.vocab.encode(sub, self.lang) if sub else [UNK_ID])
        return ids, starts


