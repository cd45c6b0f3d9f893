"""Test-time transforms of a target language's hidden states, applied through ``layer_hook``.

Both act on the output of one layer ``l`` of the encoder (0 = embeddings, i = Transformer layer i,
the numbering of :meth:`xlt.model.encoder.Encoder.encode_from`), for target-language inputs only;
the source language is never transformed.

**Linear map** (Wu et al. 2020 §5: align a target encoder's layer into the source space). A map
directory, as ``xlt align dictionary`` writes it::

    map.json        {"format": "xlt-layer-map/1", "source": "en", "target": "fr", "layers": [0, 1, ...],
                     "d_model": 768, ...any provenance keys}
    W_layer0.npy    float [D, D]   (or W_layer0.pt holding one tensor)
    W_layer1.npy    ...

Row-vector convention: a target state ``x`` [D] becomes ``x @ W`` (so Procrustes' W = U Vᵀ from
SVD(Xᵀ Y), X = target rows, Y = source rows, is stored as is).

**Mean-difference shift** (Liu et al. 2020 §4.1, Table 4). A shift file of ``xlt shift-decode
shift`` (``xlt-shift/1``, :class:`xlt.analysis.shift.LanguageShift`) made with ``--src`` = the
target X and ``--tgt`` = the source, one per target. X's layer-``l`` output gets
``alpha * (mean_source[l] - mean_X[l])`` added -- Liu et al.'s D_{X->source}: with alpha = 1 the
target's mean lands on the source's, so the fine-tuned layers above see inputs that look like the
source language they were trained on.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
from torch import Tensor

from xlt.model.encoder import LayerHook
from xlt.utils.errors import XltError
from xlt.utils.textio import file_sha256, read_json

MAP_FORMAT = "xlt-layer-map/1"
MAP_HEADER = "map.json"


def _load_array(path: str) -> np.ndarray:
    """A float array from ``.npy`` (numpy) or ``.pt`` (one tensor)."""
    try:
        if path.endswith(".pt"):
            return np.asarray(torch.load(path, map_location="cpu", weights_only=True), dtype=np.float32)
        return np.load(path, allow_pickle=False).astype(np.float32)
    except (OSError, ValueError, RuntimeError, TypeError) as e:
        raise XltError(f"cannot read array file ({e})", path) from None


def _check_layer(layer: int, n_layers: int, what: str) -> None:
    if not 0 <= layer <= n_layers:
        raise XltError(f"{what} layer {layer} is not one of the model's layers 0..{n_layers}")


@dataclass
class LayerMap:
    """One target language's map W [D, D] applied to the output of ``layer``."""

    source: str
    target: str
    layer: int
    weight: Tensor
    identity: str  # checksum of the header and the weight file: part of an evaluation's key

    def hook(self) -> LayerHook:
        cache: dict[torch.device, Tensor] = {}

        def apply(layer: int, hidden: Tensor) -> Tensor:
            if layer != self.layer:
                return hidden
            if hidden.device not in cache:
                cache[hidden.device] = self.weight.to(device=hidden.device, dtype=torch.float32)
            # In fp32 also under autocast: a bf16 product would round every mapped state (an identity
            # map would no longer leave the model's outputs as they were).
            with torch.autocast(hidden.device.type, enabled=False):
                return (hidden.float() @ cache[hidden.device]).to(hidden.dtype)

        return apply


def load_map(directory: str, layer: Optional[int], source: str, d_model: int, n_layers: int) -> LayerMap:
    """Read and check a map directory (see the module docstring for the format)."""
    header_path = os.path.join(directory, MAP_HEADER)
    header = read_json(header_path, "map header", format=MAP_FORMAT)
    for key in ("source", "target", "layers"):
        if key not in header:
            raise XltError(f"map header lacks {key!r}", header_path)
    if header["source"] != source:
        raise XltError(f"map goes into {header['source']!r} space but the source language is {source!r}", header_path)
    if header.get("d_model", d_model) != d_model:
        raise XltError(f"map is for d_model {header['d_model']}, the model has {d_model}", header_path)
    layers = [int(x) for x in header["layers"]]
    if layer is None:
        if len(layers) != 1:
            raise XltError(f"map directory holds layers {layers}; choose one with --map-layer", header_path)
        layer = layers[0]
    if layer not in layers:
        raise XltError(f"no map for layer {layer} (the directory has {layers})", header_path)
    _check_layer(layer, n_layers, "map")
    candidates = [os.path.join(directory, f"W_layer{layer}{ext}") for ext in (".npy", ".pt")]
    weight_path = next((p for p in candidates if os.path.exists(p)), None)
    if weight_path is None:
        raise XltError(f"no W_layer{layer}.npy or W_layer{layer}.pt", directory)
    weight = _load_array(weight_path)
    if not isinstance(weight, np.ndarray) or weight.shape != (d_model, d_model):
        shape = getattr(weight, "shape", type(weight).__name__)
        raise XltError(f"map weight has shape {shape}, the model needs [{d_model}, {d_model}]", weight_path)
    if not np.isfinite(weight).all():
        raise XltError("map weight has non-finite values", weight_path)
    identity = hashlib.sha256((file_sha256(header_path) + file_sha256(weight_path)).encode()).hexdigest()
    return LayerMap(source, str(header["target"]), layer, torch.from_numpy(weight), identity)


@dataclass
class TargetShift:
    """Liu et al.'s shift for one target: ``delta`` = mean_source[layer] - mean_target[layer], [D]."""

    target: str
    layer: int
    delta: Tensor
    identity: str  # checksum of the shift file: part of an evaluation's key

    def hook(self, alpha: float) -> LayerHook:
        delta = alpha * self.delta

        def apply(layer: int, hidden: Tensor) -> Tensor:
            if layer != self.layer:
                return hidden
            return hidden + delta.to(device=hidden.device, dtype=hidden.dtype)

        return apply


def load_shift(path: str, layer: int, source: str, d_model: int, n_layers: int, step: int) -> TargetShift:
    """An ``xlt shift-decode shift --src means.X.npz --tgt means.SOURCE.npz`` file (``xlt-shift/1``),
    i.e. the shift that moves target X towards the source, checked against the model."""
    from xlt.analysis.shift import LanguageShift

    shift = LanguageShift.load(path)
    if shift.tgt != source:
        raise XltError(f"shift goes from {shift.src!r} to {shift.tgt!r}; the runner needs one towards the source "
                       f"{source!r} (xlt shift-decode shift --src means.{shift.src}.npz --tgt means.{source}.npz)", path)
    if shift.mean_src.shape != (n_layers + 1, d_model):
        raise XltError(f"shift has shape {shift.mean_src.shape}, the model needs [{n_layers + 1}, {d_model}]", path)
    if shift.header.get("step") not in (None, step):
        raise XltError(f"shift comes from step {shift.header['step']} of its model, the fine-tuned model starts "
                       f"from step {step}", path)
    _check_layer(layer, n_layers, "shift")
    delta = torch.from_numpy(np.asarray(shift.difference(layer), dtype=np.float32))
    if not torch.isfinite(delta).all():
        raise XltError("shift has non-finite values", path)
    return TargetShift(shift.src, layer, delta, file_sha256(path))
