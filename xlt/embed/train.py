"""``xlt embed train``: static embeddings of several languages in one space, and their description.

Writes OUTPUT (word2vec text format, atomically) and OUTPUT.json beside it::

    {"format": "xlt-embeddings", "method": "glove", "config": {...}, "inputs": [{"lang": "en",
     "path": ..., "sentences": ..., "tokens": ..., "sha256": ...}, ...], "vocabulary": V, "dim": D,
     "shared_space": "joint training on the interleaved text of all languages, no language prefix",
     "versions": {...}, "seconds": ..., "loss": [...] (glove)}
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import asdict
from typing import Sequence

from xlt import __version__
from xlt.embed.config import GLOVE_ONLY, WORD2VEC_ONLY, EmbedConfig
from xlt.embed.corpus import JointCorpus
from xlt.embed.formats import write_word2vec
from xlt.utils import log
from xlt.utils.errors import XltError
from xlt.utils.outputs import check_output_paths, output_directory, write_json

FORMAT = "xlt-embeddings"
SHARED_SPACE = "joint training on the interleaved text of all languages, no language prefix (Liu et al. 2020)"


def _versions(method: str) -> dict:
    import numpy
    import scipy
    import torch

    versions = {"xlt": __version__, "python": platform.python_version(), "numpy": numpy.__version__,
                "scipy": scipy.__version__, "torch": torch.__version__}
    if method == "word2vec":
        import gensim

        versions["gensim"] = gensim.__version__
    return versions


def relevant_settings(config: EmbedConfig) -> dict:
    """The config without the other method's settings (they played no part)."""
    other = GLOVE_ONLY if config.method == "word2vec" else WORD2VEC_ONLY
    return {k: v for k, v in asdict(config).items() if k not in other}


def description_path(output: str) -> str:
    """Where the JSON description of an embedding file goes: ``OUTPUT.json``."""
    return output + ".json"


def train_embeddings(texts: Sequence[tuple[str, str]], output: str, config: EmbedConfig) -> dict:
    """Train ``config.method`` on ``texts`` ((lang, path) pairs) and write OUTPUT and OUTPUT.json.

    Returns the description (also written to OUTPUT.json).
    """
    output = os.fspath(output)
    if output == "-":   # the description goes beside the vectors, and standard output has no beside
        raise XltError("embed train needs -o FILE (FILE.json describes it), not standard output")
    check_output_paths(output, description_path(output))
    langs = [lang for lang, _ in texts]
    if len(set(langs)) != len(langs):
        raise XltError(f"a language is given twice in --text ({', '.join(langs)}); concatenate its files first")
    corpus = JointCorpus(list(texts))
    inputs = corpus.describe(config.min_count)   # its errors before the start line: an error is the only line
    log.info("embed: " + ", ".join(f"{i['lang']} {i['sentences']:,} sentences" for i in inputs)
             + f"; {config.method}, dim {config.dim}, window {config.window}, {config.epochs} epochs, "
             f"{config.workers} workers")
    start = time.time()
    if config.method == "word2vec":
        from xlt.embed.word2vec import train_word2vec

        words, vectors, info = train_word2vec(corpus, config, output_directory(output))
    else:
        from xlt.embed.glove import train_glove

        words, vectors, info = train_glove(corpus, config)
    seconds = round(time.time() - start, 1)
    write_word2vec(output, words, vectors)
    description = {"format": FORMAT, "method": config.method, "file": os.path.basename(output),
                   "vocabulary": len(words), "dim": int(vectors.shape[1]), "shared_space": SHARED_SPACE,
                   "config": relevant_settings(config), "inputs": inputs, "training": info, "seconds": seconds,
                   "versions": _versions(config.method)}
    write_json(description_path(output), description)
    log.info(f"embed: {len(words):,} words x {vectors.shape[1]} -> {output} ({seconds} s)")
    return description
