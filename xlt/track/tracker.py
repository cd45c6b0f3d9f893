"""``xlt track``: bring the records of every run's snapshots up to date, one snapshot at a time.

Per run: its random encoder first (snapshot ``random``: every bound; another tracker computing it is
waited for, since every snapshot's records carry its values), then each ``step-N`` snapshot in step
order whose records lack a measure. A snapshot is held under its lock (:func:`~xlt.track.snapshots.snapshot_lock`)
while evaluated; one another process holds is skipped, and the records are read again once the lock
is held, so no measure is computed twice. A snapshot's model is loaded only when it has work left:
an invocation with nothing new loads no model.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field
from typing import Optional

from xlt.model.xlt_run import run_languages
from xlt.pretrain.run_files import run_identity
from xlt.track.config import MEASURES, NEEDS, RANDOM, RANDOM_SEED, TrackConfig, is_trainer_series
from xlt.track.data import TrackData, load_data, prepare_ner
from xlt.track.measures import HIGHER_IS_BETTER, MEASURE_FUNCTIONS, Deferred, SnapshotEval
from xlt.track.records import RECORDS, Record, RecordIndex, append_records
from xlt.track.settings import check_and_record
from xlt.track.snapshots import list_snapshots, run_slug, snapshot_label, snapshot_lock
from xlt.track.textmemo import MemoText, TextMemo
from xlt.utils import log
from xlt.utils.errors import XltError
from xlt.utils.outputs import atomic_output, make_directory


@dataclass
class TrackSummary:
    """What one invocation did."""

    records: int = 0
    evaluated: list[tuple[str, str]] = field(default_factory=list)   # (run, snapshot) with new records
    busy: list[tuple[str, str]] = field(default_factory=list)        # held by another process, skipped
    deferred: list[tuple[str, str, str]] = field(default_factory=list)  # (run, snapshot, measure) for later
    failed: list[tuple[str, str, str]] = field(default_factory=list)    # (run, snapshot, measure), said why


def chosen_measures(cfg: TrackConfig) -> tuple[list[str], list[str]]:
    """--measures (default all), less those whose data is not given: (the measures, a note for each
    one skipped, said once the inputs are checked, so that a bad input is the only line)."""
    wanted = cfg.measures or list(MEASURES)
    kept, notes = [], []
    for name in MEASURES:
        if name not in wanted:
            continue
        if cfg.has_data(name):
            kept.append(name)
        else:
            notes.append(f"{name}: skipped (its data is not given: {NEEDS[name]})")
    return kept, notes


class RunTracker:
    """One run: its languages, text memo, dev-perplexity evaluator, and its snapshots' evaluation."""

    def __init__(self, cfg: TrackConfig, index: int, measures: list[str], data: TrackData, device,
                 summary: TrackSummary):
        self.cfg, self.run, self.label = cfg, cfg.runs[index], cfg.label(index)
        self.measures, self.data, self.device = measures, data, device
        self.records: Optional[RecordIndex] = None   # the tracking directory's, given to track()
        self.summary = summary
        self.track_dir = cfg.output
        self.source, self.target = cfg.source_lang, None
        self.corpora: Optional[tuple[str, str]] = None
        self.ner_dir: Optional[str] = None
        self.memo: Optional[TextMemo] = None
        self.prepared = False
        self._pretrainer = None
        # A Trainer's checkpoint-N folders are read through the model-kind registry; they come with no
        # xlt dev stores, and each folder carries its own tokenizer (no one text pipeline to memoise).
        self.series = is_trainer_series(self.run)
        self.run_id = None if self.series else run_identity(self.run)
        # The languages, where known before any snapshot is loaded, check --source-lang/--target-lang
        # before the tracking directory is made or written: an xlt run's, and a series' whose config
        # names them (an XLM's lang2id; one that names none takes the options' languages).
        if self.series:
            if "dev_ppl" in self.measures:
                log.info(f"{self.label} dev_ppl: skipped (a transformers Trainer's output has no xlt pretraining "
                         "config.json and dev stores to measure perplexity on)")
                self.measures = [m for m in self.measures if m != "dev_ppl"]
            from xlt.model.hf_finetune import config_languages

            named = config_languages(self.run, list_snapshots(self.run)[-1][1])
            if named:
                self._languages(named)
        elif os.path.exists(os.path.join(self.run, "text.json")):
            self._languages(run_languages(self.run))

    # ---- set-up, once a snapshot needs work ------------------------------------------------------
    def _languages(self, languages: list[str]) -> None:
        if not languages:   # a transformers model that takes any language: the options name them
            if self.cfg.target_lang is None:
                raise XltError("this transformers model's config names no languages: give --target-lang "
                               "(and --source-lang)", self.run)
            languages = [self.source, self.cfg.target_lang]
        if self.cfg.target_lang is not None and self.cfg.target_lang not in languages:
            raise XltError(f"--target-lang {self.cfg.target_lang!r} is not one of the run's languages "
                           f"({', '.join(languages)})", self.run)
        if self.source not in languages:
            raise XltError(f"--source-lang {self.source!r} is not one of the run's languages "
                           f"({', '.join(languages)})", self.run)
        others = [lang for lang in languages if lang != self.source
                  and self.cfg.target_lang in (None, lang)]
        if len(others) != 1:
            raise XltError(f"xlt track measures bilingual runs; this one has {', '.join(languages)}", self.run)
        self.target = others[0]

    def _prepare(self, languages: list[str]) -> None:
        """Languages, text memo, contextual corpora and NER files: once per run and invocation."""
        if self.prepared:
            return
        self._languages(languages)
        if not self.series:
            self.memo = TextMemo(os.path.join(self.track_dir, "cache"), self.run)
        if {"word_p1", "word_mrr"} & set(self.measures):
            if self.cfg.word_corpus is not None:
                self.corpora = self.cfg.word_corpus
            elif self.data.parallel is not None:
                self.corpora = tuple(self._corpus_file(lang, lines)
                                     for lang, lines in zip((self.source, self.target), self.data.parallel))
        if "ner_f1" in self.measures:
            self.ner_dir = prepare_ner(self.cfg.ner_data_dir, os.path.join(self.track_dir, "data"),
                                       [self.source, self.target], self.source, self.cfg.ner_train_sentences,
                                       self.cfg.max_sentences)
        self.prepared = True

    def _corpus_file(self, lang: str, lines: list[str]) -> str:
        """The parallel side as a plain file (what contextual_space reads), named by its content."""
        text = "".join(line + "\n" for line in lines)
        path = os.path.join(make_directory(os.path.join(self.track_dir, "data")),
                            f"corpus-{hashlib.sha256(text.encode()).hexdigest()[:16]}.{lang}.txt")
        if not os.path.exists(path):
            with atomic_output(path) as f:
                f.write(text)
        return path

    def pretrainer(self):
        """The run's own pretraining set-up (config.json, dev stores, masks), its model to be replaced by
        each snapshot's weights: dev perplexity is what pretraining's evaluation computes."""
        if self._pretrainer is None:
            import typing

            from xlt.pretrain.config import PretrainConfig
            from xlt.pretrain.distributed import Dist
            from xlt.pretrain.plan import resolve
            from xlt.pretrain.trainer import Pretrainer
            from xlt.utils.rundir import read_run_description
            from xlt.utils.typed import conform

            path = os.path.join(self.run, "config.json")
            raw = read_run_description(path)["config"]
            hints = typing.get_type_hints(PretrainConfig)
            values = {k: conform(v, hints[k], f"setting {k}", path=path) for k, v in raw.items() if k in hints}
            # The run's own copy of the vocabulary; codes only segment new text, which dev stores are not.
            values.update(vocab=os.path.join(self.run, "vocab"), codes={})
            try:
                self._pretrainer = Pretrainer(resolve(PretrainConfig(**values)), self.run, Dist(device=self.device))
            except XltError as e:
                # Store paths are as pretraining was given them (relative to where it ran), and stores
                # may be deleted to save disk: the other measures go on.
                raise Deferred(f"the run's token stores cannot be read ({e}); run xlt track from where pretraining "
                               "ran") from None
        return self._pretrainer

    # ---- snapshots -------------------------------------------------------------------------------
    def missing(self, snapshot: str) -> list[str]:
        return [m for m in self.measures if not self.records.is_done(self.run, snapshot, m)]

    def computable(self, snapshot: str) -> list[str]:
        """The measures ``snapshot`` lacks that can be computed now: a snapshot's record carries the
        random encoder's value as its bound, so a measure waits for that (dev_ppl's bound is its own)."""
        if snapshot == RANDOM:
            return self.missing(RANDOM)
        return [m for m in self.missing(snapshot) if m == "dev_ppl" or self.records.is_done(self.run, RANDOM, m)]

    def track(self, records: RecordIndex) -> None:
        self.records = records
        self.records.check_run(self.run, self.run_id)
        snapshots = list_snapshots(self.run)
        if not snapshots:
            log.info(f"{self.label}: no snapshot yet ({os.path.join(self.run, 'checkpoints', 'step-N.pt')})")
            return
        if not self.missing(RANDOM) and not any(self.missing(name) for _, name in snapshots):
            log.info(f"{self.label}: {len(snapshots)} snapshot(s), all tracked")
            return
        # Waited for, not skipped when another process holds it: every snapshot's records need the bounds.
        with snapshot_lock(self.track_dir, self.run, RANDOM, wait=True):
            self.records.refresh()
            if self.missing(RANDOM):
                # A Trainer's newest folder may still be being written; its first is whole.
                self.evaluate(RANDOM, None, snapshots[0 if self.series else -1][1])
        todo = [(step, name) for step, name in snapshots if self.computable(name)]
        for measure in self.measures:
            waiting = [name for _, name in snapshots if measure in set(self.missing(name)) - set(self.computable(name))]
            if waiting:
                log.info(f"{self.label} {measure}: {len(waiting)} snapshot(s) wait for the random encoder's bound")
                self.summary.deferred += [(self.run, name, measure) for name in waiting]
        log.info(f"{self.label}: {len(snapshots)} snapshot(s), {len(todo)} with measures to compute")
        with log.progress(f"track {self.label}", total=len(todo), unit="snapshots") as bar:
            for step, name in todo:
                with snapshot_lock(self.track_dir, self.run, name) as held:
                    if not held:
                        log.info(f"{self.label} {name}: being evaluated by another process, skipped")
                        self.summary.busy.append((self.run, name))
                    else:
                        self.records.refresh()
                        if self.computable(name):
                            self.evaluate(name, step, name)
                bar.advance(1)
        if self.memo is not None:
            self.memo.save()

    def _load(self, snapshot: str, checkpoint: str):
        if self.series:
            from xlt.loader.text_model import load_text_model
            from xlt.model.hf_finetune import config_languages

            self._prepare(config_languages(self.run, checkpoint))
            try:
                model = load_text_model(self.run, checkpoint, self.device)
            except XltError as e:
                # The Trainer writes config.json before the weights: a folder it is still saving is
                # listed but not whole yet. The next call tries it again.
                raise Deferred(f"its checkpoint folder cannot be loaded yet: {e}") from None
            # The bound: the series' config freshly initialised, as xlt finetune --checkpoint untrained.
            return model.random_like(RANDOM_SEED) if snapshot == RANDOM else model
        from xlt.model.xlt_run import PretrainedRun

        run = PretrainedRun.load(self.run, checkpoint, self.device)
        self._prepare(run.languages)
        if snapshot == RANDOM:
            run = run.random_like(RANDOM_SEED)
        return MemoText(run, self.memo)

    def evaluate(self, snapshot: str, step: Optional[int], checkpoint: str) -> None:
        """Compute and append the measures ``snapshot`` lacks (the random encoder: built on
        ``checkpoint``'s architecture)."""
        where = snapshot_label(step, snapshot)
        try:
            evaluation = SnapshotEval(self, snapshot, self._load(snapshot, checkpoint))
        except Deferred as e:
            log.info(f"{self.label} {where}: later ({e})")
            self.summary.deferred += [(self.run, snapshot, m) for m in self.computable(snapshot)]
            return
        written = 0
        for measure in self.computable(snapshot):
            start = time.perf_counter()
            try:
                rows = MEASURE_FUNCTIONS[measure](self, evaluation)
            except Deferred as e:
                log.info(f"{self.label} {where} {measure}: later ({e})")
                self.summary.deferred.append((self.run, snapshot, measure))
                continue
            except XltError as e:
                # One measure's bad input must not hold up the others, nor the later snapshots a cron
                # job would otherwise never reach: said, counted, tried again next call.
                log.info(f"{self.label} {where} {measure}: FAILED: {e}")
                self.summary.failed.append((self.run, snapshot, measure))
                continue
            seconds = time.perf_counter() - start
            records = [Record(self.run, self.label, snapshot, step, measure, lang, layer, value,
                              own if (own is not None or snapshot == RANDOM)
                              else self.records.bound(self.run, measure, lang, layer),
                              HIGHER_IS_BETTER[measure], seconds, self.run_id)
                       for lang, layer, value, own in rows]
            append_records(os.path.join(self.track_dir, RECORDS), records)
            self.records.refresh()
            written += len(records)
            log.info(f"{self.label} {where} {measure}: {_describe(rows)} ({seconds:.1f} s)")
        self.summary.records += written
        if written:
            self.summary.evaluated.append((self.run, snapshot))
        if self.memo is not None:
            self.memo.save()


def _describe(rows) -> str:
    shown = [f"{lang or ''}{'' if layer is None else f' L{layer}'} {value:.4g}" for lang, layer, value, _ in rows]
    return ", ".join(shown[:4]) + (f", ... ({len(rows)} values)" if len(shown) > 4 else "")


def track(cfg: TrackConfig) -> TrackSummary:
    """Library entry point of ``xlt track``: every run's new snapshots and measures, recorded."""
    from xlt.utils.device import resolve_device

    cfg.validate()
    measures, skipped = chosen_measures(cfg)
    if not measures:
        raise XltError("no measure to compute: give the data of one (see xlt track --help)")
    device = resolve_device(cfg.device)
    data = load_data(cfg, measures)   # a bad data file is refused before the tracking directory exists
    summary = TrackSummary()
    # each run's description and languages are read first: a bad run leaves no directory behind either
    trackers = [RunTracker(cfg, index, measures, data, device, summary) for index in range(len(cfg.runs))]
    for note in skipped:
        log.info(note)
    make_directory(cfg.output)
    check_and_record(cfg)   # before any record: one directory, one setting per measure
    records = RecordIndex(os.path.join(cfg.output, RECORDS))
    for tracker in trackers:
        tracker.track(records)
    return summary
