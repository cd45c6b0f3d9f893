"""``--model`` -> a :class:`~xlt.model.protocol.TextModel`: an xlt run
(:class:`~xlt.model.xlt_run.PretrainedRun`) or a transformers model
(:class:`~xlt.model.hf.HFTextModel`), through the kind registry (:mod:`xlt.loader.kinds`).
"""

from __future__ import annotations

from typing import Optional

from xlt.loader.kinds import kind_of
from xlt.model.protocol import TextModel
from xlt.model.spec import model_kind
from xlt.utils.errors import XltError


def load_text_model(spec: str, checkpoint: str = "best", device: str = "cpu",
                    finetuned: Optional[str] = None) -> TextModel:
    """``--model`` -> a :class:`TextModel` on ``device`` in eval mode. ``checkpoint``: an xlt run's
    checkpoint; for a transformers Trainer's output, ``step-N`` is its ``checkpoint-N/`` folder.
    ``finetuned``: a run directory of ``xlt finetune`` started from that model, whose best epoch's
    encoder replaces the model's (:mod:`xlt.loader.finetuned`)."""
    kind = kind_of(spec)
    if kind.text_model is None:
        raise XltError(f"a {kind.name} model has no text model for the analyses (give an xlt run directory, "
                       "a transformers model directory or hf:NAME)", spec)
    model_kind(spec)   # a value that is no model gets the analyses' one line, naming what they take
    model = kind.text_model(spec, checkpoint, device)
    if finetuned is not None:
        from xlt.loader.finetuned import with_finetuned_encoder

        model = with_finetuned_encoder(model, checkpoint, finetuned)
    return model
