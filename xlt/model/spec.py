"""What a ``--model`` value names, read from the value and the directory's files alone (no weights
loaded): its kind (an xlt run or a transformers model), the source that headers record, and its
depth. :func:`xlt.loader.text_model.load_text_model` loads it.
"""

from __future__ import annotations

import json
import os

from xlt.model.hub import HF_PREFIX, hub_source
from xlt.utils.errors import XltError


def model_source(spec: str) -> str:
    """``hf:NAME`` as it is; a directory as its absolute path (what headers record)."""
    return spec if spec.startswith(HF_PREFIX) else os.path.abspath(spec)


def model_kind(spec: str) -> str:
    """``"xlt"`` or ``"hf"`` for a ``--model`` value; XltError for anything else.

    An xlt run is recognised by ``text.json`` + ``vocab`` (what pretraining writes beside its
    checkpoints); a transformers directory by a ``config.json`` naming a ``model_type``.
    """
    if spec.startswith(HF_PREFIX):
        if not spec[len(HF_PREFIX):].strip():
            raise XltError(f"{spec!r} names no model: write hf:NAME, e.g. hf:bert-base-multilingual-cased")
        return "hf"
    if not os.path.isdir(spec):
        raise XltError("no such model directory (give an xlt run directory, a transformers model directory "
                       "or hf:NAME)", spec)
    if all(os.path.exists(os.path.join(spec, name)) for name in ("text.json", "vocab")):
        return "xlt"
    config = os.path.join(spec, "config.json")
    if os.path.isfile(config):
        try:
            with open(config, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError):
            data = None
        if isinstance(data, dict) and "model_type" in data:
            return "hf"
    raise XltError("neither an xlt run directory (no text.json and vocab) nor a transformers model directory "
                   "(no config.json with a model_type)", spec)


def model_depth(spec: str) -> int:
    """Transformer layers of ``--model`` from its configuration alone, no weights loaded (the Makefile's
    ``MODEL=`` places Liu et al.'s layers with it): an xlt run's ``config.json``, a transformers
    config's ``num_hidden_layers`` (``hf:NAME`` through the hub or its cache)."""
    if model_kind(spec) == "xlt":
        path = os.path.join(spec, "config.json")
        try:
            with open(path, encoding="utf-8") as f:
                return int(json.load(f)["config"]["model"]["n_layers"])
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise XltError(f"no layer count in the run's config.json ({type(err).__name__}: {err})", path) from None
    import transformers

    transformers.logging.set_verbosity_error()
    name, options = hub_source(spec)
    try:
        config = transformers.AutoConfig.from_pretrained(name, **options)
        return int(config.num_hidden_layers)
    except (OSError, ValueError, AttributeError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise XltError(f"cannot read the model's config ({first})", spec) from None
