"""The measures of one snapshot, each through the library function that computes it elsewhere.

* dev_ppl -- :meth:`xlt.pretrain.trainer.Pretrainer.evaluate` on the run's own dev stores and
  settings (the same masks as pretraining's valid_*_mlm_ppl), its unigram perplexity the bound;
* cka -- :func:`xlt.analysis.cka.per_layer_cka` of :func:`xlt.analysis.extract.sentence_vectors`
  of the parallel sentences (Figure 7's measure);
* word_p1 / word_mrr -- :func:`xlt.analysis.align.evaluate_spaces` in the joint space (no map, Liu et
  al.): layer 0 on the token embedding table (:func:`~xlt.analysis.align.embedding_space`), layers
  1..L on mean contextual word vectors over a corpus (:func:`~xlt.analysis.align.contextual_space`);
  P@1 by cosine over the whole target space, MRR among the dictionary's target words; pairs of one
  string are left out (in a joint vocabulary they are one row: rank 1 for free);
* sentence_p1 -- Tatoeba: each target sentence's nearest source sentence by cosine of the mean-pooled
  vectors (:func:`xlt.analysis.retrieval.topk_cosine`), as XTREME, no map;
* lang_id -- the language-identity signal (Liu et al. 2020: each language has its own mean): the
  share of the sentence vectors' variance (both languages together) that the two language means
  explain. Graded where the share of sentences nearer their own language's mean is not: that
  accuracy was 1.0 at every layer of the demo's random encoder already (measured), so no curve;
* ner_f1 -- :func:`xlt.finetune.runner.finetune` on the source language's NER data from this
  snapshot (the random encoder: ``--checkpoint untrained``), test F1 of the source and the target.

A transformers Trainer's output (``checkpoint-N/`` folders) is read through
:func:`xlt.loader.text_model.load_text_model` and fine-tuned with ``--checkpoint step-N``; it has no
dev_ppl (no xlt dev stores).

Each returns rows ``(lang, layer, value, own_bound)``; ``own_bound`` is dev_ppl's unigram, else None.
Shapes: L + 1 layers (0 = embeddings), N sentences, D = d_model.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Optional

import numpy as np

from xlt.utils.errors import XltError

# xlt.track.tracker.RunTracker: its run, languages, settings, data and device (not imported: it imports this module)
RunTracker = Any
Row = tuple[Optional[str], Optional[int], float, Optional[float]]
# lang_id: cross-lingual structure is a space where language explains less. The smoke scale's models
# fell from the random encoder's 0.85-0.92 to 0.5-0.6 in the middle layers within 300 steps (measured),
# so "emerges" reads as falling clearly below the bound.
HIGHER_IS_BETTER = {"dev_ppl": False, "cka": True, "word_p1": True, "word_mrr": True, "sentence_p1": True,
                    "lang_id": False, "ner_f1": True}


class Deferred(Exception):
    """A measure that cannot be computed yet (its input is not written yet); the next invocation will."""


class SnapshotEval:
    """One snapshot's model (a :class:`~xlt.track.textmemo.MemoText`) and what its measures share:
    the sentence vectors of each data set and language, and the word retrieval results."""

    def __init__(self, tracker: RunTracker, name: str, model):
        self.tracker, self.name, self.model = tracker, name, model
        self._vectors: dict[tuple[str, str], np.ndarray] = {}
        self._words: Optional[dict[int, dict]] = None

    def sentences(self, which: str, side: int) -> np.ndarray:
        """Mean-pooled sentence vectors of the data set ``which`` (parallel, tatoeba), side 0 (source)
        or 1 (target): float32 [L+1, N, D]."""
        from xlt.analysis.extract import sentence_vectors

        t = self.tracker
        lang = (t.source, t.target)[side]
        if (which, lang) not in self._vectors:
            lines = getattr(t.data, which)[side]
            self._vectors[which, lang] = sentence_vectors(self.model, lang, lines, None, t.cfg.batch_size, t.device)
        return self._vectors[which, lang]

    def word_results(self) -> dict[int, dict]:
        """Word retrieval per layer: {layer: evaluate_spaces' result of that layer}."""
        if self._words is None:
            self._words = word_retrieval(self.tracker, self.model)
        return self._words


def dev_ppl(t: RunTracker, s: SnapshotEval) -> list[Row]:
    from xlt.model.checkpoint_io import load_model_weights

    trainer = t.pretrainer()
    load_model_weights(trainer.model, s.model.model.state_dict(), s.name)
    ppl = trainer.evaluate()
    return [(lang, None, value, trainer.unigram_ppl.get(lang)) for lang, value in ppl.items()]


def cka(t: RunTracker, s: SnapshotEval) -> list[Row]:
    from xlt.analysis.cka import per_layer_cka

    values = per_layer_cka(s.sentences("parallel", 0), s.sentences("parallel", 1))
    return [(t.target, layer, float(v), None) for layer, v in enumerate(values)]


def sentence_p1(t: RunTracker, s: SnapshotEval) -> list[Row]:
    from xlt.analysis.retrieval import topk_cosine

    source, target = s.sentences("tatoeba", 0), s.sentences("tatoeba", 1)
    expected = np.arange(source.shape[1])
    rows = []
    for layer in range(source.shape[0]):
        _, nearest = topk_cosine(target[layer], source[layer], k=1, device=t.device)  # xx -> en, as XTREME
        rows.append((t.target, layer, float((nearest[:, 0] == expected).mean()), None))
    return rows


def language_variance_share(a: np.ndarray, b: np.ndarray) -> float:
    """The share of the variance of the rows of a [N,D] and b [M,D] together that their two means
    explain: between-language over total sum of squares (eta squared), in [0, 1]. 1: each language
    sits at its own mean; 0: both languages share one mean."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    mean = np.concatenate([a, b]).mean(axis=0)
    between = len(a) * ((a.mean(axis=0) - mean) ** 2).sum() + len(b) * ((b.mean(axis=0) - mean) ** 2).sum()
    total = ((a - mean) ** 2).sum() + ((b - mean) ** 2).sum()
    return float(between / total) if total > 0 else 0.0


def lang_id(t: RunTracker, s: SnapshotEval) -> list[Row]:
    which = "parallel" if t.data.parallel is not None else "tatoeba"
    source, target = s.sentences(which, 0), s.sentences(which, 1)
    return [(t.target, layer, language_variance_share(source[layer], target[layer]), None)
            for layer in range(source.shape[0])]


def word_retrieval(t: RunTracker, model) -> dict[int, dict]:
    """Layer 0: the embedding tables; layers 1..L: contextual words of the corpus (--word-corpus, else
    the parallel sentences), when there is one."""
    from xlt.analysis.align import contextual_space, embedding_space, evaluate_spaces
    from xlt.analysis.align_settings import AlignSettings, WordSettings

    settings = AlignSettings(batch_size=t.cfg.batch_size, device=str(t.device))
    # Pairs of one string are rank 1 in a joint vocabulary whatever the model learned (a random
    # encoder's P@1 was 0.47 on MUSE en-fr at the demo scale): left out, the curve shows learning.
    word = WordSettings(map="none", csls=False, drop_identical=True)
    pairs, dictionary = t.data.dictionary_pairs, t.cfg.dictionary
    source, source_key = embedding_space(model, t.source, [p[0] for p in pairs], "mean")
    target, target_key = embedding_space(model, t.target, [p[1] for p in pairs], "mean")
    found = evaluate_spaces(source, target, None, dictionary, settings, word, [0], source_key.get, target_key.get)
    results = {0: found["results"][0]}
    if t.corpora is not None:
        layers = list(range(1, model.n_layers + 1))
        n = t.cfg.word_sentences if t.cfg.word_corpus is not None else len(t.data.parallel[0])
        words = t.cfg.max_words
        source = contextual_space(model, t.source, t.corpora[0], n, words, layers, "mean", settings)
        target = contextual_space(model, t.target, t.corpora[1], n, words, layers, "mean", settings)
        found = evaluate_spaces(source, target, None, dictionary, settings, word, layers,
                                lambda w: " ".join(model.split_words(t.source, w)),
                                lambda w: " ".join(model.split_words(t.target, w)))
        results.update({r["layer"]: r for r in found["results"]})
    return results


def word_p1(t: RunTracker, s: SnapshotEval) -> list[Row]:
    return [(t.target, layer, r["nn"]["p@1"], None) for layer, r in sorted(s.word_results().items())]


def word_mrr(t: RunTracker, s: SnapshotEval) -> list[Row]:
    return [(t.target, layer, r["mrr"], None) for layer, r in sorted(s.word_results().items())]


def ner_f1(t: RunTracker, s: SnapshotEval) -> list[Row]:
    from xlt.finetune.config import FinetuneConfig
    from xlt.finetune.runner import EXIT_OK, finetune
    from xlt.track.config import RANDOM
    from xlt.track.snapshots import run_slug

    cfg = t.cfg
    checkpoint = "untrained" if s.name == RANDOM else s.name
    model = t.run
    if checkpoint == "untrained" and t.series:
        # A Trainer's output has no model of its own: its first checkpoint-N folder's config (whole, unlike
        # a newest one the Trainer may still be writing), re-initialised; the random encoder's too.
        from xlt.model.spec import hf_model_dir
        from xlt.track.snapshots import list_snapshots

        model = hf_model_dir(t.run, list_snapshots(t.run)[0][1])
    elif checkpoint == "untrained" and not os.path.exists(os.path.join(t.run, "checkpoints", "best.pt")):
        # xlt finetune builds its untrained encoder from best.pt's architecture, written at the first evaluation.
        raise Deferred("the untrained control needs checkpoints/best.pt, not written yet")
    output = os.path.join(t.track_dir, "ner", run_slug(t.run), s.name)
    outcome = finetune(FinetuneConfig(
        task="ner", model=model, output=output, checkpoint=checkpoint, source=t.source, targets=[t.target],
        data_dir=t.ner_dir, batch_size=[cfg.ner_batch_size], encoder_lr=[cfg.ner_lr], seeds=[12],
        epochs=cfg.ner_epochs, max_len=cfg.ner_max_len, device=str(t.device), keep_weights=False, predictions=False))
    if outcome.exit_code != EXIT_OK:
        raise XltError(f"NER fine-tuning from {s.name} did not finish (exit {outcome.exit_code}); see its "
                       "runs/*/error.txt", output)
    selected = outcome.results["summary"]["selected"]["variants"]["plain"]
    return [(lang, None, selected[lang]["test"]["mean"], None) for lang in (t.source, t.target)]


MEASURE_FUNCTIONS: dict[str, Callable[[RunTracker, SnapshotEval], list[Row]]] = {
    "dev_ppl": dev_ppl, "cka": cka, "word_p1": word_p1, "word_mrr": word_mrr, "sentence_p1": sentence_p1,
    "lang_id": lang_id, "ner_f1": ner_f1}
