"""What a ``--model`` value names, read from the value and the directory's files alone (no weights
loaded): its kind (an xlt run or a transformers model), the source that headers record, its depth,
and a transformers Trainer's snapshots (``checkpoint-N/``). :mod:`xlt.loader.kinds` loads it.
"""

from __future__ import annotations

import json
import os
import re

from xlt.model.hub import HF_PREFIX, hub_source
from xlt.utils.checkpoint_names import snapshot_step
from xlt.utils.errors import XltError

# What transformers' Trainer names the folder it saves at step N.
TRAINER_SNAPSHOT = re.compile(r"checkpoint-(0|[1-9][0-9]*)")


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
    if _is_transformers_dir(spec) or trainer_snapshots(spec):
        return "hf"
    raise XltError("neither an xlt run directory (no text.json and vocab) nor a transformers model directory "
                   "(no config.json with a model_type)", spec)


def _is_transformers_dir(path: str) -> bool:
    """Whether ``path`` holds a ``config.json`` naming a ``model_type`` (what ``save_pretrained`` writes)."""
    try:
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "model_type" in data


def is_hf_model(spec: str) -> bool:
    """``hf:NAME``, or a directory that is not an xlt run (no ``text.json``) and holds a transformers model
    (or a Trainer's snapshots of one). A directory that is neither is :func:`model_kind`'s one-line error;
    a path that does not exist is left to the xlt run loader, whose error names what a run directory needs."""
    if spec.startswith(HF_PREFIX):
        return True
    if os.path.isdir(spec) and not os.path.exists(os.path.join(spec, "text.json")):
        return model_kind(spec) == "hf"
    return False


def trainer_snapshots(directory: str) -> dict[int, str]:
    """A transformers Trainer's output directory: step N -> its ``checkpoint-N/`` folder, for each folder
    that holds a model; empty for anything else."""
    if not os.path.isdir(directory):
        return {}
    found = {}
    for name in os.listdir(directory):
        match = TRAINER_SNAPSHOT.fullmatch(name)
        if match and _is_transformers_dir(os.path.join(directory, name)):
            found[int(match.group(1))] = os.path.join(directory, name)
    return dict(sorted(found.items()))


def hf_model_dir(spec: str, checkpoint: str) -> str:
    """The transformers model ``--checkpoint`` picks in ``spec``: ``step-N`` is the Trainer's
    ``checkpoint-N/`` folder; best (and untrained, its architecture) is the model ``spec`` itself names.
    ``last`` is refused: a transformers model has one set of weights, and reading "last" as them would
    pass an analysis of the wrong weights off as asked for."""
    if checkpoint == "last":
        raise XltError("--checkpoint last: a transformers model has one set of weights (best: them; "
                       "untrained: its architecture freshly initialised; step-N: a Trainer's checkpoint-N "
                       "folder)", spec)
    snapshots = {} if spec.startswith(HF_PREFIX) else trainer_snapshots(spec)
    steps = ", ".join(f"step-{n}" for n in snapshots) or "none"
    step = snapshot_step(checkpoint)
    if step is None:
        if snapshots and not _is_transformers_dir(spec):
            raise XltError(f"a transformers Trainer's output holds no model of its own: choose one of its "
                           f"snapshots with --checkpoint ({steps})", spec)
        return spec
    if spec.startswith(HF_PREFIX):
        raise XltError(f"--checkpoint {checkpoint}: a Trainer's checkpoint-N folders are read from a model "
                       "directory, not from the hub", spec)
    if step not in snapshots:
        raise XltError(f"--checkpoint {checkpoint}: no checkpoint-{step} folder with a model in this directory "
                       f"(a transformers Trainer's snapshots: {steps})", spec)
    return snapshots[step]


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
