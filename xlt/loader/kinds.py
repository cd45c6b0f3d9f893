"""The kinds of model a ``--model`` value can name, each with its loaders and its option checks: the one
place where a new kind is added.

* ``xlt``: a run directory of ``xlt pretrain`` (:class:`~xlt.model.xlt_run.PretrainedRun`);
* ``hf``: a transformers model, ``hf:NAME`` or a directory written by ``save_pretrained`` or by a
  Trainer (``checkpoint-N/`` folders, chosen with ``--checkpoint step-N``)
  (:class:`~xlt.model.hf.HFTextModel` for the analyses,
  :class:`~xlt.model.hf_finetune.HFFinetuneModel` for fine-tuning);
* ``static``: ``static:FILE``, frozen word vectors under a BiLSTM-max encoder
  (:class:`~xlt.loader.static_vectors.StaticVectorsModel`; fine-tuning only, the analyses need a
  TextModel).

Analyses load through :func:`xlt.loader.text_model.load_text_model`; fine-tuning plans with
:meth:`ModelKind.languages` and :meth:`ModelKind.check` (no weights loaded, so ``xlt finetune
--dry-run`` refuses what a run would refuse) and loads with :meth:`ModelKind.for_finetuning`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol, Sequence

from xlt.loader.static_vectors import PREFIX as STATIC_PREFIX
from xlt.loader.static_vectors import StaticVectorsModel, sidecar_languages
from xlt.model.hf import HFTextModel, layer_output_modules
from xlt.model.hf_finetune import HFFinetuneModel, config_languages
from xlt.model.protocol import TextModel
from xlt.model.spec import hf_model_dir, is_hf_model, model_source
from xlt.model.xlt_run import PretrainedRun, checkpoint_path, run_languages, run_model_settings
from xlt.utils.errors import XltError
from xlt.utils.textio import file_sha256


@dataclass(frozen=True)
class ModelChoice:
    """A ``--model`` value and what picks its weights: the model a fine-tuning plan names."""

    spec: str                      # --model as given
    kind: str                      # xlt, hf or static
    checkpoint: str = "best"       # best, last, step-N or untrained
    codes: Optional[str] = None    # static: the BPE codes the vectors' text was segmented with
    lstm_dim: int = 512            # static: LSTM units per direction


@dataclass(frozen=True)
class FinetuneUse:
    """What a fine-tuning command asks of its model, for the kind's checks."""

    pair_inputs: bool              # the task's inputs have two segments (XNLI)
    transforms: bool               # test-time maps or shifts act on a layer's output
    freeze_bottom: int
    lang_embedding_at_test: str    # target or source


class FinetuneModel(Protocol):
    """What the fine-tuning runner and trainer read of a loaded model (every kind gives it)."""

    model: Any                     # .encoder: the network each run copies and fine-tunes
    config: Any                    # .d_model, .n_layers, .max_positions
    languages: list[str]           # empty: any language
    step: Optional[int]            # the pretraining step (shift files record it)

    def text(self, lang: str) -> Any:
        """``lang``'s text pipeline (xlt.finetune.inputs reads it)."""


@dataclass
class Loaded:
    """A model loaded for fine-tuning, with what names it in run hashes and results.json."""

    model: FinetuneModel
    identity: dict[str, Any]       # the kind's record: checksums of what decides the trained model
    source: str                    # results.json's "model": hf:NAME as it is, a path made absolute


@dataclass(frozen=True)
class ModelKind:
    name: str
    claims: Callable[[str], bool]
    # the languages the model takes, read without its weights (empty: any)
    languages: Callable[[ModelChoice], list[str]]
    # XltError for an option this kind cannot honour, before anything is loaded
    check: Callable[[ModelChoice, FinetuneUse], None]
    for_finetuning: Callable[[ModelChoice, FinetuneUse], Loaded]
    # spec, checkpoint, device -> a TextModel; None: the analyses cannot read this kind
    text_model: Optional[Callable[[str, str, str], TextModel]]


NO_LANG_EMBEDDINGS = "--lang-embedding-at-test source: this model has no language embeddings (it would change nothing)"


# ---- xlt runs ---------------------------------------------------------------------------------------

def _xlt_weights(choice: ModelChoice) -> str:
    # The control starts from the best checkpoint's architecture, re-initialised.
    return "best" if choice.checkpoint == "untrained" else choice.checkpoint


def _xlt_check(choice: ModelChoice, use: FinetuneUse) -> None:
    checkpoint_path(choice.spec, _xlt_weights(choice))
    # so that --dry-run refuses it too (the runner checks the loaded model's config again)
    model = run_model_settings(choice.spec)
    if isinstance(model.get("n_layers"), int) and use.freeze_bottom > model["n_layers"]:
        raise XltError(f"--freeze-bottom {use.freeze_bottom}: the model has only {model['n_layers']} layers", choice.spec)
    if use.lang_embedding_at_test == "source" and model.get("lang_embeddings") is False:
        raise XltError(NO_LANG_EMBEDDINGS, choice.spec)


def _xlt_finetuning(choice: ModelChoice, use: FinetuneUse) -> Loaded:
    weights = _xlt_weights(choice)
    run = PretrainedRun.load(choice.spec, weights)
    if choice.checkpoint == "untrained":
        # seed 0, so every seed and task of the control fine-tunes the same untrained encoder
        run.model = run.random_encoder_like(seed=0)
    identity = {"checkpoint": choice.checkpoint, "vocab_sha256": run.vocab.sha256,
                "checkpoint_sha256": file_sha256(os.path.join(choice.spec, "checkpoints", f"{weights}.pt"))}
    return Loaded(run, identity, os.path.abspath(choice.spec))


XLT = ModelKind("xlt", claims=lambda spec: True, languages=lambda choice: run_languages(choice.spec),
                check=_xlt_check, for_finetuning=_xlt_finetuning, text_model=PretrainedRun.load)


# ---- transformers models ----------------------------------------------------------------------------

def _hf_check(choice: ModelChoice, use: FinetuneUse) -> None:
    model_dir = hf_model_dir(choice.spec, choice.checkpoint)   # refuses last, and a step-N without its folder
    if use.lang_embedding_at_test == "source" and not config_languages(choice.spec, choice.checkpoint):
        raise XltError(NO_LANG_EMBEDDINGS, model_source(model_dir))


def _hf_finetuning(choice: ModelChoice, use: FinetuneUse) -> Loaded:
    run = HFFinetuneModel.load(choice.spec, choice.checkpoint)
    # An architecture whose layers xlt cannot name fails now, not in every run after its training.
    if use.pair_inputs:
        run.text_model.pair_special_count()
    if use.freeze_bottom:
        run.model.encoder.bottom_prefixes(use.freeze_bottom)
    if use.transforms:
        layer_output_modules(run.model.encoder.model, run.source)
    return Loaded(run, run.identity(), run.source)


def _hf_text_model(spec: str, checkpoint: str, device: str) -> TextModel:
    return HFTextModel.load(hf_model_dir(spec, checkpoint), device)


HF = ModelKind("hf", claims=is_hf_model, languages=lambda choice: config_languages(choice.spec, choice.checkpoint),
               check=_hf_check, for_finetuning=_hf_finetuning, text_model=_hf_text_model)


# ---- static word vectors ----------------------------------------------------------------------------

def _static_check(choice: ModelChoice, use: FinetuneUse) -> None:
    if choice.checkpoint != "best" or use.transforms or use.freeze_bottom:
        raise XltError("--model static:FILE takes no --checkpoint, --map-dir, --shift or --freeze-bottom "
                       "(the vectors are frozen, there are no layers)", choice.spec)
    if use.lang_embedding_at_test == "source":
        raise XltError(NO_LANG_EMBEDDINGS, choice.spec)


def _static_finetuning(choice: ModelChoice, use: FinetuneUse) -> Loaded:
    run = StaticVectorsModel.load(choice.spec, choice.codes, choice.lstm_dim)
    return Loaded(run, run.identity(), os.path.abspath(choice.spec))


STATIC = ModelKind("static", claims=lambda spec: spec.startswith(STATIC_PREFIX),
                   languages=lambda choice: sidecar_languages(choice.spec[len(STATIC_PREFIX):]),
                   check=_static_check, for_finetuning=_static_finetuning, text_model=None)


# The first kind that claims a value is its kind; an xlt run claims whatever is left, so that a path
# that is no model at all gets the run loader's error (what a run directory needs).
KINDS: Sequence[ModelKind] = (STATIC, HF, XLT)


def kind_of(spec: str) -> ModelKind:
    return next(kind for kind in KINDS if kind.claims(spec))


def kind_named(name: str) -> ModelKind:
    return next(kind for kind in KINDS if kind.name == name)
