"""Prediction files of ``xlt finetune``: written for every evaluation, re-scored independently.

Each task fine-tunes the tiny pretrained en/fr run of ``finetune_toy`` in-process on synthetic
data (the grammar of ``synthetic``), then the files it wrote are read back with other readers
(the ``conllu`` library, plain splitting) and scored by hand: the scores must be exactly the ones
in results.json, and every column that is not a prediction must be the input's.
"""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

import conllu
import numpy as np
import pytest
import synthetic
from conftest import run_in_process as in_process
from finetune_toy import ANIMALS, build_toy_world, write_nli

from xlt.finetune.config import FinetuneConfig
from xlt.finetune.predictions import prediction_file, write_conllu
from xlt.finetune.runner import EXIT_OK, finetune
from xlt.model.interventions import SHIFT_FORMAT, LanguageShift
from xlt.model.xlt_run import PretrainedRun
from xlt.utils.errors import XltError

LANGS = ("en", "fr")
SPLITS = {"train": (64, 30), "dev": (16, 31), "test": (16, 32)}   # examples, seed
SUFFIX = {"parse": ".conllu", "ner": ".ner", "xnli": ".tsv"}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_toy_world(tmp_path_factory.getbasetemp() / "finetune-world")


# one torch thread, module fixtures included (conftest)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ---- data --------------------------------------------------------------------------------------
def clause(lang: str, words: list[str], offset: int, verb_head: int, verb_rel: str, passive: bool) -> list[tuple]:
    """One ``det adj noun verb det noun`` clause (fr: ``det noun adj ...``) as CoNLL-U word tuples
    (id, form, upos, head, deprel), word ids from ``offset + 1``."""
    n = offset
    if lang == "en":
        parts = [("DET", n + 3, "det"), ("ADJ", n + 3, "amod"), ("NOUN", n + 4, "nsubj:pass" if passive else "nsubj")]
    else:
        parts = [("DET", n + 2, "det"), ("NOUN", n + 4, "nsubj:pass" if passive else "nsubj"), ("ADJ", n + 2, "amod")]
    parts += [("VERB", verb_head, verb_rel), ("DET", n + 6, "det"), ("NOUN", n + 4, "obj")]
    return [(n + i + 1, w, upos, head, rel) for i, (w, (upos, head, rel)) in enumerate(zip(words, parts))]


def write_treebank(path: Path, n: int, seed: int, lang: str) -> Path:
    """Trees over the grammar's sentences with everything CoNLL-U may hold around the words: comments,
    multiword-token ranges, empty nodes, LEMMA/XPOS/FEATS/DEPS/MISC values, relation subtypes; every
    fourth sentence is four clauses long, so that ``--max-len 24`` cuts its last words."""
    en, fr = synthetic.corpus(4 * n, seed=seed)
    sentences = en if lang == "en" else fr
    lines = []
    for s in range(n):
        clauses = [sentences[4 * s + k].split()[:6] for k in range(4 if s % 4 == 3 else 1)]
        words = clause(lang, clauses[0], 0, 0, "root", s % 3 == 0)
        for k, extra in enumerate(clauses[1:], 1):
            words += clause(lang, extra, 6 * k, 4, "conj", False)
        words.append((len(words) + 1, ".", "PUNCT", 4, "punct"))
        lines += [f"# sent_id = {lang}-{s}", f"# text = {' '.join(w[1] for w in words)}"]
        for wid, form, upos, head, rel in words:
            if wid == 5 and s % 2 == 0:
                lines.append(f"5-6\t{form}{words[5][1]}\t_\t_\t_\t_\t_\t_\t_\t_")
            misc = "SpaceAfter=No" if wid == len(words) - 1 else "_"
            columns = [wid, form, form.upper(), upos, f"X{upos}", "Number=Sing", head, rel, f"{head}:{rel}", misc]
            lines.append("\t".join(map(str, columns)))
            if wid == 4 and s % 5 == 0:
                lines.append(f"4.1\t{form}\t_\tVERB\t_\t_\t_\t_\t4:conj\t_")
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_ner(path: Path, n: int, seed: int, lang: str) -> Path:
    """``word<TAB>tag``: the subject phrase (adjective and noun) and the object noun are entities,
    ANI when the noun is an animal, OBJ otherwise."""
    en, fr = synthetic.corpus(n, seed=seed)
    blocks = []
    for sentence in (en if lang == "en" else fr):
        words = sentence.split()
        kind = ["ANI" if word in ANIMALS else "OBJ" for word in words]
        noun = 2 if lang == "en" else 1          # the phrase is words 1-2 in both orders
        tags = ["O"] * len(words)
        tags[1], tags[2], tags[5] = f"B-{kind[noun]}", f"I-{kind[noun]}", f"B-{kind[5]}"
        blocks.append("".join(f"{w}\t{t}\n" for w, t in zip(words, tags)))
    path.write_text("\n".join(blocks) + "\n", encoding="utf-8")
    return path


WRITERS = {"parse": write_treebank, "ner": write_ner, "xnli": write_nli}


def files_of(task: str, root: Path) -> dict[tuple[str, str], Path]:
    root.mkdir(parents=True, exist_ok=True)
    return {(lang, split): WRITERS[task](root / f"{split}-{lang}{SUFFIX[task]}", n, seed + 10 * (lang == "fr"), lang)
            for lang in LANGS for split, (n, seed) in SPLITS.items()}


def config(world, task: str, paths: dict, output: Path, **overrides) -> FinetuneConfig:
    values = dict(task=task, model=str(world.run), output=str(output), checkpoint="last",
                  train=("en", str(paths["en", "train"])), dev=("en", str(paths["en", "dev"])),
                  eval={lang: (str(paths[lang, "dev"]), str(paths[lang, "test"])) for lang in LANGS},
                  batch_size=[8], encoder_lr=[3e-4], head_lr=[3e-3], seeds=[1], epochs=3, max_len=24,
                  epoch_size=SPLITS["train"][0],   # XNLI's default epoch is 20,000 pairs
                  schedule="constant")             # three epochs of warm-up and decay teach the tagger nothing
    values.update(overrides)
    return FinetuneConfig(**values)


@pytest.fixture(scope="module")
def finished(world, tmp_path_factory):
    """One finished grid per task (run lazily): its results.json and input files."""
    done: dict[str, tuple[Path, dict, dict]] = {}

    def get(task: str) -> tuple[Path, dict, dict]:
        if task not in done:
            root = tmp_path_factory.mktemp(task)
            paths = files_of(task, root / "data")
            outcome = finetune(config(world, task, paths, root / "out"))
            assert outcome.exit_code == EXIT_OK
            done[task] = root / "out", json.loads((root / "out" / "results.json").read_text()), paths
        return done[task]

    return get


# ---- independent scorers -----------------------------------------------------------------------
def attachment(gold_path: Path, predicted_path: Path) -> dict[str, float]:
    """UAS/LAS counted word by word from two CoNLL-U files read by the ``conllu`` library: words whose
    gold UPOS is PUNCT or SYM are skipped, relations compared without subtypes, HEAD ``_`` is wrong."""
    gold = conllu.parse(gold_path.read_text(encoding="utf-8"))
    predicted = conllu.parse(predicted_path.read_text(encoding="utf-8"))
    assert len(gold) == len(predicted)
    scored = heads = labelled = 0
    for g_sentence, p_sentence in zip(gold, predicted):
        g_words = [t for t in g_sentence if isinstance(t["id"], int)]
        p_words = [t for t in p_sentence if isinstance(t["id"], int)]
        assert [t["id"] for t in g_words] == [t["id"] for t in p_words]
        for g, p in zip(g_words, p_words):
            if g["upos"] in ("PUNCT", "SYM"):
                continue
            scored += 1
            if p["head"] is not None and p["head"] == g["head"]:
                heads += 1
                labelled += g["deprel"].split(":")[0] == p["deprel"].split(":")[0]
    return {"uas": 100.0 * heads / scored, "las": 100.0 * labelled / scored}


def read_columns(path: Path) -> list[list[list[str]]]:
    """Sentences of tab-separated lines, split at blank lines."""
    sentences, rows = [], []
    for line in path.read_text(encoding="utf-8").split("\n"):
        if line:
            rows.append(line.split("\t"))
        elif rows:
            sentences.append(rows)
            rows = []
    assert not rows, "the last sentence has no blank line after it"
    return sentences


def chunks(tags: list[str]) -> set[tuple[str, int, int]]:
    """(type, first, end) of each chunk: one opens at B-X, or at I-X not continuing an X chunk."""
    out, start, kind = set(), None, None
    for i, tag in enumerate(tags + ["O"]):
        if start is not None and (tag == "O" or tag.startswith("B-") or tag[2:] != kind):
            out.add((kind, start, i))
            start = None
        if tag != "O" and start is None:
            start, kind = i, tag[2:]
    return out


def span_scores(path: Path) -> tuple[dict[str, float], int]:
    """Micro span precision, recall, F1 (percent) of a ``word gold predicted`` file, and the number of
    predicted entities."""
    right = n_gold = n_predicted = 0
    for rows in read_columns(path):
        assert all(len(row) == 3 for row in rows)
        gold, predicted = chunks([r[1] for r in rows]), chunks([r[2] for r in rows])
        right, n_gold, n_predicted = right + len(gold & predicted), n_gold + len(gold), n_predicted + len(predicted)
    p = right / n_predicted if n_predicted else 0.0
    r = right / n_gold if n_gold else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {"precision": 100.0 * p, "recall": 100.0 * r, "f1": 100.0 * f}, n_predicted


def accuracy_of(path: Path) -> float:
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "id\tgold\tpredicted"
    rows = [line.split("\t") for line in lines[1:]]
    return 100.0 * sum(gold == predicted for _, gold, predicted in rows) / len(rows)


# ---- end to end ----------------------------------------------------------------------------------
def evaluations(results: dict, output: Path):
    """(lang, split, run-relative name, its path, the metrics results.json gives) of every evaluation."""
    for run in results["runs"]:
        assert set(run["predictions"]) == set(run["results"]) == {"plain"}
        for lang, splits in run["results"]["plain"].items():
            for split, metrics in splits.items():
                name = run["predictions"]["plain"][lang][split]
                yield lang, split, name, output / run["dir"] / name, metrics


@pytest.mark.parametrize("task", ["parse", "ner", "xnli"])
def test_prediction_files_rescore_to_the_reported_numbers(finished, task):
    output, results, paths = finished(task)
    seen, main = set(), {"parse": "las", "ner": "f1", "xnli": "accuracy"}[task]
    for lang, split, name, path, metrics in evaluations(results, output):
        assert name == f"predictions/{split}.{lang}{SUFFIX[task]}" and path.is_file()
        seen.add((lang, split, 0 < metrics[main] < 100))
        if task == "parse":
            assert attachment(paths[lang, split], path) == {"uas": metrics["uas"], "las": metrics["las"]}
        elif task == "ner":
            scores, n_predicted = span_scores(path)
            assert scores == {k: metrics[k] for k in ("precision", "recall", "f1")}
            assert n_predicted > 0
        else:
            assert accuracy_of(path) == metrics["accuracy"]
    assert {(lang, split) for lang, split, _ in seen} == {(lang, split) for lang in LANGS for split in ("dev", "test")}
    assert any(partly_right for _, _, partly_right in seen), "all right or all wrong: the counting went untested"


def test_parse_predictions_keep_every_other_column_and_line(finished):
    output, results, paths = finished("parse")
    cut = False
    for lang, split, _, path, _ in evaluations(results, output):
        source = paths[lang, split].read_text(encoding="utf-8").split("\n")
        written = path.read_text(encoding="utf-8").split("\n")
        assert len(written) == len(source)
        for a, b in zip(source, written):
            if a.split("\t")[0].isdigit():      # a word: only HEAD and DEPREL may differ
                a_columns, b_columns = a.split("\t"), b.split("\t")
                assert a_columns[:6] + a_columns[8:] == b_columns[:6] + b_columns[8:]
                cut |= b_columns[6] == "_"
                assert (b_columns[6] == "_") == (b_columns[7] == "_")
            else:                               # comments, ranges, empty nodes, blank lines
                assert a == b
    assert cut, "no word was cut by --max-len: the '_' case went untested"


def test_ner_and_xnli_predictions_keep_the_input(finished):
    output, results, paths = finished("ner")
    for lang, split, _, path, _ in evaluations(results, output):
        written = read_columns(path)
        source = [[line.split("\t") for line in block.splitlines()]
                  for block in paths[lang, split].read_text(encoding="utf-8").split("\n\n") if block.strip()]
        assert [[row[:2] for row in s] for s in written] == source
    output, results, paths = finished("xnli")
    for lang, split, _, path, _ in evaluations(results, output):
        rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()[1:]]
        labels = [line.split("\t")[2] for line in paths[lang, split].read_text(encoding="utf-8").splitlines()]
        assert [(int(i), gold) for i, gold, _ in rows] == list(enumerate(labels))


def test_a_lost_prediction_file_is_written_again_without_training(world, finished):
    output, results, paths = finished("ner")
    run_dir = output / results["runs"][0]["dir"]
    lost = run_dir / results["runs"][0]["predictions"]["plain"]["fr"]["test"]
    before, trained = lost.read_bytes(), (run_dir / "train.json").stat().st_mtime_ns
    lost.unlink()
    (run_dir / "predictions" / "dev.en.ner").write_text("edited\n")
    assert finetune(config(world, "ner", paths, output)).exit_code == EXIT_OK
    assert lost.read_bytes() == before and (run_dir / "train.json").stat().st_mtime_ns == trained
    assert (run_dir / "predictions" / "dev.en.ner").read_text() != "edited\n"
    assert json.loads((output / "results.json").read_text())["runs"][0]["results"] == results["runs"][0]["results"]


def test_test_time_variants_write_their_own_files(world, finished, tmp_path):
    """An identity map and a shift of weight 0 predict what the plain model predicts, file for file."""
    output, results, paths = finished("ner")
    run = PretrainedRun.load(world.run, "last")
    d_model, n_layers = run.config.d_model, run.config.n_layers
    map_dir = tmp_path / "map"
    map_dir.mkdir()
    (map_dir / "map.json").write_text(json.dumps({"format": "xlt-layer-map/1", "source": "en", "target": "fr",
                                                  "layers": [1]}))
    np.save(map_dir / "W_layer1.npy", np.eye(d_model, dtype=np.float32))
    rng = np.random.default_rng(0)
    means = {lang: rng.normal(size=(n_layers + 1, d_model)).astype(np.float32) for lang in LANGS}
    shift = tmp_path / "shift.npz"
    LanguageShift("fr", "en", means["fr"], means["en"],
                  {"format": SHIFT_FORMAT, "src": "fr", "tgt": "en", "run": "test", "step": run.step}).save(str(shift))
    outcome = finetune(config(world, "ner", paths, output, map_dir=[str(map_dir)], map_layer=1, shift=[str(shift)],
                              shift_layer=1, shift_alpha=[0.0, 3.0]))
    assert outcome.exit_code == EXIT_OK
    record = outcome.results["runs"][0]
    run_dir, alpha = output / record["dir"], record["shift_alpha"]["fr"]
    named = record["predictions"]
    assert named["map"]["fr"] == {"dev": "predictions/dev.fr.map.ner", "test": "predictions/test.fr.map.ner"}
    assert named["shift"]["fr"] == {s: f"predictions/{s}.fr.shift-alpha{alpha:g}.ner" for s in ("dev", "test")}

    def read(name: str) -> bytes:
        return (run_dir / name).read_bytes()

    for split in ("dev", "test"):
        assert read(named["map"]["fr"][split]) == read(named["plain"]["fr"][split])
    assert read("predictions/dev.fr.shift-alpha0.ner") == read("predictions/dev.fr.ner")
    assert (run_dir / "predictions/dev.fr.shift-alpha3.ner").is_file()
    for variant in ("map", "shift"):
        for split in ("dev", "test"):
            scores, _ = span_scores(run_dir / named[variant]["fr"][split])
            assert scores["f1"] == record["results"][variant]["fr"][split]["f1"]




def test_no_predictions_writes_none(world, tmp_path, capsys):
    paths = files_of("xnli", tmp_path / "data")
    out = tmp_path / "out"
    args = ["finetune", "xnli", "--model", world.run, "-o", out, "--checkpoint", "last",
            "--train", "en", paths["en", "train"], "--dev", "en", paths["en", "dev"],
            *[a for lang in LANGS for a in ("--eval", lang, paths[lang, "dev"], paths[lang, "test"])],
            "--batch-size", "8", "--encoder-lr", "1e-4", "--head-lr", "1e-3", "--epochs", "1", "--epoch-size", "16",
            "--no-predictions"]
    res = in_process(capsys, *args)
    assert res.returncode == 0, res.stderr
    results = json.loads((out / "results.json").read_text())
    assert results["config"]["predictions"] is False
    assert all("predictions" not in run for run in results["runs"])
    assert not [p for p in out.rglob("*") if "predictions" in p.name]
    # Turned on later, the finished run gets its files without training again.
    trained = (out / results["runs"][0]["dir"] / "train.json").stat().st_mtime_ns
    res = in_process(capsys, *args[:-1])
    assert res.returncode == 0, res.stderr
    run = json.loads((out / "results.json").read_text())["runs"][0]
    assert run["predictions"]["plain"]["fr"]["test"] == "predictions/test.fr.tsv"
    assert (out / run["dir"] / "predictions" / "test.fr.tsv").is_file()
    assert (out / run["dir"] / "train.json").stat().st_mtime_ns == trained


def test_a_run_without_its_weights_keeps_its_metrics_without_predictions(world, tmp_path, capsys):
    paths = files_of("xnli", tmp_path / "data")
    base = config(world, "xnli", paths, tmp_path / "out", epochs=1, keep_weights=False)
    first = finetune(dataclasses.replace(base, predictions=False))
    second = finetune(base)
    assert first.exit_code == second.exit_code == EXIT_OK
    assert second.results["runs"][0]["results"] == first.results["runs"][0]["results"]
    assert second.results["runs"][0]["predictions"] == {}
    assert "prediction file(s) cannot be written" in capsys.readouterr().err


# ---- the writers alone ---------------------------------------------------------------------------
SAMPLE = """# sent_id = 1
1\tthe\tthe\tDET\t_\t_\t2\tdet\t_\t_
2-3\tcatsees\t_\t_\t_\t_\t_\t_\t_\t_
2\tcat\tcat\tNOUN\t_\t_\t3\tnsubj:pass\t_\t_
3\tsees\tsee\tVERB\t_\t_\t0\troot\t_\tSpaceAfter=No
3.1\tsees\tsee\tVERB\t_\t_\t_\t_\t3:conj\t_

1\tdog\tdog\tNOUN\t_\t_\t0\troot\t_\t_
"""


def test_write_conllu_replaces_head_and_deprel_only(tmp_path):
    path = tmp_path / "s.conllu"
    path.write_text(SAMPLE, encoding="utf-8")
    out = io.StringIO()
    write_conllu(out, str(path), [[3, 0, None], [0]], [["det", "root", None], ["root"]])
    assert out.getvalue() == SAMPLE.replace("\t2\tdet\t", "\t3\tdet\t").replace("\t3\tnsubj:pass\t", "\t0\troot\t") \
        .replace("\t0\troot\t_\tSpaceAfter", "\t_\t_\t_\tSpaceAfter")
    with pytest.raises(XltError, match="changed while xlt finetune ran"):
        write_conllu(io.StringIO(), str(path), [[3, 0, 2]], [["det", "root", "obj"]])


def test_prediction_file_names():
    assert prediction_file("fr", "test", "plain", {}, ".conllu") == "predictions/test.fr.conllu"
    assert prediction_file("fr", "test", "map", {"layer": 2}, ".ner") == "predictions/test.fr.map.ner"
    assert prediction_file("ru", "dev", "shift", {"alpha": 0.5}, ".tsv") == "predictions/dev.ru.shift-alpha0.5.tsv"



def test_a_task_with_a_prediction_suffix_must_write_predictions():
    from xlt.finetune.task import Task

    with pytest.raises(TypeError, match="defines no write_predictions"):
        class NoWriter(Task):  # noqa: F841 - defining the class is the test
            prediction_suffix = ".x"
