"""Text through a run's pipeline once for every snapshot: a :class:`~xlt.model.protocol.TextModel`
whose tokenization is memoised, and the memo kept in ``TRACKDIR/cache``.

Every snapshot of a run shares its vocabulary, BPE codes and tokenizer settings, so the ids of a
sentence never change from one snapshot to the next; Moses costs about 0.2 ms a line and BPE as much
again, which across a dozen snapshots and four data sets adds up. The memo file is keyed by the
run's text pipeline (:func:`pipeline_key`: text.json, vocab and codes, not config.json, which a
resumed run rewrites), so another vocabulary never reads it.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from typing import Any, Sequence

from xlt.model.xlt_run import read_text_settings
from xlt.utils import log
from xlt.utils.outputs import atomic_path, make_directory
from xlt.utils.textio import file_sha256

FORMAT = 1


def pipeline_key(run: str) -> str:
    """sha256 over the files that turn a run's text into ids: text.json, vocab and the codes it names."""
    digest = hashlib.sha256(f"xlt-track-text/{FORMAT}\n".encode())
    names = ["text.json", "vocab"]
    names += sorted({s["codes"] for s in read_text_settings(run).values() if s.get("codes")})
    for name in names:
        digest.update(f"{name} {file_sha256(os.path.join(run, name))}\n".encode())
    return digest.hexdigest()


class TextMemo:
    """(method, lang, input) -> output of the run's pipeline, loaded from and saved to one cache file."""

    def __init__(self, cache_dir: str, run: str):
        self.path = os.path.join(make_directory(cache_dir), f"text-{pipeline_key(run)[:16]}.pkl")
        self.table: dict[tuple, Any] = {}
        self.added = 0
        if os.path.exists(self.path):
            try:
                with open(self.path, "rb") as f:
                    self.table = pickle.load(f)
            except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ValueError):
                self.table = {}  # a foreign or cut file: computed again and replaced

    def save(self) -> None:
        """Write the memo (atomically: two trackers saving at once leave one whole file)."""
        if not self.added:
            return
        try:
            with atomic_path(self.path) as tmp, open(tmp, "wb") as f:
                pickle.dump(self.table, f, protocol=pickle.HIGHEST_PROTOCOL)
            self.added = 0
        except Exception as e:  # the tokens are computed: the tracker goes on without the cache
            log.info(f"warning: could not write the text cache {self.path} ({e}); going on without it")

    def get(self, key: tuple, compute):
        if key not in self.table:
            self.table[key] = compute()
            self.added += 1
        return self.table[key]


class MemoText:
    """A TextModel (an xlt run, its snapshot or its random encoder) whose text pipeline answers from
    a :class:`TextMemo`; everything else is the model's own."""

    def __init__(self, model, memo: TextMemo):
        self._model, self._memo = model, memo

    def __getattr__(self, name: str):
        return getattr(self._model, name)

    def encode_lines(self, lang: str, lines: Sequence[str]) -> list[list[int]]:
        missing = [line for line in dict.fromkeys(lines) if ("lines", lang, line) not in self._memo.table]
        if missing:  # one call for all of them: the pipeline applies BPE to a batch at once
            for line, ids in zip(missing, self._model.encode_lines(lang, missing)):
                self._memo.get(("lines", lang, line), lambda ids=ids: ids)
        return [list(self._memo.table["lines", lang, line]) for line in lines]

    def encode_words(self, lang: str, words: Sequence[str]) -> tuple[list[int], list[int]]:
        ids, starts = self._memo.get(("words", lang, tuple(words)), lambda: self._model.encode_words(lang, words))
        return list(ids), list(starts)

    def split_words(self, lang: str, line: str) -> list[str]:
        return list(self._memo.get(("split", lang, line), lambda: self._model.split_words(lang, line)))
