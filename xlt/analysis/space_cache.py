"""A directory of contextual word spaces (``xlt align contextual-word --space-cache DIR``).

A language's space -- each kept word's mean contextual vector at every layer -- costs a forward pass
over the whole corpus, and Liu et al.'s protocol asks for the same one many times: the English side
of every target language, and every side twice when several models are scored on their common pairs
(``make reproduce-liu-figures``: a first pass finds each model's pairs, the second scores the common
ones). A cached space is keyed by all it is computed from -- the weights' checksum, the model's
identity, the language, the corpus's checksum, the sentence count, the word limit, the layers, the
pooling, the batch size and the device kind -- so a hit is the very array a fresh computation would
give (float32, bit for bit).

Files: ``<dir>/<lang>-<16 hex digits of the key's sha256>.npz`` holding ``vectors`` [L, N, D]
float32, ``words`` (UTF-8, one per line) and ``key`` (its JSON, compared on reading). An unreadable
or foreign file under the name is computed again and replaced; writes are atomic, so two processes
filling the same entry at once leave one whole file. Size: layers x words x d_model x 4 bytes (a
768-wide 12-layer model's 50,000 words: 2 GB).
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from typing import Callable

import numpy as np

from xlt.utils import log
from xlt.utils.errors import XltError
from xlt.utils.textio import atomic_path

FORMAT = 1


def space_key(model_identity: dict, weights_sha256: str, lang: str, corpus_sha256: str, n_sentences: int,
              max_words: int, layers: list[int], pooling: str, batch_size: int = 32, device: str = "cpu") -> dict:
    """What a contextual space is a function of (JSON-friendly). The batch size and the device kind
    change only the last bits (other padding, other kernels), but a hit is meant to be exact."""
    return {"format": FORMAT, "model": model_identity, "weights_sha256": weights_sha256, "lang": lang,
            "corpus_sha256": corpus_sha256, "n_sentences": n_sentences, "max_words": max_words,
            "layers": list(layers), "pooling": pooling, "batch_size": batch_size, "device": device}


def _canonical(key: dict) -> str:
    return json.dumps(key, sort_keys=True, separators=(",", ":"))


def space_path(directory: str, key: dict) -> str:
    return os.path.join(directory, f"{key['lang']}-{hashlib.sha256(_canonical(key).encode()).hexdigest()[:16]}.npz")


def _read(path: str, key: dict):
    """(words, vectors) of the entry, or None when it is absent, unreadable or another key's."""
    if not os.path.exists(path):
        return None
    try:
        with np.load(path, allow_pickle=False) as entry:
            if bytes(entry["key"]).decode() != _canonical(key):
                return None
            words = bytes(entry["words"]).decode().split("\n") if entry["words"].size else []
            vectors = entry["vectors"]
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):  # UnicodeDecodeError is a ValueError
        return None
    return (words, vectors) if vectors.ndim == 3 and vectors.shape[1] == len(words) else None


def _write(path: str, key: dict, words: list[str], vectors: np.ndarray) -> None:
    as_bytes = lambda text: np.frombuffer(text.encode(), dtype=np.uint8)  # noqa: E731
    with atomic_path(path) as tmp, open(tmp, "wb") as f:  # a file object: np.savez would append ".npz"
        np.savez(f, vectors=vectors, words=as_bytes("\n".join(words)), key=as_bytes(_canonical(key)))


def cached_space(directory: str, key: dict, compute: Callable[[], tuple[list[str], np.ndarray]]
                 ) -> tuple[tuple[list[str], np.ndarray], dict]:
    """``compute()``'s (words, vectors [L, N, D] float32), read from ``directory`` when there.

    Returns the space and what the result records: ``{"file", "hit"}``.
    """
    try:  # before the work: a cache that cannot be written is found out now
        os.makedirs(directory, exist_ok=True)
    except OSError as e:
        raise XltError(f"cannot make the space cache directory ({e.strerror})", directory) from None
    path = space_path(directory, key)
    found = _read(path, key)
    if found is not None:
        log.info(f"{key['lang']} contextual words: {len(found[0]):,} from {path}")
        return found, {"file": path, "hit": True}
    words, vectors = compute()
    _write(path, key, words, np.ascontiguousarray(vectors, dtype=np.float32))
    return (words, vectors), {"file": path, "hit": False}
