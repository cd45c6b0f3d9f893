"""``--model`` -> a :class:`~xlt.model.protocol.TextModel`: an xlt run
(:class:`~xlt.pretrain.pretrained.PretrainedRun`) or a transformers model
(:class:`~xlt.model.hf.HFTextModel`), the kind told by :func:`xlt.model.spec.model_kind`.

Each kind is imported only when it is the one asked for, so that loading a transformers model does
not import the pretraining code, nor an xlt run transformers.
"""

from __future__ import annotations

from xlt.model.protocol import TextModel
from xlt.model.spec import model_kind


def load_text_model(spec: str, checkpoint: str = "best", device: str = "cpu") -> TextModel:
    """``--model`` -> a :class:`TextModel` on ``device`` in eval mode. ``checkpoint`` applies to xlt runs."""
    if model_kind(spec) == "xlt":
        from xlt.pretrain.pretrained import PretrainedRun

        return PretrainedRun.load(spec, checkpoint, device)
    from xlt.model.hf import HFTextModel

    return HFTextModel.load(spec, device)
