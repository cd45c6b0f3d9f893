"""Test-time interventions on a target language's hidden states: their file formats, writers, loaders
and the ``layer_hook`` s that apply them.

The files are written by analyses (``xlt align dictionary``, ``xlt shift-decode``) and read by
``xlt finetune``; they live here, below both, so that neither package imports the other.

Both interventions act on the output of one layer ``l`` of the encoder (0 = embeddings, i =
Transformer layer i, the numbering of :meth:`xlt.model.encoder.Encoder.encode_from`), for
target-language inputs only; the source language is never transformed.

**Linear map** (Wu et al. 2020 §5: align a target encoder's layer into the source space). A map
directory, as ``xlt align dictionary`` writes it (:func:`write_maps`)::

    map.json        {"format": "xlt-layer-map/1", "source": "en", "target": "fr", "layers": [0, 1, ...],
                     "d_model": 768, ...any provenance keys}
    W_layer0.npy    float [D, D]   (or W_layer0.pt holding one tensor)
    means_layer0.npy  float [2, D]: the target's mean, then the source's (optional)
    W_layer1.npy    ...

Row-vector convention: a target state ``x`` [D] becomes ``x @ W`` (so Procrustes' W = U Vᵀ from
SVD(Xᵀ Y), X = target rows, Y = source rows, is stored as is), or ``(x - mean_tgt) @ W + mean_src``
where the layer has means: W learned on centred vectors (iterative normalization centres them) is a
rotation about the means, and two models' states share no origin.

**Mean-difference shift** (Liu et al. 2020 §4.1, Table 4). Two ``.npz`` files, loadable with
``allow_pickle=False``; ``header`` is a JSON string:

* means (``xlt shift-decode means``): ``mean`` float32 [n_layers+1, D] (row 0 = embeddings),
  ``header`` {"format": "xlt-means/1", run, step, lang, sentences, tokens, include_specials, text,
  text_sha256}.
* shift (``xlt shift-decode shift``, :class:`LanguageShift`): ``mean_src``, ``mean_tgt`` float32
  [n_layers+1, D], ``header`` {"format": "xlt-shift/1", "src", "tgt", run, step, d_model, n_layers};
  the shift towards the target is ``mean_tgt - mean_src`` (:meth:`LanguageShift.difference`).

The fine-tuning runner reads a shift made with ``--src`` = the target X and ``--tgt`` = the source,
one per target (:func:`load_shift`). X's layer-``l`` output gets ``alpha * (mean_source[l] -
mean_X[l])`` added -- Liu et al.'s D_{X->source}: with alpha = 1 the target's mean lands on the
source's, so the fine-tuned layers above see inputs that look like the source language they were
trained on.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import zipfile
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np
import torch
from torch import Tensor

from xlt.model.encoder import LayerHook
from xlt.utils.errors import XltError, require_file
from xlt.utils.shapes import ListOf, require_fields
from xlt.utils.outputs import atomic_path, check_output_paths, make_directory, write_json
from xlt.utils.textio import file_sha256, read_json

MAP_FORMAT = "xlt-layer-map/1"
MAP_HEADER = "map.json"
MAP_ORIENTATION = "x_tgt @ W -> source space"
MEANS_FORMAT = "xlt-means/1"
SHIFT_FORMAT = "xlt-shift/1"


def _check_layer(layer: int, n_layers: int, what: str) -> None:
    if not 0 <= layer <= n_layers:
        raise XltError(f"{what} layer {layer} is not one of the model's layers 0..{n_layers}")


# ---- linear maps --------------------------------------------------------------------------------

def _save_npy(path: str, array: np.ndarray) -> None:
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:   # a file object: np.save would append ".npy" to the temporary name
            np.save(f, np.asarray(array, dtype=np.float32))


def write_maps(output_dir: str, maps: Sequence[np.ndarray], header: dict,
               means: Optional[Sequence[np.ndarray]] = None) -> None:
    """``DIR/W_layer{l}.npy`` (float32 [D,D]), with ``means``, ``DIR/means_layer{l}.npy`` (float32
    [2,D]: target mean, source mean), and ``DIR/map.json``: the map directory ``xlt finetune
    --map-dir`` reads (:func:`load_map`; the module docstring says how a state is mapped).

    Every file goes through a temporary name; the header is written last, so a directory with a
    header is complete.
    """
    make_directory(output_dir)
    stale = os.path.join(output_dir, MAP_HEADER)
    arrays = [os.path.join(output_dir, f"W_layer{layer}.npy") for layer in header["layers"]]
    centres = [os.path.join(output_dir, f"means_layer{layer}.npy") for layer in header["layers"]]
    check_output_paths(*arrays, *centres, stale)   # all or none: a directory in the way stops it before the first
    if os.path.exists(stale):
        os.unlink(stale)  # a half-rewritten directory must not look complete
    # an earlier map's files must not sit beside this one: its other layers, or means to centre this one
    keep = set(arrays) | (set(centres) if means is not None else set())
    for name in os.listdir(output_dir):
        if re.fullmatch(r"(W|means)_layer\d+\.(npy|pt)", name) and os.path.join(output_dir, name) not in keep:
            os.unlink(os.path.join(output_dir, name))
    for path, W in zip(arrays, maps):
        _save_npy(path, W)
    for path, pair in zip(centres, means or ()):
        _save_npy(path, pair)
    write_json(os.path.join(output_dir, MAP_HEADER), header)


def _load_array(path: str) -> np.ndarray:
    """A float array from ``.npy`` (numpy) or ``.pt`` (one tensor)."""
    try:
        if path.endswith(".pt"):
            return np.asarray(torch.load(path, map_location="cpu", weights_only=True), dtype=np.float32)
        return np.load(path, allow_pickle=False).astype(np.float32)
    except (OSError, ValueError, RuntimeError, TypeError) as e:
        raise XltError(f"cannot read array file ({e})", path) from None


@dataclass
class LayerMap:
    """One target language's map W [D, D] applied to the output of ``layer``."""

    source: str
    target: str
    layer: int
    weight: Tensor
    identity: str  # checksum of the header and the weight file: part of an evaluation's key
    means: Optional[Tensor] = None  # [2, D]: target mean, source mean; None: x @ W about the origin

    def hook(self) -> LayerHook:
        cache: dict[torch.device, tuple[Tensor, Optional[Tensor]]] = {}

        def apply(layer: int, hidden: Tensor) -> Tensor:
            if layer != self.layer:
                return hidden
            if hidden.device not in cache:
                cache[hidden.device] = tuple(None if t is None else t.to(device=hidden.device, dtype=torch.float32)
                                             for t in (self.weight, self.means))
            W, means = cache[hidden.device]
            # In fp32 also under autocast: a bf16 product would round every mapped state (an identity
            # map would no longer leave the model's outputs as they were).
            with torch.autocast(hidden.device.type, enabled=False):
                if means is None:
                    return (hidden.float() @ W).to(hidden.dtype)
                return ((hidden.float() - means[0]) @ W + means[1]).to(hidden.dtype)

        return apply


def load_map(directory: str, layer: Optional[int], source: str, d_model: int, n_layers: int) -> LayerMap:
    """Read and check a map directory (see the module docstring for the format)."""
    header_path = os.path.join(directory, MAP_HEADER)
    header = read_json(header_path, "map header", format=MAP_FORMAT)
    require_fields(header, {"source": str, "target": str, "layers": ListOf(int)}, header_path, "a map header",
                   optional={"d_model": int})
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
    means_path = os.path.join(directory, f"means_layer{layer}.npy")
    means, checksums = None, file_sha256(header_path) + file_sha256(weight_path)
    if os.path.exists(means_path):
        means = _load_array(means_path)
        if means.shape != (2, d_model) or not np.isfinite(means).all():
            raise XltError(f"map means need shape [2, {d_model}] of finite values (target's, source's), "
                           f"got {means.shape}", means_path)
        checksums += file_sha256(means_path)
    identity = hashlib.sha256(checksums.encode()).hexdigest()
    return LayerMap(source, str(header["target"]), layer, torch.from_numpy(weight), identity,
                    None if means is None else torch.from_numpy(means))


# ---- language means and shifts ------------------------------------------------------------------

def _save_npz(path: str, header: dict, **arrays: np.ndarray) -> None:
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, header=np.array(json.dumps(header)), **arrays)


def _load_npz(path: str, expected_format: str, keys: Sequence[str]) -> tuple[dict, dict]:
    require_file(path, "npz file")
    try:
        with np.load(path, allow_pickle=False) as data:
            header = json.loads(str(data["header"]))
            arrays = {k: data[k] for k in keys}
    except (ValueError, KeyError, OSError, EOFError, zipfile.BadZipFile) as e:
        raise XltError(f"not an {expected_format} file ({e})", path) from None
    found = header.get("format") if isinstance(header, dict) else None
    if found != expected_format:
        raise XltError(f"not an {expected_format} file (format {found!r})", path)
    return header, arrays


def save_means(path: str, mean: np.ndarray, header: dict) -> None:
    _save_npz(path, {"format": MEANS_FORMAT, **header}, mean=mean.astype(np.float32))


def load_means(path: str) -> tuple[np.ndarray, dict]:
    """A means file -> (mean [n_layers+1, D], header)."""
    header, arrays = _load_npz(path, MEANS_FORMAT, ["mean"])
    require_fields(header, {"lang": str, "sentences": int, "tokens": int}, path, f"an {MEANS_FORMAT} header")
    return arrays["mean"], header


@dataclass
class LanguageShift:
    """Two Means of Language of one model; ``difference(l)`` = R_tgt(l) - R_src(l) [D]."""

    src: str
    tgt: str
    mean_src: np.ndarray  # [n_layers+1, D]
    mean_tgt: np.ndarray  # [n_layers+1, D]
    header: dict

    @classmethod
    def from_means(cls, src_path: str, tgt_path: str) -> "LanguageShift":
        """Combine two means files; they must come from the same run and checkpoint step."""
        (mean_src, hs), (mean_tgt, ht) = load_means(src_path), load_means(tgt_path)
        for key in ("run", "step"):
            if hs.get(key) != ht.get(key):
                raise XltError(f"means of different models ({key} {hs.get(key)!r} in {src_path})", tgt_path)
        if bool(hs.get("include_specials")) != bool(ht.get("include_specials")):
            # </s>'s state is no word's: the difference would carry its offset as if it were the languages'
            raise XltError(f"means pooled differently (include_specials {bool(hs.get('include_specials'))} "
                           f"in {src_path})", tgt_path)
        if mean_src.shape != mean_tgt.shape:
            raise XltError(f"shape {mean_tgt.shape} differs from {src_path}'s {mean_src.shape}", tgt_path)
        if hs["lang"] == ht["lang"]:
            raise XltError(f"both means are of {hs['lang']!r}: a shift goes from one language to another", tgt_path)
        header = {"format": SHIFT_FORMAT, "src": hs["lang"], "tgt": ht["lang"], "run": hs["run"], "step": hs["step"],
                  "include_specials": bool(hs.get("include_specials")),
                  "n_layers": mean_src.shape[0] - 1, "d_model": mean_src.shape[1],
                  "sentences": {hs["lang"]: hs["sentences"], ht["lang"]: ht["sentences"]},
                  "tokens": {hs["lang"]: hs["tokens"], ht["lang"]: ht["tokens"]},
                  "means": {hs["lang"]: os.path.abspath(src_path), ht["lang"]: os.path.abspath(tgt_path)}}
        return cls(hs["lang"], ht["lang"], mean_src, mean_tgt, header)

    def difference(self, layer: int) -> np.ndarray:
        """D(layer) = R_tgt(layer) - R_src(layer), float32 [D] (layer 0 = embeddings)."""
        if not 0 <= layer < self.mean_src.shape[0]:
            raise XltError(f"layer {layer} is out of range: the shift has layers 0..{self.mean_src.shape[0] - 1}")
        return self.mean_tgt[layer] - self.mean_src[layer]

    def save(self, path: str) -> None:
        _save_npz(path, self.header, mean_src=self.mean_src.astype(np.float32),
                  mean_tgt=self.mean_tgt.astype(np.float32))

    @classmethod
    def load(cls, path: str) -> "LanguageShift":
        header, arrays = _load_npz(path, SHIFT_FORMAT, ["mean_src", "mean_tgt"])
        require_fields(header, {"src": str, "tgt": str}, path, f"an {SHIFT_FORMAT} header")
        return cls(header["src"], header["tgt"], arrays["mean_src"], arrays["mean_tgt"], header)


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
