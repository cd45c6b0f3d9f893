"""A directory of contextual word spaces (``xlt align contextual-word --space-cache DIR``).

A language's space -- each kept word's mean contextual vector at every layer -- costs a forward pass
over the whole corpus, and Liu et al.'s protocol asks for the same one many times: the English side
of every target language, and every side twice when several models are scored on their common pairs
(``make reproduce-liu-figures``: a first pass finds each model's pairs, the second scores the common
ones). A cached space is keyed by all it is computed from -- the weights' checksum, the model's
identity and its directory's text-pipeline files (tokenizer settings, vocabulary, BPE codes,
config), the language, the corpus's checksum, the sentence count, the word limit, the layers, the
pooling, the batch size and the device kind -- so a hit is the array that the computation which
filled the entry gave (float32, bit for bit; the same torch on the same machine computes it again).

Files: ``<dir>/<lang>-<16 hex digits of the key's sha256>.npz`` holding ``vectors`` [L, N, D]
float32, ``words`` (UTF-8, one per line) and ``key`` (its JSON, compared on reading). An unreadable
or foreign file under the name is computed again and replaced. One process computes an entry while
others wanting it wait for it (a lock file beside it: ``make -j`` runs several targets' first
passes at once, each wanting English); writes are atomic. A cache directory that cannot be written
is an error before any work; a write that fails after it (a full disk) is a warning, the space being
computed. Size: layers x words x d_model x 4 bytes (a 768-wide 12-layer model's 50,000 words: 2 GB).
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from typing import Callable, Optional

import numpy as np

from xlt.utils import log
from xlt.utils.errors import XltError
from xlt.utils.outputs import atomic_path
from xlt.utils.rundir import exclusive_lock
from xlt.utils.textio import file_sha256

FORMAT = 1


# Files of a model directory that are not its text pipeline: weights (their checksum is taken from the
# loaded state instead), training logs and markers that change while the pipeline does not.
NOT_PIPELINE = (".pt", ".bin", ".safetensors", ".h5", ".msgpack", ".jsonl", ".lock", "lock", "finished")
PIPELINE_FILE_LIMIT = 64 << 20


def pipeline_sha256(source: str) -> Optional[str]:
    """sha256 over the names and contents of a model directory's own files (not its subfolders,
    weights or logs): an xlt run's text.json, vocab and codes, a transformers model's config and
    tokenizer files. None for ``hf:NAME`` (no directory: the name and the weights identify it)."""
    if not os.path.isdir(source):
        return None
    digest = hashlib.sha256()
    for name in sorted(os.listdir(source)):
        path = os.path.join(source, name)
        if name.endswith(NOT_PIPELINE) or not os.path.isfile(path) or os.path.getsize(path) > PIPELINE_FILE_LIMIT:
            continue
        digest.update(f"{name} {file_sha256(path)}\n".encode())
    return digest.hexdigest()


def model_identity(run) -> dict:
    """What a space needs of its :class:`~xlt.model.protocol.TextModel`: its description, the weights'
    sha256 and its text pipeline's (computed once per model: hashing mBERT's weights takes seconds)."""
    return {"model": run.describe(), "weights_sha256": run.weights_sha256(),
            "pipeline_sha256": pipeline_sha256(run.source)}


def space_key(model: dict, lang: str, corpus_sha256: str, n_sentences: int, max_words: int, layers: list[int],
              pooling: str, batch_size: int, device: str) -> dict:
    """What a contextual space is a function of (JSON-friendly; ``model``: :func:`model_identity`). The
    batch size and the device kind change only the last bits (other padding, other kernels), but a hit
    is meant to be exact."""
    return {"format": FORMAT, **model, "lang": lang, "corpus_sha256": corpus_sha256, "n_sentences": n_sentences,
            "max_words": max_words, "layers": list(layers), "pooling": pooling, "batch_size": batch_size,
            "device": device}


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

    Returns the space and what the result records: ``{"file", "hit"}`` (``file`` None when the
    entry could not be written).
    """
    try:  # before the work: a cache that cannot be written is found out now
        os.makedirs(directory, exist_ok=True)
        if not os.access(directory, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as e:
        raise XltError(f"cannot write to the space cache directory ({e.strerror})", directory) from None
    path = space_path(directory, key)
    # Held while the entry is looked up and, on a miss, computed and written: another process wanting
    # it waits, then reads it instead of computing it too.
    with exclusive_lock(path + ".lock", wait=f"{key['lang']} contextual words: waiting for another process "
                                             f"computing {path}"):
        found = _read(path, key)
        if found is not None:
            log.info(f"{key['lang']} contextual words: {len(found[0]):,} from {path}")
            return found, {"file": path, "hit": True}
        words, vectors = compute()
        try:
            _write(path, key, words, np.ascontiguousarray(vectors, dtype=np.float32))
        except OSError as e:  # the space is computed: the run goes on without its cache entry
            log.info(f"warning: could not write the space cache entry {path} ({e.strerror or e}); going on without it")
            return (words, vectors), {"file": None, "hit": False}
    return (words, vectors), {"file": path, "hit": False}
