"""``xlt finetune`` as plan, then run: the configuration resolved once into a frozen plan (no weights, no
data read), printed by ``--dry-run``; the runs it names are the runs the code before the plan named.

Planning reads a run directory's metadata only, so the xlt runs here are directories with empty
checkpoint files: nothing is trained or loaded.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from conftest import assert_one_line_error, run_in_process
from finetune_toy import ToyTask

from xlt.finetune.config import FinetuneConfig
from xlt.finetune.plan import make_plan, run_name_prefix
from xlt.finetune.records import RunIdentity
from xlt.finetune.task import TaskRecipe
from xlt.utils.errors import XltError

# A model record with fixed checksums: the run hash is then a function of the configuration alone.
MODEL = {"checkpoint": "best", "vocab_sha256": "v" * 64, "checkpoint_sha256": "c" * 64}


class QuickToy(ToyTask):
    """A plugin task with a recipe of its own."""

    recipe = TaskRecipe(batch_size=(2,), encoder_lr=(1e-3,), head_lr=None, epochs=1, epoch_size=None,
                        schedule="constant", max_len=32)


def fake_run(root: Path) -> Path:
    """What planning reads of an xlt run: its files' presence and config.json's languages."""
    run = root / "run"
    (run / "checkpoints").mkdir(parents=True)
    for name in ("vocab", "text.json", "checkpoints/best.pt"):
        (run / name).write_text("")
    (run / "config.json").write_text(json.dumps({"config": {"model": {"languages": ["en", "fr"], "n_layers": 4}}}))
    return run


def data(root: Path) -> dict:
    files = {}
    for name in ("train.en", "dev.en", "test.en", "dev.fr", "test.fr"):
        files[name] = root / name
        files[name].write_text("x\n")
    return dict(train=("en", str(files["train.en"])), dev=("en", str(files["dev.en"])),
                eval={"en": (str(files["dev.en"]), str(files["test.en"])),
                      "fr": (str(files["dev.fr"]), str(files["test.fr"]))})


def hashes(plan) -> list[str]:
    return [RunIdentity(plan.task, plan.task_settings, MODEL, plan.source, "t" * 64, "d" * 64, ["a", "b"],
                        settings).short_hash() for settings in plan.grid]


def test_run_hashes_are_those_the_configuration_gave_before_the_plan(tmp_path):
    """Literals computed with the code before the plan (FinetuneConfig.grid, TASK_DEFAULTS, and the
    runner setting pair-max on a static model's task settings), for the same configurations."""
    run, files = str(fake_run(tmp_path)), data(tmp_path)
    xnli = make_plan(FinetuneConfig(task="xnli", model=run, output=str(tmp_path / "o"), **files))
    assert len(xnli.grid) == 18 and (hashes(xnli)[0], hashes(xnli)[-1]) == ("73e2937a55d3", "3106421b6947")
    ner = make_plan(FinetuneConfig(task="ner", model=run, output=str(tmp_path / "o"), batch_size=[8], seeds=[1, 2],
                                   freeze_bottom=1, max_len=64, **files))
    assert hashes(ner) == ["f120d558235c", "876a9d01445a", "9e63007816b9", "a7fde21f8188", "a6ac80fc57aa",
                           "cf6246b3136b"]
    parse = make_plan(FinetuneConfig(task="parse", model=run, output=str(tmp_path / "o"),
                                     task_settings={"dropout": 0.2}, **files))
    assert (hashes(parse)[0], hashes(parse)[-1]) == ("fbd0f9917690", "52458574fdc9")
    vectors = tmp_path / "w2v.txt"
    vectors.write_text("1 2\ncat 0.1 0.2\n")
    static = make_plan(FinetuneConfig(task="xnli", model=f"static:{vectors}", output=str(tmp_path / "o"),
                                      batch_size=[4], encoder_lr=[1e-3], head_lr=[1e-3], epochs=2, **files))
    assert static.task_settings == {"pooling": "pair-max"} and static.config["task_settings"] == {"pooling": "pair-max"}
    assert hashes(static) == ["4bdc66dcd37c"]
    assert run_name_prefix(static.grid[0]) == "bs4-lr0.001-head0.001-seed12-"


def test_the_plan_is_complete_and_frozen(tmp_path):
    run = str(fake_run(tmp_path))
    plan = make_plan(FinetuneConfig(task="ner", model=run, output=str(tmp_path / "o"), **data(tmp_path)))
    assert plan.model.kind == "xlt" and plan.model_languages == ("en", "fr")
    assert plan.source == "en" and plan.targets == ("fr",)
    assert [(s.lang, s.split) for s in plan.splits] == [("en", "train"), ("en", "dev"), ("en", "test"),
                                                          ("fr", "dev"), ("fr", "test")]
    assert plan.max_len == 128 and all(s.schedule == "linear" and s.epochs == 10 for s in plan.grid)
    assert plan.config["max_len"] is None   # results.json keeps the options as given
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.source = "fr"   # type: ignore[misc]


def test_a_plugin_task_brings_its_own_recipe(tmp_path):
    plan = make_plan(FinetuneConfig(task="test_finetune_plan:QuickToy", model=str(fake_run(tmp_path)),
                                    output=str(tmp_path / "o"), **data(tmp_path)))
    assert [(s.batch_size, s.encoder_lr, s.head_lr, s.epochs) for s in plan.grid] == [(2, 1e-3, 1e-3, 1)]
    assert plan.max_len == 32


def test_options_a_model_kind_refuses_fail_when_planning(tmp_path):
    vectors = tmp_path / "w2v.txt"
    vectors.write_text("1 2\ncat 0.1 0.2\n")
    with pytest.raises(XltError, match="takes no --checkpoint"):
        make_plan(FinetuneConfig(task="xnli", model=f"static:{vectors}", output=str(tmp_path / "o"),
                                 freeze_bottom=1, **data(tmp_path)))
    with pytest.raises(XltError, match="language 'de' is not one of the model's"):
        make_plan(FinetuneConfig(task="xnli", model=str(fake_run(tmp_path)), output=str(tmp_path / "o"),
                                 targets=["de"], **data(tmp_path)))


def test_dry_run_prints_the_plan_and_runs_nothing(tmp_path, capsys):
    run, files = fake_run(tmp_path), data(tmp_path)
    out = tmp_path / "out"
    args = ["finetune", "xnli", "--model", run, "-o", out, "--train", "en", files["train"][1], "--dev", "en",
            files["dev"][1], "--eval", "fr", *files["eval"]["fr"], "--eval", "en", *files["eval"]["en"],
            "--batch-size", "8", "--seeds", "1,2", "--dry-run"]
    res = run_in_process(capsys, *args)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "task      xnli" and f"model     {run} (xlt), checkpoint best" in lines
    assert "languages en -> fr, en" not in lines and "languages en -> fr" in lines
    assert f"  test  fr   {files['eval']['fr'][1]}" in lines
    assert any(line.startswith("grid      18 run(s): epochs 200, epoch size 20000, schedule constant, max len 256")
               for line in lines)
    assert f"  {out}/runs/bs8-lr1.25e-06-head5e-06-seed1-<hash>" in lines
    assert not out.exists()   # nothing written
    missing = [a if a != files["dev"][1] else str(tmp_path / "nowhere") for a in args]
    assert_one_line_error(run_in_process(capsys, *missing), "nowhere", "no such dev file")
    # the model's depth is in its metadata: a plan no run could follow is refused before any weight loads
    assert_one_line_error(run_in_process(capsys, *args, "--freeze-bottom", "5"), "--freeze-bottom 5: the model has "
                          "only 4 layers")
    assert run_in_process(capsys, *args, "--freeze-bottom", "4").returncode == 0


def test_a_head_setting_of_another_pooling_is_refused(tmp_path):
    run, files = str(fake_run(tmp_path)), data(tmp_path)
    with pytest.raises(XltError, match="mlp_dim sizes the pair-max head's MLP; with pooling mean it plays no part"):
        make_plan(FinetuneConfig(task="xnli", model=run, output=str(tmp_path / "o"),
                                 task_settings={"pooling": "mean", "mlp_dim": "64"}, **files))
    plan = make_plan(FinetuneConfig(task="xnli", model=run, output=str(tmp_path / "o"),
                                    task_settings={"pooling": "pair-max", "mlp_dim": "64"}, **files))
    assert plan.task_settings == {"pooling": "pair-max", "mlp_dim": "64"}


@pytest.mark.parametrize("extra, fragment", [
    (["--warmup-fraction", "0.2"], "--warmup-fraction warms up the linear schedule and this task's is constant"),
    (["--shift-alpha", "2"], "--shift-alpha weighs a --shift and none is given"),
    (["--map-layer", "2"], "--map-layer chooses a layer of a --map-dir and none is given"),
    (["--lstm-dim", "64"], "--lstm-dim is for --model static:FILE"),
    (["--lang-embedding-at-test", "source"], "this model has no language embeddings"),
])
def test_an_option_that_would_play_no_part_is_refused_not_recorded(tmp_path, capsys, extra, fragment):
    run, files = fake_run(tmp_path), data(tmp_path)
    described = json.loads((run / "config.json").read_text())
    described["config"]["model"]["lang_embeddings"] = False
    (run / "config.json").write_text(json.dumps(described))
    args = ["finetune", "xnli", "--model", run, "-o", tmp_path / "out", "--train", "en", files["train"][1],
            "--dev", "en", files["dev"][1], "--eval", "fr", *files["eval"]["fr"], "--eval", "en", *files["eval"]["en"],
            "--dry-run"]
    assert run_in_process(capsys, *args).returncode == 0
    assert_one_line_error(run_in_process(capsys, *args, *extra), fragment)
    # under the linear schedule the warm-up plays its part
    assert run_in_process(capsys, *args, "--schedule", "linear", "--warmup-fraction", "0.2").returncode == 0


def test_a_task_setting_spelled_out_at_its_default_names_the_same_runs(tmp_path):
    # `--task-option strip_subtypes true` (the default) named other run folders: the grid trained again
    run, files = str(fake_run(tmp_path)), data(tmp_path)

    def plan(**settings):
        return make_plan(FinetuneConfig(task="parse", model=run, output=str(tmp_path / "o"), task_settings=settings,
                                        **files))

    plain = plan()
    spelled = plan(strip_subtypes=True, punct_upos="PUNCT,SYM")
    assert spelled.task_settings == {} and hashes(spelled) == hashes(plain)
    other = plan(strip_subtypes=True, dropout=0.2)
    assert other.task_settings == {"dropout": 0.2} and hashes(other) != hashes(plain)
    assert plan(strip_subtypes=False).task_settings == {"strip_subtypes": False}
    # a setting the model's kind fills in stays, given or not (its runs' hashes hold it)
    vectors = tmp_path / "w2v.txt"
    vectors.write_text("1 2\ncat 0.1 0.2\n")
    static = make_plan(FinetuneConfig(task="xnli", model=f"static:{vectors}", output=str(tmp_path / "o"),
                                      task_settings={"pooling": "pair-max"}, **files))
    assert static.task_settings == {"pooling": "pair-max"}
