"""A fine-tuning run's encoder for the analyses (``--finetuned RUN``): what fine-tuning did to the
representations, measured with the same commands as the pretrained model's (``xlt extract``, ``xlt
align``), e.g. how much of the languages' alignment survives fine-tuning on English.

A run directory of ``xlt finetune`` keeps only the tensors it trained (``best-epoch{E}.pt``); the
frozen ones (language-specific parameters, ``--freeze-bottom``'s layers) are the pretrained run's. So
the run is read on top of the model it was fine-tuned from, and that model is checked: its
checkpoint's sha256 must be the one the run's config.json recorded. The task head is left out (the
analyses read the encoder's states); the masked-LM head keeps its pretrained transform and bias, and
its output matrix is the token table (tied), as fine-tuned.
"""

from __future__ import annotations

import copy
import os

import torch

from xlt.model.checkpoint_io import load_checkpoint
from xlt.model.protocol import TextModel
from xlt.model.xlt_run import PretrainedRun
from xlt.utils.errors import XltError
from xlt.utils.textio import file_sha256, read_json

# What xlt.loader.kinds records for the no-pretraining control: the best checkpoint's architecture,
# re-initialised with seed 0.
UNTRAINED = "untrained"


def _field(data: object, *keys: str) -> object:
    """``data[k1][k2]...``, None where a level is missing or not an object (a damaged file)."""
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def chosen_run(path: str) -> str:
    """A run directory as it is; an output directory of ``xlt finetune`` (its results.json): the run of
    the selected setting's first seed, what a table's cell is read from first. XltError when that run
    did not finish (another seed's would be another model than the one asked for)."""
    results_path = os.path.join(path, "results.json")
    if os.path.isfile(os.path.join(path, "config.json")) or not os.path.isfile(results_path):
        return path
    results = read_json(results_path, "fine-tuning results")
    setting = _field(results, "summary", "selected", "grid_point")
    runs = _field(results, "runs")
    first = next((run for run in runs if isinstance(run, dict) and run.get("grid_point") == setting),
                 None) if setting is not None and isinstance(runs, list) else None
    if first is None or not isinstance(first.get("dir"), str):
        raise XltError("no run of the selected setting to read", results_path)
    # "done" whether this invocation trained it or an earlier one did ("worked" says which)
    if first.get("status") != "done":
        raise XltError(f"the selected setting's first run ({first['dir']}) did not finish "
                       f"({first.get('status')}): give a run directory", results_path)
    return os.path.join(path, first["dir"])


def _recorded_model(run_dir: str) -> dict:
    path = os.path.join(run_dir, "config.json")
    if not os.path.isfile(path):
        raise XltError("neither a run directory of xlt finetune (no config.json) nor its output directory "
                       "(no results.json)", run_dir)
    model = _field(read_json(path, "fine-tuning run description"), "config", "model")
    if not isinstance(model, dict) or "checkpoint_sha256" not in model:
        raise XltError("not a run fine-tuned from an xlt run (its config.json records no checkpoint_sha256)", path)
    return model


def with_finetuned_encoder(pretrained: TextModel, checkpoint: str, run_dir: str) -> TextModel:
    """``pretrained`` (an xlt run loaded at ``checkpoint``) with the encoder of ``run_dir``'s best epoch
    (``run_dir``: a run, or an output directory, :func:`chosen_run`);
    XltError when the run is unfinished, its weights were not kept, or it was fine-tuned from another
    model or checkpoint."""
    run_dir = chosen_run(os.fspath(run_dir))
    if not isinstance(pretrained, PretrainedRun):
        raise XltError("--finetuned reads runs fine-tuned from an xlt run directory; --model is a "
                       f"{pretrained.describe()['kind']} model", pretrained.source)
    recorded = _recorded_model(run_dir)
    started_from = recorded.get("checkpoint", "best")
    weights = "best" if started_from == UNTRAINED else started_from
    if checkpoint != weights:
        source = ("the no-pretraining control (the best checkpoint's architecture, re-initialised)"
                  if started_from == UNTRAINED else f"fine-tuned from the {weights} checkpoint")
        raise XltError(f"this run is {source}: give --checkpoint {weights}", run_dir)
    checkpoint_file = os.path.join(pretrained.path, "checkpoints", f"{weights}.pt")
    if not os.path.isfile(checkpoint_file) or file_sha256(checkpoint_file) != recorded["checkpoint_sha256"]:
        raise XltError(f"this run was fine-tuned from another model: its config.json records a {weights} checkpoint "
                       f"with sha256 {recorded['checkpoint_sha256'][:12]}..., which {checkpoint_file} is not "
                       "(give the --model it was fine-tuned from)", run_dir)
    # train.json is written when training ends (xlt.finetune.runfiles; not imported: fine-tuning loads
    # its models through this package).
    if not os.path.isfile(os.path.join(run_dir, "train.json")):
        raise XltError("the fine-tuning run has not finished training (no train.json)", run_dir)
    summary = read_json(os.path.join(run_dir, "train.json"), "fine-tuning summary")
    best_file = summary.get("best_file") if isinstance(summary, dict) else None
    if not isinstance(best_file, str) or os.sep in best_file:
        raise XltError("the fine-tuning summary names no best-epoch file", os.path.join(run_dir, "train.json"))
    best = os.path.join(run_dir, best_file)
    if not os.path.isfile(best):
        raise XltError("the run's weights were not kept (xlt finetune --no-keep-weights)", run_dir)
    state = load_checkpoint(best)
    trained = state.get("encoder")
    if not isinstance(trained, dict):
        raise XltError("cannot read the fine-tuned weights (no encoder tensors)", best)

    base = pretrained.random_encoder_like(seed=0) if started_from == UNTRAINED else pretrained.model
    model = copy.deepcopy(base)
    params = dict(model.encoder.named_parameters())
    with torch.no_grad():
        for name, tensor in trained.items():
            if name not in params or params[name].shape != tensor.shape:
                raise XltError(f"the fine-tuned weights do not fit the model: {name} "
                               f"{tuple(tensor.shape)}", best)
            params[name].copy_(tensor)
    device = next(pretrained.model.parameters()).device
    return pretrained.with_model(model.to(device).eval(),
                                 f"finetuned:{os.path.abspath(run_dir)}/{best_file}")
