"""Several languages' tokenized text files read as one corpus, for joint static embeddings.

Liu et al. (2020) train every model on the concatenated text of all languages. A static trainer
that makes several passes in file order (Word2Vec's learning rate decays linearly over the run)
would then see the languages one after the other, and the last one would be trained with the
smallest steps. :class:`JointCorpus` therefore interleaves the files line by line (one line of
each language in turn, the remaining languages once one runs out): the same text, in an order
where every language is seen throughout training. Nothing is prefixed: a string that occurs in two
languages is one word of the shared vocabulary (an anchor), as in the papers' joint training.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterator, Optional, Sequence

from xlt.text.tokenize import check_language
from xlt.utils.errors import XltError, require_file
from xlt.utils.textio import file_sha256, read_lines


@dataclass
class JointCorpus:
    """A restartable iterable over the sentences (token lists) of ``texts``, interleaved.

    Args:
        texts: (language, path) pairs; a path is tokenized (optionally BPE'd) text, one sentence
            a line, tokens separated by spaces; plain, ``.gz`` or ``.xz``. Blank lines are skipped.
        on_sentence: called with the number of sentences read, every 1,000 sentences (progress).
    """

    texts: Sequence[tuple[str, str]]
    on_sentence: Optional[Callable[[int], None]] = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.texts:
            raise XltError("no input text (give --text LANG FILE at least once)")
        for lang, _ in self.texts:   # a typo is refused before any file is read
            check_language(lang)
        for _, path in self.texts:
            if path == "-":   # read once to describe it, then once per epoch: a pipe gives it once
                raise XltError("--text needs a file, not standard input: the corpus is read several times")
            require_file(path, "text file")

    @property
    def files(self) -> str:
        """The input files, for a message about the corpus as a whole."""
        return ", ".join(path for _, path in self.texts)

    def __iter__(self) -> Iterator[list[str]]:
        streams = [iter(read_lines(path)) for _, path in self.texts]
        pending = 0
        while streams:
            alive = []
            for stream in streams:
                line = next(stream, None)
                if line is None:
                    continue
                alive.append(stream)
                tokens = line.split()
                if tokens:
                    yield tokens
                    pending += 1
                    if pending == 1000 and self.on_sentence is not None:
                        self.on_sentence(pending)
                        pending = 0
            streams = alive
        if pending and self.on_sentence is not None:
            self.on_sentence(pending)

    def describe(self, min_count: int = 1) -> list[dict]:
        """Per input: language, path, sentences, tokens and sha256 (one extra pass, checks each file
        is UTF-8 and not empty, and that some word occurs ``min_count`` times, before any training)."""
        out = []
        counts: Counter = Counter()
        frequent = min_count <= 1   # counted only until one word is frequent enough
        for lang, path in self.texts:
            sentences = tokens = 0
            for line in read_lines(path):
                words = line.split()
                sentences += bool(words)
                tokens += len(words)
                if not frequent:
                    counts.update(words)
                    frequent = bool(words) and max(counts[w] for w in words) >= min_count
            if sentences == 0:
                raise XltError("no sentences (every line is blank)", path)
            out.append({"lang": lang, "path": path, "sentences": sentences, "tokens": tokens,
                        "sha256": file_sha256(path)})
        if not frequent:
            raise XltError(f"no word occurs at least --min-count {min_count} times in {self.files}")
        return out
