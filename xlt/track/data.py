"""The data every snapshot is measured on, read (and cut to size) once per invocation.

NER files are prepared once per tracking directory: the first sentences of each split, copied into
``TRACKDIR/data`` in the layout ``xlt finetune --data-dir`` reads, so every snapshot fine-tunes on
the same files (and xlt finetune's run hashes see the same checksums).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

from xlt.analysis.align_parallel import read_parallel
from xlt.analysis.dictionaries import read_muse_dictionary
from xlt.finetune.config import default_path
from xlt.track.config import TrackConfig
from xlt.utils.errors import XltError, require_file
from xlt.utils.outputs import atomic_output
from xlt.utils.textio import read_lines


@dataclass
class TrackData:
    """Sentences of the source and target languages, and the prepared NER layout."""

    parallel: Optional[tuple[list[str], list[str]]] = None
    tatoeba: Optional[tuple[list[str], list[str]]] = None
    dictionary_pairs: list[tuple[str, str]] = field(default_factory=list)
    ner_dir: Optional[str] = None

    def identity_sentences(self) -> Optional[tuple[list[str], list[str]]]:
        """The sentences of the language-identity signal: the parallel ones, else Tatoeba's."""
        return self.parallel or self.tatoeba


def first_blocks(path: str, n: int) -> str:
    """The first ``n`` blank-line separated blocks of a CoNLL-style file (sentences), as text."""
    blocks, current = [], []
    for line in read_lines(require_file(path, "NER file")):
        if line.strip():
            current.append(line)
            continue
        if current:
            blocks.append("\n".join(current))
            current = []
            if len(blocks) == n:
                break
    if current and len(blocks) < n:
        blocks.append("\n".join(current))
    if not blocks:
        raise XltError("empty NER file", path)
    return "\n\n".join(blocks) + "\n\n"


def prepare_ner(source_dir: str, target_dir: str, langs: list[str], source_lang: str, train_sentences: int,
                eval_sentences: int) -> str:
    """Copy each language's NER splits, cut to size, into ``target_dir`` (same layout); returns it.
    A file already there is kept: the data of a tracking directory never changes under its records."""
    for lang in langs:
        for split in (("train", "dev", "test") if lang == source_lang else ("dev", "test")):
            src = default_path("ner", source_dir, lang, split)
            dst = default_path("ner", target_dir, lang, split)
            if os.path.exists(dst):
                continue
            n = train_sentences if split == "train" else eval_sentences
            text = first_blocks(src, n)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with atomic_output(dst) as f:
                f.write(text)
    return target_dir


def load_data(cfg: TrackConfig, measures: list[str]) -> TrackData:
    """Read what the chosen measures need (each file once, cut to --max-sentences)."""
    data = TrackData()
    if cfg.parallel is not None and {"cka", "lang_id", "word_p1", "word_mrr"} & set(measures):
        data.parallel = read_parallel(*cfg.parallel, limit=cfg.max_sentences)
    if cfg.tatoeba is not None and {"sentence_p1", "lang_id"} & set(measures):
        data.tatoeba = read_parallel(*cfg.tatoeba, limit=cfg.max_sentences)
    if cfg.dictionary is not None and {"word_p1", "word_mrr"} & set(measures):
        data.dictionary_pairs = read_muse_dictionary(cfg.dictionary)
    return data
