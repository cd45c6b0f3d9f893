"""Settings that change what a finished cell was made from, made again when they change (``make -n``):
parsing's treebanks (``UD_<L>``) and Liu et al.'s Table 4 column beside Table 1's Default cell; and
languages the Makefile has no text for, refused as it is read."""

from __future__ import annotations

import os
import subprocess

import pytest
from conftest import REPO
from test_makefile import dry_run, make_env, make_words, touch_in_order, xlt_commands

UD_FILES = [f"tasks/ud/en_ewt/en_ewt-ud-{split}.conllu" for split in ("train", "dev", "test")]


def planned(work, cells, inputs, *more: str, tools=("finetune parse", "-q baselines parse")) -> list[str]:
    old = [flag for name in inputs for flag in ("-o", str(work / name))]   # there, and older than any cell
    text = "\n".join(dry_run(work, "SCALE=demo", *more, *map(str, cells), *old)).replace("\\\n", " ")
    return [line for tool in tools for line in xlt_commands(text.splitlines(), tool)]


def test_a_parse_cell_of_another_treebank_is_made_again_with_its_baselines_and_only_then(tmp_path):
    # The new treebank's files are missing, not newer, and make remakes nothing for a missing
    # secondary file: the old treebank's LAS stayed in the table.
    work = tmp_path / "w"
    cells = [work / "table1" / "default" / "en-fr" / "parse" / "results.json",
             work / "table1" / "control" / "en-fr" / "parse" / "results.json",
             work / "table1" / "baselines" / "en-fr" / "parse.json"]
    inputs = ["models/default/en-fr/finished", *UD_FILES,
              *(f"tasks/ud/{tb}/{tb}-ud-{s}.conllu" for tb in ("fr_gsd", "fr_sequoia") for s in ("dev", "test"))]
    assert len(planned(work, cells, inputs)) == len(cells)     # the first plan records the settings
    touch_in_order([*(work / "settings").iterdir(), *cells], seconds_ago=500)   # as a finished run leaves them
    assert planned(work, cells, inputs) == []
    again = planned(work, cells, inputs, "UD_fr=fr_sequoia")
    assert len(again) == len(cells) and all("fr_sequoia-ud-test.conllu" in line for line in again)
    # another pair's treebank is not this pair's setting
    touch_in_order([*(work / "settings").iterdir(), *cells], seconds_ago=300)
    assert planned(work, cells, inputs, "UD_fr=fr_sequoia", "UD_ru=ru_syntagrus") == []


def test_liu_table4_fine_tunes_with_table1s_seeds_and_arguments_and_again_when_they_change(tmp_path):
    # "Fine-tune all layers" is Table 1's Default cell; the MDS column beside it took FT_SEEDS and
    # XNLI_ARGS (not the pair's XNLI_ARGS_<L>) and was not made again when they changed.
    work = tmp_path / "w"
    cells = [work / "liu" / "en-fr" / "xnli-mds" / "results.json"]
    inputs = ["models/default/en-fr/finished", "liu/en-fr/fr-en.shift.npz", "tasks/nli/mnli/mnli_20k.tsv",
              *(f"tasks/xnli/{s}-{lang}.tsv" for s in ("dev", "test") for lang in ("en", "fr"))]
    first = planned(work, cells, inputs, "XNLI_ARGS_fr=--epochs 7", "XNLI_SEEDS=12,156", tools=("finetune xnli",))
    assert len(first) == 1 and "--seeds 12,156 " in first[0] and first[0].endswith("--epochs 7")
    touch_in_order([*(work / "settings").iterdir(), *cells], seconds_ago=500)
    assert planned(work, cells, inputs, "XNLI_ARGS_fr=--epochs 7", "XNLI_SEEDS=12,156", tools=("finetune xnli",)) == []
    again = planned(work, cells, inputs, "XNLI_ARGS_fr=--epochs 5", "XNLI_SEEDS=12,156", tools=("finetune xnli",))
    assert len(again) == 1 and again[0].endswith("--epochs 5")


@pytest.mark.parametrize("args, says", [
    (["LANGS=fr xx", "reproduce-table1"], "LANGS: corpus xx has no files: set CORPUS_xx"),
    (["LANGS=fake fakeperm", "reproduce-liu-table2"], "fakeperm is Table 1's word-order control"),
    (["LANGS=fake fakeperm", "reproduce-all"], "fakeperm is Table 1's word-order control"),
    (["SCALE=nosuch", "reproduce-table1"], "SCALE=nosuch: no scales/nosuch.mk (one of: "),
])
def test_settings_without_text_or_a_scale_file_are_refused_as_the_makefiles_are_read(tmp_path, args, says):
    # (a language without text failed only at a recipe, after the English stages had run; an
    # unknown scale printed a shell's arithmetic error first)
    proc = subprocess.run(["make", "-n", f"W={tmp_path / 'w'}", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env=make_env())
    assert proc.returncode == 2 and says in proc.stderr and proc.stdout == ""
    assert proc.stderr.count("\n") == 1


def test_a_setting_is_recorded_without_the_spaces_before_a_scale_files_comment(tmp_path):
    # `LIU_SIZES ?= 4000 20000     # ...` keeps the spaces: typed on the command line, the same
    # value read as a change, and the tables it feeds were collected again
    work = tmp_path / "w"
    record = work / "settings" / "liu-sizes"
    make_words(work, "$(call setting,liu-sizes,$(LIU_SIZES)) $(OMP_NUM_THREADS)x")
    assert record.read_text() == "4000 20000\n"
    os.utime(record, (1000, 1000))
    assert make_words(work, "$(call setting,liu-sizes,$(LIU_SIZES)) $(OMP_NUM_THREADS)x",
                      "LIU_SIZES=4000 20000") == [str(record), "1x"]   # and the thread count has no spaces
    assert record.stat().st_mtime == 1000


@pytest.mark.parametrize("args", [["LANGS=fake fakeperm", "reproduce-liu-figures"], ["SCALE=demo ", "reproduce-table1"],
                                  ["LANGS= fr  ru ", "reproduce-table1"]])
def test_settings_that_mean_something_are_not_refused(tmp_path, args):
    # the Liu figures read LIU_LANGS, never LANGS; a scale typed with a space is that scale
    proc = subprocess.run(["make", "-n", f"W={tmp_path / 'w'}", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env=make_env())
    assert proc.returncode == 0, proc.stderr
