"""xlt's own files read back with a field of another JSON type (a hand edit, a damaged copy, another
version): each is one XltError naming the file, found where it is read (a fuzzing pass found each of
these as a TypeError, KeyError or AttributeError at the field's first use)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from finetune_toy import build_toy_world

from xlt.utils.errors import XltError
from xlt.utils.shapes import ListOf, MapOf, describe, matches, require_fields

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_kinds_as_json_has_them():
    assert matches(1, float) and matches(1.5, float) and not matches(True, float) and not matches(1.5, int)
    assert matches(None, (str, None)) and not matches(7, (str, None))
    assert matches(["a", "b"], ListOf(str)) and not matches(["a", 1], ListOf(str)) and not matches("ab", ListOf(str))
    assert matches({"f1": 1.0, "p": None}, MapOf((float, None))) and not matches({"f1": "7"}, MapOf(float))
    assert describe((str, None)) == "a string or null" and describe(ListOf(int)) == "a list of integers"
    with pytest.raises(XltError, match=r"^f.json: not a thing: 'n' is a string, expected an integer$"):
        require_fields({"n": "3"}, {"n": int}, "f.json", "a thing")
    with pytest.raises(XltError, match=r"not a thing \(a JSON object was expected, this is a list\)") as error:
        require_fields([1], {}, "f.json", "a thing", line=4)
    assert (error.value.path, error.value.line) == ("f.json", 4)
    assert require_fields({"n": 3}, {"n": int}, "f.json", "a thing", optional={"m": str}) == {"n": 3}


# ---- fine-tuning: a finished run's train.json and cached evaluations, read again by a rerun ------------

@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    from xlt.finetune.config import FinetuneConfig
    from xlt.finetune.runner import finetune

    world = build_toy_world(tmp_path_factory.mktemp("damaged") / "world")
    out = tmp_path_factory.mktemp("damaged") / "out"

    def config(output: Path) -> FinetuneConfig:
        return FinetuneConfig(task="finetune_toy:ToyTask", model=str(world.run), output=str(output), checkpoint="last",
                              train=("en", str(world.split("en", "train"))), dev=("en", str(world.split("en", "dev"))),
                              eval={"fr": (str(world.split("fr", "dev")), str(world.split("fr", "test")))},
                              batch_size=[8], encoder_lr=[1e-4], head_lr=[1e-3], seeds=[1], epochs=1)
    finetune(config(out))
    return out, config, finetune


def damage(path: Path, change) -> None:
    data = json.loads(path.read_text())
    path.write_text(json.dumps(change(data)))


@pytest.mark.parametrize("name, change, says", [
    ("train.json", lambda d: [1], "not a fine-tuning summary (a JSON object was expected, this is a list)"),
    ("train.json", lambda d: {k: v for k, v in d.items() if k != "best_epoch"}, "no 'best_epoch' field"),
    ("train.json", lambda d: {**d, "source_dev_main": "7"}, "'source_dev_main' is a string, expected a number"),
    ("eval", lambda d: {**d, "metrics": None}, "not a cached evaluation: 'metrics' is null"),
    ("eval", lambda d: {**d, "metrics": {**d["metrics"], "accuracy": "7"}}, "'metrics' has items of another kind, expected an object of numbers or nulls"),
    ("eval", lambda d: {**d, "predictions": [1]}, "'predictions' is a list"),
    ("eval", lambda d: {**d, "metrics": {**d["metrics"], "accuracy": None}},
     "not a cached evaluation's metrics: 'accuracy' is null, expected a number"),
])
def test_a_rerun_names_a_damaged_file_of_a_finished_run(finished, tmp_path, name, change, says):
    out, config, finetune = finished
    copy = shutil.copytree(out, tmp_path / "out")
    run = next((copy / "runs").iterdir())
    target = run / "train.json" if name == "train.json" else sorted((run / "eval").glob("fr-dev-*.json"))[0]
    damage(target, change)
    with pytest.raises(XltError, match=re.escape(says)) as error:
        finetune(config(copy))
    assert error.value.path == str(target)


# ---- a pretraining run's config.json on resume, and its text.json --------------------------------------

@pytest.mark.parametrize("change, says", [
    (lambda d: {**d, "inputs": [1]}, "'inputs' is a list, expected an object or null"),
    (lambda d: {**d, "inputs": {**d["inputs"], "stores": [1]}}, "'stores' is a list"),
    (lambda d: {**d, "inputs": {**d["inputs"], "stores": {"train/en": [1]}}}, "'stores' has items of another kind"),
    (lambda d: {**d, "config": {**d["config"], "codes": 7}}, "'codes' is an integer"),
    (lambda d: {**d, "config": [1]}, "'config' is a list, expected an object"),
])
def test_a_damaged_run_description_is_one_error_before_resuming(tiny_run, tmp_path, change, says):
    from xlt.pretrain.run_files import changed_inputs

    run = shutil.copytree(tiny_run, tmp_path / "run")
    damage(run / "config.json", change)
    with pytest.raises(XltError, match=says) as error:
        changed_inputs(str(run), "0" * 64, {}, {})
    assert error.value.path == str(run / "config.json")


def test_a_damaged_resume_list_is_one_error(tiny_run, tmp_path):
    from xlt.utils.rundir import record_resume

    run = shutil.copytree(tiny_run, tmp_path / "run")
    damage(run / "config.json", lambda d: {**d, "resumes": 7})
    with pytest.raises(XltError, match="'resumes' is an integer, expected a list of objects"):
        record_resume(run, {"step": 1})


def test_library_versions_of_another_shape_are_one_error(tiny_run, tmp_path):
    from xlt.model.xlt_run import PretrainedRun

    run = shutil.copytree(tiny_run, tmp_path / "run")
    damage(run / "text.json", lambda d: {lang: {**s, "library_versions": [1]} for lang, s in d.items()})
    with pytest.raises(XltError, match="'library_versions' must be an object"):
        PretrainedRun.load(run).text("en")


# ---- files of the analyses and of tracking --------------------------------------------------------------

def test_a_damaged_extraction_header_is_one_error(tmp_path):
    from xlt.analysis.cka_compare import _reps_header

    header = tmp_path / "rep.en.json"
    for content, says in ((None, "this is null"), ({"level": "sentence", "layers": {"a": 1}, "count": 3}, "'layers' is an object"),
                          ({"level": "sentence", "layers": [], "count": 3}, "'layers' is empty")):
        header.write_text(json.dumps(content))
        with pytest.raises(XltError, match=says):
            _reps_header(str(tmp_path / "rep.en"))


@pytest.mark.parametrize("layers", [1, ["x"], [[1]]])
def test_a_map_header_with_other_layers_is_one_error(tmp_path, layers):
    from xlt.model.interventions import MAP_FORMAT, load_map

    (tmp_path / "map.json").write_text(json.dumps({"format": MAP_FORMAT, "source": "en", "target": "fr", "layers": layers}))
    with pytest.raises(XltError, match="not a map header: 'layers' (is|has items)"):
        load_map(str(tmp_path), None, "en", 16, 2)


def test_an_ownership_sidecar_with_a_list_for_a_language_is_one_error(tmp_path):
    from xlt.text.vocab import SIDECAR_SUFFIX, Vocabulary

    vocab = Vocabulary(["a", "b"], [3, 2])
    vocab.languages, vocab.owners = ["en", "fr"], [1, 2]
    vocab.save(tmp_path / "vocab")
    damage(tmp_path / f"vocab{SIDECAR_SUFFIX}", lambda d: {**d, "languages": [[], "fr"]})
    with pytest.raises(XltError, match="'languages' must be distinct language codes"):
        Vocabulary.load(tmp_path / "vocab")


@pytest.mark.parametrize("field, value", [("run", 7), ("run", None), ("snapshot", []), ("layer", []), ("lang", []),
                                          ("run_id", ["x"])])
def test_a_tracking_record_of_another_shape_is_one_error(tmp_path, field, value):
    from xlt.track.records import read_records

    record = {"run": "r", "snapshot": "step-5", "measure": "cka", "lang": "fr", "layer": 1, "value": 0.5}
    (tmp_path / "records.jsonl").write_text(json.dumps(record) + "\n" + json.dumps({**record, field: value}) + "\n")
    with pytest.raises(XltError, match=f"not a tracking record: '{field}' is") as error:
        read_records(str(tmp_path / "records.jsonl"))
    assert error.value.line == 2


@pytest.mark.parametrize("change", [{"targets": [7]}, {"complete": False, "counts": [1]}])
def test_a_result_file_of_another_shape_is_a_gap_in_the_report(tmp_path, change):
    from xlt.report.sources import FINETUNE_FORMAT, finetune_score

    path = tmp_path / "results.json"
    path.write_text(json.dumps({"format": FINETUNE_FORMAT, "source": "en", "targets": ["fr"], "complete": True,
                                "summary": {"selected": {"variants": {"plain": {"fr": {"test": {"mean": 50.0}}}}}},
                                **change}))
    reading = finetune_score(str(path), "fr")
    assert reading.value is None and reading.gap == f"damaged result file {path}"


@pytest.mark.parametrize("which, change, says", [
    ("means", lambda h: {k: v for k, v in h.items() if k != "lang"}, "no 'lang' field"),
    ("means", lambda h: {**h, "lang": ["en"]}, "'lang' is a list, expected a string"),
    ("means", lambda h: {k: v for k, v in h.items() if k != "tokens"}, "no 'tokens' field"),
    ("shift", lambda h: {k: v for k, v in h.items() if k != "src"}, "no 'src' field"),
    ("shift", lambda h: {**h, "tgt": {"a": 1}}, "'tgt' is an object, expected a string"),
])
def test_a_means_or_shift_header_of_another_shape_is_one_error(tmp_path, which, change, says):
    import numpy as np

    from xlt.model.interventions import LanguageShift, load_means, save_means

    for lang in ("en", "fr"):
        save_means(str(tmp_path / f"{lang}.npz"), np.zeros((3, 4), np.float32),
                   {"lang": lang, "run": "r", "step": 1, "sentences": 2, "tokens": 9})
    path = tmp_path / ("en.npz" if which == "means" else "shift.npz")
    if which == "shift":
        LanguageShift.from_means(str(tmp_path / "en.npz"), str(tmp_path / "fr.npz")).save(str(path))
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    arrays["header"] = np.array(json.dumps(change(json.loads(str(arrays["header"])))))
    np.savez(path, **arrays)
    with pytest.raises(XltError, match=re.escape(says)) as error:
        (load_means if which == "means" else LanguageShift.load)(str(path))
    assert error.value.path == str(path)


# ---- result files read by the reports: a damaged one is a gap, never a traceback ------------------------

def test_a_result_file_that_is_not_an_object_is_a_gap(tmp_path):
    from xlt.report.sources import load_json

    (tmp_path / "r.json").write_text("[1]")
    assert load_json(str(tmp_path / "r.json")) == (None, f"damaged result file {tmp_path / 'r.json'}")


@pytest.mark.parametrize("runs", [{"a": 1}, [{"status": "done", "shift_alpha": {"fr": "2"}}]])
def test_shift_weights_of_another_shape_are_a_gap(tmp_path, runs):
    from xlt.report.sources import FINETUNE_FORMAT, shift_alphas

    path = tmp_path / "results.json"
    path.write_text(json.dumps({"format": FINETUNE_FORMAT, "summary": {}, "runs": runs}))
    assert shift_alphas(str(path), "fr").gap == f"damaged result file {path}"


def test_align_results_of_another_shape_read_as_missing(tmp_path):
    from xlt.report.alignment import _per_layer, _word_p1
    from xlt.report.kept_alignment import _read
    from xlt.report.liu_figures import mrr_reading

    word = {"results": [{"layer": 0, "csls": [1], "queries": "6"}], "space": [1]}
    assert _word_p1(word) == (None, None, 0) and _per_layer(word, "contextual-word") == {}
    assert _word_p1({"results": [{"layer": 0, "csls": {"p@1": "0.1"}, "queries": 60}], "space": {"target_words": 9}}) \
        == (None, 9, 60)
    path = tmp_path / "kept.json"
    path.write_text(json.dumps({"command": "align sentence", "map": "none", "layers": [0, None], "p_at_1": [0.1, "x"]}))
    assert _read(str(path)) == (None, f"{path} is not an `xlt align sentence` result")
    path = tmp_path / "mrr.json"
    path.write_text(json.dumps({"results": [{"layer": 1, "mrr": 0.25}, {"layer": 2, "mrr": None}],
                                "source": {"kind": "xlt", "run": 7}}))
    assert mrr_reading(str(path)).value == 0.25
    # "last" is the deepest layer, not the file's last entry (--layers 12,0 keeps that order)
    path.write_text(json.dumps({"results": [{"layer": 12, "mrr": 0.4}, {"layer": 0, "mrr": 0.05}]}))
    assert mrr_reading(str(path)).value == 0.4
    for groups in ({"NOUN": "x"}, ["NOUN"], {"NOUN": {"mrr": "0.5"}}):   # the per-group breakdowns too
        path.write_text(json.dumps({"results": [{"layer": 1, "mrr": 0.25, "by_pos": groups}]}))
        assert mrr_reading(str(path), group=("by_pos", "NOUN")).gap is not None


@pytest.mark.parametrize("edit, says", [
    (lambda d: d["wu2020_table1"].update(source=["x"]), "wu2020_table1's source (a JSON object was expected"),
    (lambda d: d["liu2020_table2"]["source"].pop("citation"), "liu2020_table2's source: no 'citation' field"),
    (lambda d: d["wu2020_alignment"]["source"].update(lines={"a": 1}), "'lines' is an object"),
    (lambda d: d["wu2020_figure7"].pop("pairs"), "not wu2020_figure7: no 'pairs' field"),
    (lambda d: d["wu2020_figure7"]["pairs"].update({"en-fr": []}), "'pairs' has items of another kind, expected an object of objects"),
    (lambda d: d["wu2020_alignment"]["source"].update(lines=[235]), "'lines' needs two numbers"),
    (lambda d: d["wu2020_table1"].update(rows={"default": {}}), "not wu2020_table1: 'rows' is an object"),
    (lambda d: d["wu2020_table1"]["rows"].append("sep-l1-9"), "not wu2020_table1: 'rows' has items of another kind"),
    (lambda d: d["wu2020_table1"]["rows"][0].pop("row"), "not a Table 1 row: no 'row' field"),
    (lambda d: d["liu2020_table2"]["directions"]["en-de"].pop("convert_rate_layer10"),
     "not Liu Table 2's en-de: no 'convert_rate_layer10' field"),
    (lambda d: d["liu2020_table2"]["directions"]["en-fr"]["convert_rate_layer10"].pop("2"),
     "en-fr: convert_rate_layer10 needs exactly the α 1, 2, 3"),
    (lambda d: d["liu2020_table2"]["directions"]["en-fr"].update(best_layer="ten"), "'best_layer' is a string"),
    (lambda d: d["liu2020_table4"]["rows"].pop("finetune_last_6_layers_mds"), "missing: finetune_last_6_layers_mds"),
    (lambda d: d["liu2020_table4"]["rows"]["finetune_all_layers"].update(de="67.05"), "'rows' has items of another kind"),
    (lambda d: d["liu2020_table4"].pop("shifting_weight"), "not liu2020_table4: no 'shifting_weight' field"),
])
def test_an_edited_paper_numbers_file_is_one_error(tmp_path, edit, says):
    from xlt.report import paper

    data = paper.load()
    edit(data)
    (tmp_path / "numbers.json").write_text(json.dumps(data))
    with pytest.raises(XltError, match=re.escape(says)):
        paper.load(str(tmp_path / "numbers.json"))
