"""The pretraining loop: one language per batch (one or several batches per step), masked-LM loss,
exact resume, torchrun-ready.

The loop owns no modelling and no data logic: :class:`~xlt.model.heads.MaskedLM` computes the
loss, :class:`~xlt.data.streams.LanguageStream` cuts windows from memory-mapped stores,
:class:`~xlt.data.sampling.LanguageSampler` picks the batch language and
:class:`~xlt.data.masking.MaskTransform` masks it. What the loop adds is bookkeeping that must be
exact: every generator and stream position goes into the checkpoint, so a run killed at any moment
and started again ends with the same weights as a run never interrupted.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time
from itertools import islice
from typing import Any, Optional

import torch

from xlt.data.masking import MaskTransform
from xlt.data.sampling import LanguageSampler
from xlt.data.streams import LanguageStream, iterate_eval
from xlt.data.store import TokenStore
from xlt.model.checkpoint_io import load_checkpoint, load_model_weights
from xlt.model.encoder import start_copies_equal
from xlt.model.heads import MaskedLM
from xlt.pretrain import distributed
from xlt.pretrain.checkpoint import save_checkpoint
from xlt.pretrain.evaluation import masked_perplexity
from xlt.pretrain.plan import PretrainPlan, open_stores, tokenizer_config
from xlt.pretrain.run_files import check_pretraining_run, describe_run, sigterm_requested, start_or_resume
from xlt.pretrain.schedule import inverse_sqrt_schedule
from xlt.pretrain.snapshots import snapshot_due, write_snapshot
from xlt.pretrain.unigram import unigram_log_probs
from xlt.text.vocab import Vocabulary
from xlt.utils import log
from xlt.utils.errors import Terminated, XltError
from xlt.utils.outputs import make_directory
from xlt.utils.rundir import MetricsLog, exclusive_lock
from xlt.utils.seed import rng_state, seed_everything, set_rng_state

EVAL_MASK_SEED = 12345  # dev perplexity always uses the same masks, whatever the training seed
# Under torchrun the ranks decide a SIGTERM together at a read-back, so there is one at least this
# often: torchrun kills its workers 30 s after passing the signal on, and a log interval of 1,000
# steps of ~50 ms (the paper scale) would outlast that and lose the checkpoint.
STOP_CHECK_EVERY = 10


# what load_state_dict resumes from: the keys of state_dict
RESUME_KEYS = ("model", "optimizer", "scheduler", "scaler", "sampler", "per_rank")


class Pretrainer:
    """Builds the model, data and optimizer of a resolved :class:`~xlt.pretrain.plan.PretrainPlan` and
    trains it."""

    def __init__(self, plan: PretrainPlan, run_dir: str, d: Optional[distributed.Dist] = None):
        cfg = plan.config
        self.plan, self.cfg, self.run_dir = plan, cfg, os.fspath(run_dir)
        self.d = d or distributed.Dist()
        self.languages = list(plan.languages)
        self.vocab = Vocabulary.load(cfg.vocab)
        if self.vocab.sha256 != plan.vocab_sha256:  # the model's tables are sized from the planned one
            raise XltError("the vocabulary changed since the run was planned", cfg.vocab)
        self.train_stores = open_stores(cfg.train, self.vocab)
        self.dev_stores = open_stores(cfg.dev, self.vocab)

        seed_everything(cfg.seed)
        self.model_config = plan.model
        self.model = MaskedLM(self.model_config).to(self.d.device)
        if cfg.equal_copies_init:
            start_copies_equal(self.model.encoder)
        self.ddp_model = self._wrap_ddp(self.model)
        # Training steps go through the compiled wrapper; self.model (evaluation, checkpoints) keeps
        # its parameter names, so a compiled run's checkpoints load anywhere.
        self.train_model = torch.compile(self.ddp_model) if self._compiles() else self.ddp_model

        # Fused on CUDA: one kernel updates every tensor (measured in bench/bench_model_flops.py);
        # the CPU keeps the default path, so CPU runs stay bit for bit what they were.
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.lr, betas=tuple(cfg.adam_betas),
                                          weight_decay=cfg.weight_decay, fused=self.d.device.type == "cuda")
        self.scheduler = inverse_sqrt_schedule(self.optimizer, cfg.lr, cfg.warmup_steps, cfg.warmup_init_lr)
        self.autocast_dtype = self._autocast_dtype()
        self.scaler = torch.amp.GradScaler(self.d.device.type, enabled=self.autocast_dtype == torch.float16)

        self.masking = MaskTransform.from_vocabulary(plan.masking, self.vocab, self.languages)
        self.mask_generator = torch.Generator().manual_seed(cfg.seed * 1000 + 17 + self.d.rank)
        self.streams = self._streams(cfg.stream_len, cfg.batch_size)
        # The curriculum's first phase reads its own streams, so both phases resume exactly.
        self.short_streams = self._streams(cfg.short_stream_len, cfg.short_batch_size) if cfg.short_stream_len else {}
        # Same seed on every rank: all ranks train on the same language at each step.
        self.sampler = LanguageSampler(plan.sentences(), alpha=cfg.lang_alpha, seed=cfg.seed)
        self.step = 0
        self.best: dict[str, Any] = {"value": math.inf, "step": None}
        self.metrics = MetricsLog(os.path.join(self.run_dir, "metrics.jsonl"))
        self.unigram_ppl: dict[str, float] = {}  # constant (same targets, same counts): set at the first evaluation

    # ---- set-up helpers ---------------------------------------------------------------------
    def _streams(self, stream_len: int, batch_size: int) -> dict[str, LanguageStream]:
        return {l: LanguageStream(s, stream_len=stream_len, batch_size=batch_size, seed=self.cfg.seed,
                                  rank=self.d.rank, world_size=self.d.world_size, max_sentences=self.cfg.max_sentences)
                for l, s in self.train_stores.items()}

    def _wrap_ddp(self, model: torch.nn.Module) -> torch.nn.Module:
        if not self.d.enabled:
            return model
        from torch.nn.parallel import DistributedDataParallel

        # With language-specific parts, the other languages' copies get no gradient at a step.
        has_specific = any(True for _ in model.encoder.language_specific_parameters())
        ids = [self.d.device.index] if self.d.device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids, find_unused_parameters=has_specific)

    def _compiles(self) -> bool:
        """--compile on CUDA only. On the CPU, torch 2.13's inductor code gave NaN losses under
        ATEN_CPU_CAPABILITY=avx2 and once corrupted the heap (2026-11-27), and the small CPU models
        gain nothing from it: the run trains eagerly and says so."""
        if self.cfg.compile and self.d.device.type != "cuda":
            if self.d.is_main:
                log.info("--compile applies to CUDA only: training eagerly on the CPU")
            return False
        return self.cfg.compile

    def _autocast_dtype(self) -> Optional[torch.dtype]:
        p, dev = self.cfg.precision, self.d.device.type
        if p == "auto":
            if dev != "cuda":
                return None
            return torch.bfloat16 if torch.cuda.is_bf16_supported(including_emulation=False) else torch.float16
        if p == "fp32":
            return None
        if p == "fp16" and dev != "cuda":
            raise XltError("--precision fp16 needs a GPU; use bf16 or fp32 on CPU")
        return {"bf16": torch.bfloat16, "fp16": torch.float16}[p]

    def _autocast(self):
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.d.device.type, dtype=self.autocast_dtype)

    # ---- checkpoints ------------------------------------------------------------------------
    def _path(self, name: str) -> str:
        return os.path.join(self.run_dir, "checkpoints", name)

    def state_dict(self) -> dict[str, Any]:
        per_rank = distributed.gather_objects(self.d, {
            "rng": rng_state(), "mask_generator": self.mask_generator.get_state(),
            "streams": {l: s.state_dict() for l, s in self.streams.items()},
            "short_streams": {l: s.state_dict() for l, s in self.short_streams.items()}})
        return {"step": self.step, "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict(), "scaler": self.scaler.state_dict(),
                "sampler": self.sampler.state_dict(), "per_rank": per_rank, "best": dict(self.best),
                "config": self.cfg.to_dict(), "model_config": self.model_config.to_dict(),
                "vocab_sha256": self.vocab.sha256}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        missing = [k for k in RESUME_KEYS if k not in state] if isinstance(state, dict) else list(RESUME_KEYS)
        if missing:   # best.pt copied over it, a snapshot, another tool's file
            raise XltError(f"not a run's last checkpoint (no {', '.join(missing)}): cannot resume from it",
                           self._path("last.pt"))
        if len(state["per_rank"]) != self.d.world_size:
            raise XltError(f"checkpoint was written by {len(state['per_rank'])} processes, this run has "
                           f"{self.d.world_size}; resume with the same number", self._path("last.pt"))
        load_model_weights(self.model, state["model"], self._path("last.pt"))
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])
        self.sampler.load_state_dict(state["sampler"])
        mine = state["per_rank"][self.d.rank]
        set_rng_state(mine["rng"])
        self.mask_generator.set_state(mine["mask_generator"])
        for lang, s in mine["streams"].items():
            self.streams[lang].load_state_dict(s)
        for lang, s in mine.get("short_streams", {}).items():
            self.short_streams[lang].load_state_dict(s)
        self.step, self.best = state["step"], state["best"]

    def save(self, name: str, state: Optional[dict[str, Any]] = None) -> None:
        state = state if state is not None else self.state_dict()  # collective: every rank calls it
        if self.d.is_main:
            save_checkpoint(self._path(name), state)

    # ---- the loop ---------------------------------------------------------------------------
    def prepare_run_dir(self) -> bool:
        """Create or check the run directory (rank 0); return True, on every rank, when resuming."""
        return distributed.on_main(self.d, self._prepare_run_dir)

    def _prepare_run_dir(self) -> bool:
        return start_or_resume(self.run_dir, self.plan.to_dict(), self.vocab.sha256, self.cfg.codes,
                               {"train": self.train_stores, "dev": self.dev_stores})

    def _check_resumable(self) -> None:
        """What a resumed run cannot do, refused before its description says it will: go back to fewer
        steps, or write a snapshot of a step it has passed (the step's weights are gone)."""
        cfg, last = self.cfg, self._path("last.pt")
        if self.step > cfg.max_steps:
            raise XltError(f"the run is at step {self.step}, past --max-steps {cfg.max_steps}: a run is extended, "
                           "never cut back (give --max-steps of at least its step)", last)
        missed = [n for n in cfg.snapshot_at or () if n <= self.step and not os.path.exists(self._path(f"step-{n}.pt"))]
        if missed:
            raise XltError(f"--snapshot-at {', '.join(map(str, missed))}: the run is at step {self.step} and has no "
                           "such snapshot; a passed step's weights cannot be written (use a new directory)", last)
        every = cfg.snapshot_every or 0
        passed = [n for n in range(every, self.step + 1, every)
                  if not os.path.exists(self._path(f"step-{n}.pt"))] if every else []
        if passed:   # a series, not named steps: said, not refused (tracking starts where it can)
            shown = ", ".join(map(str, passed[:5])) + (f" and {len(passed) - 5} more" if len(passed) > 5 else "")
            log.info(f"note: --snapshot-every {every}: steps {shown} passed before this start and have no snapshot")

    def _describe(self, resolved: dict[str, Any], resumed_at_step: Optional[int]) -> None:
        describe_run(self.run_dir, resolved, self.cfg.vocab, self.vocab.sha256, self.cfg.codes,
                     {lang: tokenizer_config(self.cfg, lang) for lang in self.languages},
                     {"train": self.train_stores, "dev": self.dev_stores}, resumed_at_step, self.d.world_size,
                     self.d.device)

    def train(self) -> dict[str, Any]:
        """Train to ``max_steps`` (resuming if the run directory has a checkpoint); return a summary.
        What rank 0 alone checks and writes before the loop goes through ``distributed.on_main``, so
        that its refusal stops every rank with one line."""
        with contextlib.ExitStack() as held:
            def hold_the_run_dir() -> None:
                check_pretraining_run(self.run_dir)   # before the lock file: another tool's folder gets nothing
                make_directory(self.run_dir)
                held.enter_context(exclusive_lock(os.path.join(self.run_dir, ".lock")))
            distributed.on_main(self.d, hold_the_run_dir)
            stop = held.enter_context(sigterm_requested())
            resuming = self.prepare_run_dir()
            if resuming:
                self.load_state_dict(load_checkpoint(self._path("last.pt")))
            distributed.on_main(self.d, lambda: self._start(resuming))
            return self._loop(stop)

    def _start(self, resuming: bool) -> None:
        if resuming:
            self._check_resumable()
            log.info(f"resuming {self.run_dir} at step {self.step}")
        # the description is the run's once it is known to go on under it
        self._describe(self.plan.to_dict(), self.step if resuming else None)
        self.metrics.truncate_after(self.step)   # what a killed attempt logged after this step is logged again

    def _loop(self, stop: threading.Event) -> dict[str, Any]:
        cfg = self.cfg
        tokens_since, wait_since, t_since = 0, 0.0, time.perf_counter()
        pending: list[torch.Tensor] = []   # the losses of the steps since the last read-back, on the device
        with log.progress("pretrain", total=cfg.max_steps) as bar:
            bar.advance(self.step)
            while self.step < cfg.max_steps:
                t0 = time.perf_counter()
                streams = self.short_streams if self.step < cfg.short_stream_steps else self.streams
                langs = [self.sampler.next() for _ in range(cfg.langs_per_step)]
                batches = [(self.masking(self._known_ids(next(streams[lang]), self.train_stores[lang]), lang,
                                         self.mask_generator), lang) for lang in langs]
                wait_since += time.perf_counter() - t0
                lr = self.scheduler.get_last_lr()[0]   # the rate this step trains with (it steps the scheduler)
                pending.append(self._train_step(batches))
                self.step += 1
                tokens_since += sum(m.input_ids.numel() for m, _ in batches) * self.d.world_size
                bar.advance(1)
                logs = self.step % cfg.log_every == 0 or self.step == cfg.max_steps
                evaluates = self.step % cfg.eval_every == 0 or self.step == cfg.max_steps
                snapshots = snapshot_due(self.step, cfg.snapshot_every, cfg.snapshot_at)
                saves = self.step % cfg.save_every == 0 or self.step == cfg.max_steps
                # Reading a loss back waits for the GPU, so it is done only where a number is needed or a
                # file is written (a step never saves a NaN's weights). A single process looks at its
                # SIGTERM flag at every step; ranks decide a stop together, at a read-back.
                checks_stop = stop.is_set() if not self.d.enabled else self.step % STOP_CHECK_EVERY == 0
                if not (logs or evaluates or snapshots or saves or checks_stop):
                    continue
                loss, stopping = self._read_back(pending, stop.is_set())
                pending = []
                if logs:
                    loss = distributed.mean_over_ranks(self.d, loss)   # the step's whole batch, not rank 0's part
                    elapsed = time.perf_counter() - t_since
                    record = {"step": self.step, "lang": "+".join(langs), "loss": round(loss, 6),
                              "ppl": round(math.exp(min(loss, 50.0)), 4),
                              "lr": lr, "tokens_per_s": round(tokens_since / elapsed, 1),
                              "data_wait_s": round(wait_since, 4)}
                    bar.update(status=f"loss {loss:.3f}  {record['tokens_per_s']:,.0f} tok/s")
                    if self.d.is_main:
                        self.metrics.append(record)
                    tokens_since, wait_since, t_since = 0, 0.0, time.perf_counter()
                if evaluates:
                    self._evaluate_and_select()
                # Before last.pt: a run killed between the two replays this step and writes the snapshot then.
                if snapshots and self.d.is_main:
                    write_snapshot(self._path(""), self.step, self._snapshot_weights())
                if saves or stopping:
                    self.save("last.pt")
                if stopping and self.step < cfg.max_steps:
                    raise Terminated(f"stopped by SIGTERM after step {self.step}, checkpoint saved "
                                     f"({self._path('last.pt')}); the same command resumes the run")
        distributed.barrier(self.d)
        return {"step": self.step, "best": self.best, "run_dir": self.run_dir}

    def _known_ids(self, windows: torch.Tensor, store: TokenStore) -> torch.Tensor:
        """``windows``, checked to hold ids of the vocabulary: a damaged ``.bin`` (its sizes right, its
        ids not) would stop the embedding lookup with a traceback. A max over one batch on the CPU."""
        if windows.numel() and (top := int(windows.max())) >= len(self.vocab):
            raise XltError(f"token id {top} is beyond the vocabulary's {len(self.vocab)} entries: a damaged "
                           "store (binarize the text again)", f"{store.prefix}.bin")
        return windows

    def _train_step(self, batches: list) -> torch.Tensor:
        """One optimizer step over ``batches`` (masked batch, its language) pairs, their gradients summed.
        Returns the step's mean loss as a 0-dim tensor on the device, not read: on CUDA the step is
        queued and the CPU goes on to mask the next batch."""
        losses = []
        self.ddp_model.train()
        for masked, lang in batches:
            masked = masked.to(self.d.device)
            with self._autocast():
                loss = self.train_model(masked.input_ids, lang, None, masked.flat_positions, masked.target_ids)
            losses.append(loss.detach().float())
            # Each batch weighs 1/k: the step's gradient is that of the mean loss, so --lr keeps its meaning.
            self.scaler.scale(loss / len(batches)).backward()
        if self.cfg.clip_norm > 0:
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.clip_norm)
        scale = self.scaler.get_scale()   # a read-back only with fp16's scaler (bf16 and fp32 have none)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler.get_scale() >= scale:  # fp16: a lowered scale means the step was skipped (inf gradients)
            self.scheduler.step()
        return torch.stack(losses).mean()

    def _read_back(self, pending: list[torch.Tensor], stop_requested: bool) -> tuple[float, bool]:
        """The last step's loss and whether to stop after it (SIGTERM on any rank), from the losses of
        the steps since the last read-back. A loss that is not finite on any rank stops every rank,
        decided together in one all-reduce (a rank stopping alone would leave the others waiting),
        naming the first such step; the weights it trained are never saved."""
        values = torch.stack(pending).tolist()
        *bad, stopping = distributed.any_rank(self.d, *(not math.isfinite(v) for v in values), stop_requested)
        if any(bad):
            first = bad.index(True)
            last = self._path("last.pt")
            kept = f"the last good checkpoint is kept ({last})" if os.path.exists(last) else \
                "no checkpoint was saved yet"
            raise XltError(f"loss is not finite at step {self.step - len(values) + first + 1} (here: {values[first]}); "
                           f"stopped, {kept}; lower --lr or use --precision fp32/bf16")
        return values[-1], stopping

    # ---- evaluation -------------------------------------------------------------------------
    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Dev perplexity per language, with the same masks at every evaluation. Also sets
        ``self.unigram_ppl``: a unigram model's perplexity on the same targets (the floor to beat)."""
        self.model.eval()
        result = {}
        for lang, store in self.dev_stores.items():
            gen = torch.Generator().manual_seed(EVAL_MASK_SEED)
            windows = islice(iterate_eval(store, self.cfg.stream_len, self.cfg.batch_size), self.cfg.eval_batches)
            batches = (self.masking(self._known_ids(w, store), lang, gen, eval_mode=True) for w in windows)
            log_p = None if lang in self.unigram_ppl else unigram_log_probs(self.streams[lang].tokens, len(self.vocab))
            result[lang], unigram = masked_perplexity(self.model, batches, lang, self.d.device, self._autocast, log_p)
            if unigram is not None:
                self.unigram_ppl[lang] = unigram
        return result

    def _evaluate_and_select(self) -> None:
        ppl = self.evaluate() if self.d.is_main else None
        ppl = distributed.broadcast_object(self.d, ppl)
        value = (sum(ppl.values()) / len(ppl)) if self.cfg.select_on == "mean" else ppl[self.cfg.select_on]
        improved = value < self.best["value"]
        if improved:
            self.best = {"value": value, "step": self.step, "metric": f"valid_{self.cfg.select_on}_mlm_ppl"}
        if self.d.is_main:
            unigram = self.unigram_ppl
            self.metrics.append({"step": self.step, **{f"valid_{l}_mlm_ppl": round(v, 4) for l, v in ppl.items()},
                                 **{f"valid_{l}_unigram_ppl": round(v, 4) for l, v in unigram.items()},
                                 "best_step": self.best["step"]})
            log.info(f"step {self.step}: dev ppl " + ", ".join(f"{l} {v:.2f} (unigram {unigram[l]:.0f})"
                                                               for l, v in ppl.items())
                     + (" (best)" if improved else ""))
        if improved:
            self.save("best.pt", self._weights_only())

    def _snapshot_weights(self) -> dict[str, Any]:
        """What PretrainedRun.load reads: a snapshot is kept for every listed step, so it stays small."""
        return {"model": self.model.state_dict(), "model_config": self.model_config.to_dict(),
                "vocab_sha256": self.vocab.sha256}

    def _weights_only(self) -> dict[str, Any]:
        """What downstream stages load: weights and the configs that built them (no optimizer)."""
        return {"step": self.step, "model": self.model.state_dict(), "model_config": self.model_config.to_dict(),
                "config": self.cfg.to_dict(), "vocab_sha256": self.vocab.sha256, "best": dict(self.best)}


def pretrain(plan: PretrainPlan, run_dir: str) -> dict[str, Any]:
    """Library entry point of ``xlt pretrain`` (after :func:`xlt.pretrain.plan.resolve`): set up
    torchrun if present, train, tear down."""
    d = distributed.setup()
    try:
        return Pretrainer(plan, run_dir, d).train()
    finally:
        distributed.teardown(d)
