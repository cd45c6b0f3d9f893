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

**Mean-difference shift** (Liu et al. 2020 §4.1, Table 4). A file of per-language means over all
non-padding tokens, ``.npz`` (one array per language code) or ``.pt`` (a dict), each array
[n_layers + 1, D] with row ``l`` the mean of layer ``l``. A target's layer-``l`` output gets
``alpha * (mean_source[l] - mean_target[l])`` added, which is Liu et al.'s D_{target->source}: with
alpha = 1 the target's mean lands on the source's, so the fine-tuned layers above see inputs that
look like the source language they were trained on.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
from torch import Tensor

from xlt.model.encoder import LayerHook
from xlt.utils.errors import XltError, require_file

MAP_FORMAT = "xlt-layer-map/1"
MAP_HEADER = "map.json"


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _load_array(path: str) -> np.ndarray:
    """A float array from ``.npy``/``.npz`` (numpy) or ``.pt`` (a tensor or a dict of tensors)."""
    try:
        if path.endswith(".pt"):
            value = torch.load(path, map_location="cpu", weights_only=True)
            if isinstance(value, dict):
                return {k: np.asarray(v, dtype=np.float32) for k, v in value.items()}  # type: ignore[return-value]
            return np.asarray(value, dtype=np.float32)
        loaded = np.load(path, allow_pickle=False)
        if isinstance(loaded, np.lib.npyio.NpzFile):
            return {k: loaded[k].astype(np.float32) for k in loaded.files}  # type: ignore[return-value]
        return loaded.astype(np.float32)
    except (OSError, ValueError, RuntimeError) as e:
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
        cache: dict[tuple, Tensor] = {}

        def apply(layer: int, hidden: Tensor) -> Tensor:
            if layer != self.layer:
                return hidden
            key = (hidden.device, hidden.dtype)
            if key not in cache:
                cache[key] = self.weight.to(device=hidden.device, dtype=hidden.dtype)
            return hidden @ cache[key]

        return apply


def load_map(directory: str, layer: Optional[int], source: str, d_model: int, n_layers: int) -> LayerMap:
    """Read and check a map directory (see the module docstring for the format)."""
    header_path = os.path.join(directory, MAP_HEADER)
    require_file(header_path, "map header")
    try:
        with open(header_path, encoding="utf-8") as f:
            header = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise XltError(f"not a JSON map header ({e})", header_path) from None
    if not isinstance(header, dict) or header.get("format") != MAP_FORMAT:
        raise XltError(f"not an {MAP_FORMAT} header (format {header.get('format') if isinstance(header, dict) else None!r})",
                       header_path)
    for key in ("source", "target", "layers"):
        if key not in header:
            raise XltError(f"map header lacks {key!r}", header_path)
    if header["source"] != source:
        raise XltError(f"map goes into {header['source']!r} space but the source language is {source!r}", header_path)
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
class MeanShift:
    """Per-language, per-layer means and the layer at which their difference is added."""

    path: str
    layer: int
    means: dict[str, Tensor]  # lang -> [n_layers + 1, D]
    identity: str

    def vector(self, source: str, target: str) -> Tensor:
        """mean_source[layer] - mean_target[layer], [D]: what moves the target onto the source."""
        for lang in (source, target):
            if lang not in self.means:
                raise XltError(f"no mean for language {lang!r} (the file has {', '.join(sorted(self.means))})",
                               self.path)
        return self.means[source][self.layer] - self.means[target][self.layer]

    def hook(self, source: str, target: str, alpha: float) -> LayerHook:
        delta = alpha * self.vector(source, target)

        def apply(layer: int, hidden: Tensor) -> Tensor:
            if layer != self.layer:
                return hidden
            return hidden + delta.to(device=hidden.device, dtype=hidden.dtype)

        return apply


def load_shift(path: str, layer: int, d_model: int, n_layers: int) -> MeanShift:
    """Read language means (``.npz`` or ``.pt``: {lang: [n_layers + 1, D]}) for a shift at ``layer``."""
    require_file(path, "language means file")
    _check_layer(layer, n_layers, "shift")
    loaded = _load_array(path)
    if not isinstance(loaded, dict) or not loaded:
        raise XltError("expected one [n_layers + 1, D] array per language code", path)
    means = {}
    for lang, array in loaded.items():
        if array.shape != (n_layers + 1, d_model):
            raise XltError(f"mean of {lang!r} has shape {array.shape}, the model needs [{n_layers + 1}, {d_model}]",
                           path)
        if not np.isfinite(array).all():
            raise XltError(f"mean of {lang!r} has non-finite values", path)
        means[lang] = torch.from_numpy(array)
    return MeanShift(path, layer, means, file_sha256(path))
