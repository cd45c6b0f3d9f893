"""One fine-tuning run (one grid point, one seed) in its own directory: train, resume, evaluate.

The run directory (named by the runner from a hash of everything that decides the result)::

    config.json           what the run computes: settings, model and data checksums (write_run_description),
                          and where each resume picked up, with its command and machine (record_resume)
    metrics.jsonl         one line per epoch: train loss, source dev metrics, lr, padding, speed
    state.pt              resume state after the last completed epoch (deleted when training ends)
    best-epoch{E}.pt      trainable weights of the best epoch on the source dev set
    train.json            written when training is done: best epoch, dev curve
    eval/*.json           one file per evaluation (language, split, test-time variant)
    predictions/*         one prediction file per evaluation (xlt.finetune.predictions)

:class:`RunTrainer` is built in one step from everything a run needs: the command's
:class:`SourceData` (the pretrained model, the source splits, the device), the run's settings and its
directory. An unfinished run gets its model, optimizer and schedule there, ready for
:meth:`RunTrainer.train`, which tidies the directory, resumes from ``state.pt`` or starts over, and
trains; a finished run builds its best epoch's model only when an evaluation asks for it. What the
files hold is read without a model through :class:`~xlt.finetune.runfiles.RunFiles`.

Every file is written atomically, ``state.pt`` only after the best weights it names, so a kill at
any moment resumes from the last completed epoch and ends as an uninterrupted run would (bit for
bit on CPU: the epoch order is a function of (seed, epoch) and every RNG state is saved).

Zero-shot protocol: the language-specific parameters of the pretrained encoder (all languages'),
and with ``freeze_bottom = K`` the embeddings and shared layers 1..K, get ``requires_grad = False``
and are left out of the optimizer. Only the trainable tensors and the head are saved; the frozen
ones are the pretrained run's, reloaded from it.
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import torch
from torch import Tensor, nn

from xlt.finetune.config import RunSettings
from xlt.finetune.ordering import ExampleSizes, bucketed, epoch_order, epoch_steps, ordered_batches
from xlt.finetune.runfiles import BestEpoch, RunFiles, TrainingSummary
from xlt.finetune.task import Batch, Task
from xlt.loader.kinds import FinetuneModel
from xlt.model.checkpoint_io import load_checkpoint
from xlt.model.encoder import Encoder, LayerHook
from xlt.pretrain.checkpoint import save_checkpoint
from xlt.text.pipeline import TextPipeline
from xlt.utils import log
from xlt.utils.errors import XltError
from xlt.utils.outputs import write_json
from xlt.utils.rundir import MetricsLog, record_resume
from xlt.utils.seed import rng_state, seed_everything, set_rng_state

EMBEDDING_PREFIXES = ("token_embeddings.", "position_embeddings.", "language_embeddings.", "embedding_norm.")
# What best-epoch{E}.pt and state.pt hold of a model: the trainable encoder tensors by name and the
# head's state, CPU copies (the frozen tensors are the pretrained run's).
Weights = dict[str, dict[str, Tensor]]


class FinetuneModel(nn.Module):
    """The pretrained encoder (its MLM head dropped) and a task head on its last hidden state."""

    def __init__(self, encoder: Encoder, head: nn.Module):
        super().__init__()
        self.encoder, self.head = encoder, head

    def forward(self, batch: Batch, lang: str, lang_embedding: Optional[str] = None,
                layer_hook: Optional[LayerHook] = None) -> Any:
        """``batch.input_ids`` [B,T] (and ``padding_mask`` [B,T]) -> the head's outputs, from the
        encoder's last hidden state [B,T,D]; ``layer_hook(layer, hidden [B,T,D])`` may replace a layer's
        output on the way (test-time maps and shifts)."""
        hidden = self.encoder(batch.input_ids, lang, batch.padding_mask, layer_hook=layer_hook,
                              lang_embedding=lang_embedding).last_hidden_state
        return self.head(hidden, batch)


def frozen_parameter_names(encoder: Encoder, freeze_bottom: int) -> set[str]:
    """Every language-specific parameter, plus the embeddings and layers 1..K when ``freeze_bottom = K``.

    An encoder that names its modules otherwise (a transformers model, :class:`xlt.model.hf_finetune.HFEncoder`)
    says which names are its bottom through ``bottom_prefixes(K)``."""
    n_layers = encoder.config.n_layers
    if freeze_bottom > n_layers:
        raise XltError(f"--freeze-bottom {freeze_bottom}: the model has only {n_layers} layers")
    frozen = {name for name, _ in encoder.language_specific_parameters()}
    if freeze_bottom > 0:
        if hasattr(encoder, "bottom_prefixes"):
            bottom = tuple(encoder.bottom_prefixes(freeze_bottom))
        else:
            bottom = EMBEDDING_PREFIXES + tuple(f"layers.{i}." for i in range(freeze_bottom))
        frozen |= {name for name, _ in encoder.named_parameters() if name.startswith(bottom)}
    return frozen


# Rates some models keep as numbers and pass to F.dropout (transformers' XLM, and with it every
# `xlt export hf` model: XLMModel, its attention and feed-forward blocks), where nn.Dropout is not used.
DROPOUT_RATES = ("dropout", "attention_dropout")


def set_dropout(module: nn.Module, p: float) -> None:
    """Set every dropout of the encoder (hidden and attention) to ``p``: nn.Dropout modules and rates
    kept as numbers."""
    for m in module.modules():
        if isinstance(m, nn.Dropout):
            m.p = p
        for name in DROPOUT_RATES:
            rate = getattr(m, name, None)
            if isinstance(rate, (int, float)) and not isinstance(rate, bool):
                setattr(m, name, p)


def lr_factor(schedule: str, warmup_fraction: float, total_steps: int) -> Callable[[int], float]:
    """constant: 1. linear: 0 -> 1 over the warm-up steps, then down to 0 at ``total_steps`` (as
    ``transformers.get_linear_schedule_with_warmup``, which crosslingual-nlp uses)."""
    if schedule == "constant":
        return lambda step: 1.0
    warmup = int(warmup_fraction * total_steps)

    def linear(step: int) -> float:
        if step < warmup:
            return step / max(1, warmup)
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup))

    return linear


@dataclass
class SourceData:
    """What every run of a command shares: the task, the model, the source splits."""

    task: Task
    pretrained: FinetuneModel  # the model of any kind the runner loaded (its .model.encoder is copied)
    labels: list[str]
    source: str
    text: TextPipeline  # the source's pipeline, one object for the whole command (tasks memoize per pipeline)
    train: Sequence[Any]
    train_sizes: ExampleSizes  # lengths (bucketing) and rows (steps per epoch) of the training examples
    dev: Sequence[Any]
    dev_batches: Callable[[], list[Batch]]  # the source dev set in evaluation order (cached by the runner)
    device: torch.device
    autocast_dtype: Optional[torch.dtype]


class RunTrainer:
    """Train (or resume) one run and evaluate its best epoch; see the module docstring."""

    def __init__(self, data: SourceData, settings: RunSettings, run_dir: str):
        self.data, self.settings, self.run_dir = data, settings, run_dir
        self.files = RunFiles(run_dir)
        self.metrics = MetricsLog(self.files.path("metrics.jsonl"))
        self.summary: Optional[TrainingSummary] = self.files.training_summary()
        self.model: Optional[FinetuneModel] = None
        self.trainable: list[str] = []
        self.optimizer: Optional[torch.optim.Optimizer] = None
        self.scheduler: Optional[torch.optim.lr_scheduler.LambdaLR] = None
        self.loaded_best: Optional[str] = None  # the best-epoch file whose weights self.model holds
        # Where training stands: epochs and steps done, the best epoch and the dev curve so far
        # (train() restores them from state.pt when resuming).
        self.epoch, self.step, self.best, self.curve = 0, 0, BestEpoch(), []
        self.epoch_batches: list[int] = []
        if self.summary is None:
            self._build_training()

    def _build_training(self) -> None:
        s, d = self.settings, self.data
        self.model, self.trainable = self.build()
        params = dict(self.model.encoder.named_parameters())
        on_cuda = next(self.model.parameters()).is_cuda  # fused there (one kernel); the CPU path unchanged
        self.optimizer = torch.optim.Adam([{"params": [params[n] for n in self.trainable], "lr": s.encoder_lr},
                                           {"params": list(self.model.head.parameters()), "lr": s.head_lr}],
                                          fused=on_cuda)
        # Counted, not estimated from the example count: NER's long sentences add rows (windows).
        self.epoch_batches = [epoch_steps(d.train_sizes.rows, epoch_order(len(d.train), e, s.seed, s.epoch_size),
                                          s.batch_size) for e in range(s.epochs)]
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lr_factor(s.schedule, s.warmup_fraction, sum(self.epoch_batches)))

    # ---- model ----------------------------------------------------------------------------------
    def build(self) -> tuple[FinetuneModel, list[str]]:
        """A fresh model (head seeded by the run's seed) and the names of its trainable encoder tensors."""
        s, d = self.settings, self.data
        seed_everything(s.seed)
        encoder = copy.deepcopy(d.pretrained.model.encoder)
        head = d.task.make_head(encoder.config.d_model, d.labels)
        if s.dropout is not None:
            set_dropout(encoder, s.dropout)
        frozen = frozen_parameter_names(encoder, s.freeze_bottom)
        trainable = []
        for name, param in encoder.named_parameters():
            param.requires_grad_(name not in frozen)
            if name not in frozen:
                trainable.append(name)
        return FinetuneModel(encoder, head).to(d.device), trainable

    def weights(self) -> Weights:
        """CPU copies of the model's trainable tensors and head."""
        params = dict(self.model.encoder.named_parameters())
        return {"encoder": {n: params[n].detach().cpu().clone() for n in self.trainable},
                "head": {k: v.detach().cpu().clone() for k, v in self.model.head.state_dict().items()}}

    @staticmethod
    def load_weights(model: FinetuneModel, weights: Weights) -> None:
        params = dict(model.encoder.named_parameters())
        with torch.no_grad():
            for name, tensor in weights["encoder"].items():
                params[name].copy_(tensor)
        model.head.load_state_dict(weights["head"])

    def autocast(self):
        dtype = self.data.autocast_dtype
        return torch.autocast(self.data.device.type, dtype=dtype) if dtype else contextlib.nullcontext()

    # ---- training -------------------------------------------------------------------------------
    def train(self, on_epoch_end: Optional[Callable[[dict[str, Any]], None]] = None) -> TrainingSummary:
        """Train to the last epoch, resuming from ``state.pt``; write and return train.json's contents.

        ``on_epoch_end`` gets each epoch's metrics.jsonl record once its state is saved."""
        self.files.clean_leftovers()
        if self.summary is not None:
            return self.summary
        self._resume_or_start_over()
        s, d = self.settings, self.data
        metric = d.task.main_metric
        for epoch in range(self.epoch, s.epochs):
            t0 = time.perf_counter()
            order = epoch_order(len(d.train), epoch, s.seed, s.epoch_size)
            if s.bucket:
                order = bucketed(order, d.train_sizes.lengths, s.batch_size, s.seed, epoch)
            train_loss, padding_fraction = self._train_epoch(epoch, order)
            train_seconds = time.perf_counter() - t0
            dev = self.evaluate_batches(self.model, d.dev, d.dev_batches(), d.source, d.source, None)
            self.curve.append(dev[metric])
            if dev[metric] > self.best.value:
                self.best = BestEpoch(epoch + 1, dev[metric], f"best-epoch{epoch + 1}.pt", dev)
                save_checkpoint(self.files.path(self.best.file), {**self.weights(), "epoch": epoch + 1,
                                                                  "labels": d.labels, "settings": s.to_dict()})
            self.epoch = epoch + 1
            seconds = time.perf_counter() - t0
            record = {"epoch": epoch + 1, "step": self.step, "train_loss": train_loss,
                      "source_dev": dev, "best_epoch": self.best.epoch,
                      "lr": [g["lr"] for g in self.optimizer.param_groups],
                      "padding_fraction": padding_fraction,
                      "examples_per_s": len(order) / train_seconds, "seconds": seconds}
            # The epoch's line first: a kill before state.pt lands resumes the epoch, and resuming drops
            # lines past the saved step; the other order would lose the line for good.
            self.metrics.append(record)
            save_checkpoint(self.files.path("state.pt"), self.state_dict())
            self.files.remove_best_except(self.best.file)
            if on_epoch_end is not None:
                on_epoch_end(record)
        self.summary = TrainingSummary(self.best.epoch, self.best.file, self.best.metrics, self.best.value,
                                       self.curve, s.epochs, self.step)
        write_json(self.files.path("train.json"), self.summary.to_dict())
        os.unlink(self.files.path("state.pt"))
        # The last epoch's model and optimizer stay inspectable; evaluation reloads the best epoch.
        self.scheduler = None
        return self.summary

    def state_dict(self) -> dict[str, Any]:
        """``state.pt``: everything an interrupted run resumes from, as of the last completed epoch."""
        return {"epoch": self.epoch, "step": self.step, "weights": self.weights(),
                "optimizer": self.optimizer.state_dict(), "scheduler": self.scheduler.state_dict(),
                "rng": rng_state(), "best": self.best.to_dict(), "dev_curve": self.curve}

    def _resume_or_start_over(self) -> None:
        if os.path.exists(self.files.path("state.pt")):
            state = load_checkpoint(self.files.path("state.pt"))
            self.load_weights(self.model, state["weights"])
            self.optimizer.load_state_dict(state["optimizer"])
            self.scheduler.load_state_dict(state["scheduler"])
            set_rng_state(state["rng"])
            self.epoch, self.step, self.curve = state["epoch"], state["step"], state["dev_curve"]
            self.best = BestEpoch.from_dict(state["best"])
            self.files.remove_best_except(self.best.file)  # written by the killed epoch after this state
            self.metrics.truncate_after(self.step)
            if os.path.exists(self.files.path("config.json")):
                record_resume(self.run_dir, {"epoch": self.epoch}, device=self.data.device)
            log.info(f"{self.run_dir}: resuming after epoch {self.epoch}")
        else:  # a fresh start: nothing of an attempt killed in its first epoch may survive
            self.files.remove_best_except(None)
            if os.path.exists(self.metrics.path):
                os.unlink(self.metrics.path)

    def _train_epoch(self, epoch: int, order: list[int]) -> tuple[float, float]:
        """One pass over ``order``; returns the mean loss and the share of padded positions."""
        s, d = self.settings, self.data
        self.model.train()
        loss_sum, batches, padding, positions = 0.0, 0, 0, 0
        with log.progress(f"epoch {epoch + 1}/{s.epochs}", total=self.epoch_batches[epoch]) as bar:
            for ob in ordered_batches(d.task, d.train, order, d.text, d.labels, s.batch_size, s.max_len):
                loss = self.train_step(ob.batch)
                self.scheduler.step()
                self.step, batches, loss_sum = self.step + 1, batches + 1, loss_sum + loss
                padding, positions = padding + ob.padding_positions, positions + ob.positions
                bar.advance(1)
                bar.update(status=f"loss {loss:.4f}")
        return loss_sum / max(1, batches), padding / max(1, positions)

    def train_step(self, batch: Batch) -> float:
        """One optimizer step on ``batch`` (input_ids [B,T], on any device); returns its loss."""
        batch = batch.to(self.data.device)
        with self.autocast():
            loss = self.model.head.loss(self.model(batch, self.data.source), batch)
        value = loss.item()
        if not math.isfinite(value):
            raise RuntimeError(f"training loss is {value}; the run stops (lower the learning rate)")
        loss.backward()
        if self.settings.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_([p for g in self.optimizer.param_groups for p in g["params"]],
                                           self.settings.clip_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return value

    # ---- evaluation -----------------------------------------------------------------------------
    @torch.no_grad()
    def predict_batches(self, model: FinetuneModel, batches: list[Batch], lang: str, lang_embedding: str,
                        hook: Optional[LayerHook]) -> dict[int, list[Any]]:
        """What ``Task.evaluate`` scores: per example id, the decoded rows of its batches, in batch order.

        Each batch (input_ids [B,T]) goes through ``model`` on the run's device; ``hook`` acts on the
        layer outputs [B,T,D] (see :meth:`FinetuneModel.forward`)."""
        model.eval()
        predictions: dict[int, list[Any]] = {}
        for batch in batches:
            batch = batch.to(self.data.device)
            with self.autocast():
                outputs = model(batch, lang, lang_embedding, hook)
            for example_id, prediction in zip(batch.example_ids, model.head.decode(outputs, batch)):
                predictions.setdefault(example_id, []).append(prediction)
        return predictions

    def evaluate_batches(self, model: FinetuneModel, examples: Sequence[Any], batches: list[Batch], lang: str,
                         lang_embedding: str, hook: Optional[LayerHook]) -> dict[str, float]:
        """The task's metrics of ``model`` on one split, given its batches (split-level example ids)."""
        return self.data.task.evaluate(examples, self.predict_batches(model, batches, lang, lang_embedding, hook),
                                       self.data.labels)

    def best_model(self) -> FinetuneModel:
        """The best epoch's model (built once per run, from the pretrained model plus the saved weights)."""
        if self.summary is None:
            raise XltError("the run has not finished training", self.run_dir)
        best_file = self.summary.best_file
        if not os.path.exists(self.files.path(best_file)):
            raise XltError("the run's weights were not kept (--no-keep-weights); remove the directory to train "
                           "it again", self.run_dir)
        if self.loaded_best != best_file:
            # The last epoch's model and Adam state go first: on a GPU they would double what evaluation holds.
            self.model = self.optimizer = self.scheduler = None
            self.model, _ = self.build()
            self.load_weights(self.model, load_checkpoint(self.files.path(best_file)))
            self.loaded_best = best_file
        return self.model  # type: ignore[return-value]
