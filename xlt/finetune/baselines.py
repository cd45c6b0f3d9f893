"""Trivial baselines of a fine-tuning task, from its data files alone (no model): ``xlt baselines``.

A fine-tuned score means little without the score of a model that learned nothing about the text.
Each baseline here is fitted on the training file (or on nothing) and scored on each test file by
the task's own ``evaluate``, after the task's own reader and label check: the same formats, errors,
metric code and settings (``--task-option``) as ``xlt finetune``, so the numbers are comparable.

* **xnli** -- ``chance``: 100/3, the expected accuracy of a uniform guess among the three labels
  (whatever the test labels' distribution); ``majority class``: the training file's most frequent
  label for every pair.
* **ner** -- ``all O``: no entity (F1 0 by construction, computed all the same);
  ``training entities``: every maximal word span of the test text that is, word for word (case
  included), an entity of the training file, tagged with that string's most frequent training type;
  the longest match wins, left to right (a gazetteer of the training set).
* **parse** -- ``next word is the head`` (the last word attaches to the root) and ``previous word is
  the head`` (the first word attaches to the root); each word's relation is the one most frequent
  in training for its UPOS (the test file's gold UPOS), else the most frequent overall.

Ties (equally frequent labels, types, relations; equal baseline scores) go to the alphabetically
first label and to the baseline listed first, so the output depends only on the files.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from xlt.finetune.registry import get_task
from xlt.finetune.task import Task
from xlt.text.tokenize import check_language
from xlt.utils.errors import XltError
from xlt.utils.outputs import check_output_paths, write_json
from xlt.utils.textio import file_sha256

BASELINES_FORMAT = "xlt-baselines/1"

Scorer = Callable[[Sequence[Any]], dict[str, float]]   # test examples -> the task's metrics


@dataclass
class Baseline:
    name: str
    description: str
    score: Scorer


@dataclass
class BaselineScores:
    """Every baseline's metrics on every test file, and the best on the task's headline metric."""

    task: str
    metric: str                                    # the headline metric: accuracy, f1 or las
    settings: dict[str, Any]                       # --task-option values, as given
    train: dict[str, Any]                          # lang, path, sha256
    eval: dict[str, dict[str, Any]]                # lang -> path, sha256
    descriptions: dict[str, str]                   # baseline name -> what it predicts
    scores: dict[str, dict[str, dict[str, float]]]  # lang -> baseline name -> metric -> value

    def best(self) -> dict[str, dict[str, Any]]:
        out = {}
        for lang, by_name in self.scores.items():
            # max() keeps the first of equal scores: the baseline listed first.
            name = max(by_name, key=lambda n: by_name[n][self.metric])
            out[lang] = {"name": name, "score": by_name[name][self.metric], "metric": self.metric}
        return out

    def to_json(self) -> dict[str, Any]:
        return {"format": BASELINES_FORMAT, "task": self.task, "metric": self.metric,
                "task_settings": self.settings, "train": self.train, "eval": self.eval,
                "baselines": self.descriptions, "scores": self.scores, "best": self.best()}


def most_frequent(counts: Counter) -> str:
    """The most frequent key, ties to the alphabetically first."""
    return min(counts.items(), key=lambda item: (-item[1], item[0]))[0]


def scored_by(task: Task, labels: list[str], predict: Callable[[Sequence[Any]], dict[int, list[Any]]]) -> Scorer:
    """A scorer that predicts in the task's decoded form and hands over to ``task.evaluate``."""
    return lambda examples: task.evaluate(examples, predict(examples), labels)


# ---- xnli --------------------------------------------------------------------------------------
def xnli_baselines(task: Task, train: Sequence[Any], labels: list[str]) -> list[Baseline]:
    majority = most_frequent(Counter(pair.label for pair in train))
    return [
        Baseline("chance", f"a uniform guess among the {len(labels)} labels (expected accuracy)",
                 lambda examples: {"accuracy": 100.0 / len(labels)}),
        Baseline("majority class", f"the most frequent training label ({majority}) for every pair",
                 scored_by(task, labels, lambda examples: {i: [majority] for i in range(len(examples))})),
    ]


# ---- ner ---------------------------------------------------------------------------------------
def training_entities(train: Sequence[Any]) -> dict[tuple[str, ...], str]:
    """Each entity string of the training file (a tuple of words) -> its most frequent type."""
    from seqeval.metrics.sequence_labeling import get_entities   # lazily: it imports scikit-learn (~1.6 s)

    types: dict[tuple[str, ...], Counter] = {}
    for sentence in train:
        for kind, first, last in get_entities(sentence.tags):   # seqeval's spans: the metric's reading
            types.setdefault(tuple(sentence.words[first:last + 1]), Counter())[kind] += 1
    return {words: most_frequent(counts) for words, counts in types.items()}


def tag_known_entities(words: Sequence[str], entities: dict[tuple[str, ...], str], longest: int) -> list[str]:
    """BIO tags of the maximal spans of ``words`` found in ``entities``: longest first, left to right."""
    tags = ["O"] * len(words)
    i = 0
    while i < len(words):
        for length in range(min(longest, len(words) - i), 0, -1):
            kind = entities.get(tuple(words[i:i + length]))
            if kind is not None:
                tags[i:i + length] = [f"B-{kind}"] + [f"I-{kind}"] * (length - 1)
                i += length
                break
        else:
            i += 1
    return tags


def ner_baselines(task: Task, train: Sequence[Any], labels: list[str]) -> list[Baseline]:
    entities = training_entities(train)
    longest = max((len(words) for words in entities), default=0)

    def rows(tagging: Callable[[Any], list[str]]) -> Callable[[Sequence[Any]], dict[int, list[Any]]]:
        # One decoded row per sentence: (word index, tag) for every word, as the tagger head decodes.
        return lambda examples: {i: [list(enumerate(tagging(s)))] for i, s in enumerate(examples)}

    return [
        Baseline("all O", "no entity at all", scored_by(task, labels, rows(lambda s: ["O"] * len(s.words)))),
        Baseline("training entities",
                 f"every maximal word span equal to one of the {len(entities):,} entity strings of the training "
                 "file, tagged with its most frequent training type (longest match first, left to right)",
                 scored_by(task, labels, rows(lambda s: tag_known_entities(s.words, entities, longest)))),
    ]


# ---- parse -------------------------------------------------------------------------------------
def relations_by_upos(task: Task, train: Sequence[Any]) -> tuple[dict[str, str], str]:
    """UPOS -> its most frequent training relation, and the most frequent relation overall (both as
    the task compares them: without subtypes when it strips them)."""
    per_upos: dict[str, Counter] = {}
    overall: Counter = Counter()
    for tree in train:
        for upos, relation in zip(tree.upos, tree.relations):
            relation = task.relation(relation)  # type: ignore[attr-defined]
            per_upos.setdefault(upos, Counter())[relation] += 1
            overall[relation] += 1
    return {upos: most_frequent(counts) for upos, counts in per_upos.items()}, most_frequent(overall)


def parse_baselines(task: Task, train: Sequence[Any], labels: list[str]) -> list[Baseline]:
    by_upos, fallback = relations_by_upos(task, train)

    def trees(heads_of: Callable[[int], list[int]]) -> Callable[[Sequence[Any]], dict[int, list[Any]]]:
        return lambda examples: {i: [(heads_of(len(t.words)), [by_upos.get(u, fallback) for u in t.upos])]
                                 for i, t in enumerate(examples)}

    relation_rule = (f"relation: the most frequent in training for the word's UPOS (else {fallback})")
    return [
        # Heads are 1-based word numbers, 0 the root: word k's head is k+1, the last word's the root.
        Baseline("next word is the head", f"each word attached to the next one, the last to the root; {relation_rule}",
                 scored_by(task, labels, trees(lambda n: [*range(2, n + 1), 0]))),
        Baseline("previous word is the head",
                 f"each word attached to the previous one, the first to the root; {relation_rule}",
                 scored_by(task, labels, trees(lambda n: [0, *range(1, n)]))),
    ]


BASELINES: dict[str, Callable[[Task, Sequence[Any], list[str]], list[Baseline]]] = {
    "xnli": xnli_baselines, "ner": ner_baselines, "parse": parse_baselines}


# ---- the command -------------------------------------------------------------------------------
def _file(path: str) -> dict[str, Any]:
    return {"path": path, **({"sha256": file_sha256(path)} if path != "-" and os.path.isfile(path) else {})}


def check_scoring_settings(task: Task, settings: dict[str, Any]) -> None:
    """Refuse a task setting of the fine-tuned model (a head's width, dropout, pooling): the baselines
    have no model, so it would change no score, yet it would be recorded as the file's settings. The
    settings that change how predictions are scored carry ``"scoring": True`` in their metadata."""
    fields = {f.name: f for f in dataclasses.fields(task.settings)} if dataclasses.is_dataclass(
        getattr(task, "settings", None)) else {}
    for name in settings:
        if name in fields and not fields[name].metadata.get("scoring"):
            scoring = ", ".join(n for n, f in fields.items() if f.metadata.get("scoring")) or "none"
            raise XltError(f"--task-option {name}: a setting of the fine-tuned {task.name} model, which the baselines "
                           f"do not have (the settings that change their scores: {scoring}): leave it out")


def compute_baselines(task_name: str, train: tuple[str, str], evals: Sequence[tuple[str, str]],
                      settings: Optional[dict[str, Any]] = None) -> BaselineScores:
    """Fit the task's baselines on ``train`` = (lang, path) and score them on each (lang, path) of ``evals``.

    Every file is read and checked (the task's reader and label check) before anything is scored.
    """
    if task_name not in BASELINES:
        raise XltError(f"unknown task {task_name!r}; xlt baselines knows: {', '.join(BASELINES)}")
    if not evals:
        raise XltError("no --eval LANG TEST_FILE given")
    seen: set[str] = set()
    for lang, _ in evals:
        if lang in seen:
            raise XltError(f"--eval {lang} given twice")
        seen.add(lang)
    settings = dict(settings or {})
    task = get_task(task_name, **settings)
    check_scoring_settings(task, settings)
    train_lang, train_path = train
    train_examples = task.read(train_path)
    labels = task.labels(train_examples)
    tests = {}
    for lang, path in evals:
        tests[lang] = task.read(path)
        task.check(tests[lang], labels)
    baselines = BASELINES[task_name](task, train_examples, labels)
    scores = {lang: {b.name: b.score(examples) for b in baselines} for lang, examples in tests.items()}
    return BaselineScores(task_name, task.main_metric, settings, {"lang": train_lang, **_file(train_path)},
                          {lang: _file(path) for lang, path in evals}, {b.name: b.description for b in baselines},
                          scores)


def markdown(result: BaselineScores) -> str:
    """The scores as a Markdown table, one line per test file and baseline, the best marked."""
    metrics = list(next(iter(next(iter(result.scores.values())).values())))
    metrics.sort(key=lambda m: m != result.metric)     # the headline metric first
    best = result.best()
    lines = [f"# xlt baselines {result.task}: trained on {result.train['lang']} ({result.train['path']})", "",
             "| test | baseline | " + " | ".join(metrics) + " |", "|---|---|" + "---|" * len(metrics)]
    for lang, by_name in result.scores.items():
        for name, values in by_name.items():
            mark = " (best)" if best[lang]["name"] == name else ""
            cells = [f"{values[m]:.0f}" if m.endswith("_words") else f"{values[m]:.2f}" for m in metrics]  # counts
            lines.append(f"| {lang} | {name}{mark} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def baselines_file(task_name: str, train: tuple[str, str], evals: Sequence[tuple[str, str]], output: str,
                   settings: Optional[dict[str, Any]] = None) -> BaselineScores:
    """:func:`compute_baselines`, written atomically to ``output`` (checked first: no work for a bad path)."""
    check_output_paths(output)
    for lang in [train[0]] + [lang for lang, _ in evals]:
        check_language(lang)
    result = compute_baselines(task_name, train, evals, settings)
    write_json(output, result.to_json())
    return result
