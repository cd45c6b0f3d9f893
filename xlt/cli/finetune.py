"""``xlt finetune``: parse options (and an optional JSON/TOML file) into a FinetuneConfig, run the grid."""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

import click
from click.core import ParameterSource

from xlt.cli.options import OutputPath, build_config, dataclass_options, given_on_command_line, unused_setting
from xlt.finetune.config import FinetuneConfig, read_config_file
from xlt.utils.errors import XltError

# Options spelled by hand below (lists, triples, the task argument); the rest come from the dataclass.
LIST_FIELDS = {"batch_size": int, "encoder_lr": float, "head_lr": float, "seeds": int, "shift_alpha": float}
MANUAL = {"task", "model", "output", "targets", "eval", "task_settings", "map_dir", "shift", *LIST_FIELDS}
GENERATED = [f.name for f in dataclasses.fields(FinetuneConfig) if f.name not in MANUAL]


def _help(name: str) -> str:
    return next(f.metadata["help"] for f in dataclasses.fields(FinetuneConfig) if f.name == name)


def _numbers(values: tuple[str, ...], kind: type, option: str) -> list:
    """``--x 1,2 --x 3`` -> [1, 2, 3]: comma lists of numbers, the option repeatable."""
    out = []
    for value in values:
        for item in value.split(","):
            try:
                out.append(kind(item.strip()))
            except ValueError:
                raise XltError(f"{option}: {item.strip()!r} is not {'an integer' if kind is int else 'a number'}") from None
    return out


def _task_value(text: str) -> Any:
    """A --task-option value: JSON when it parses (numbers, true/false), else the string itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


@click.command()
@click.argument("task")
@click.option("--model", required=True, metavar="MODEL", help=_help("model"))
@click.option("-o", "--output", required=True, type=OutputPath("directory"), metavar="DIR", help=_help("output"))
@click.option("--config", "config_file", type=click.Path(), default=None, metavar="FILE",
              help="JSON or TOML file of the options below (names with dashes or underscores; lists for the "
                   "grid); options given on the command line win.")
@click.option("--target", "targets", multiple=True, metavar="LANG", help=_help("targets"))
@click.option("--eval", "eval_", multiple=True, type=(str, str, str), metavar="LANG DEV_FILE TEST_FILE", help=_help("eval"))
@click.option("--task-option", "task_settings", multiple=True, type=(str, str), metavar="KEY VALUE",
              help=_help("task_settings") + " (repeatable)")
@click.option("--batch-size", multiple=True, metavar="N[,N...]", help=_help("batch_size"))
@click.option("--encoder-lr", multiple=True, metavar="LR[,LR...]", help=_help("encoder_lr"))
@click.option("--head-lr", multiple=True, metavar="LR[,LR...]", help=_help("head_lr"))
@click.option("--seeds", multiple=True, metavar="N[,N...]", help=_help("seeds") + " [default: 12]")
@click.option("--map-dir", multiple=True, type=click.Path(), metavar="DIR", help=_help("map_dir"))
@click.option("--shift", multiple=True, type=click.Path(), metavar="FILE", help=_help("shift"))
@click.option("--shift-alpha", multiple=True, metavar="A[,A...]", help=_help("shift_alpha") + " [default: 1]")
@click.option("--dry-run", is_flag=True, help="print the plan (model, task, data files, grid, test-time "
              "transforms, outputs) once every input file is found and every option accepted, and run "
              "nothing (file contents are read when the run starts)")
@dataclass_options(FinetuneConfig, skip=MANUAL, metavars={"data_dir": "DIR"})
def finetune(task: str, config_file: str | None, targets, eval_, task_settings, map_dir, shift, dry_run: bool,
             **values) -> None:
    """Zero-shot cross-lingual transfer: fine-tune on a source language, test on every target.

    The pretrained model (plus a new task head) is fine-tuned on the source language over a grid of
    batch sizes and learning rates, once per seed; each run's best epoch and the best grid point are
    chosen on the SOURCE dev set only. Every target runs through its own language-specific parts.
    Each run lives in OUTPUT/runs/<hash>/: finished runs are skipped, killed ones resume from their
    last epoch, and a run another process holds is left to it. Every evaluation also writes what
    the model predicted to the run's predictions/ (CoNLL-U for parse, word/gold/predicted for ner,
    id/gold/predicted for xnli; --no-predictions: none). results.json and summary.md (also
    printed) hold every run, the selected setting, the mean of the best two, and mean ± std over
    seeds. Exit status: 0 all done, 1 a run failed, 2 bad input, 75 runs busy elsewhere.

    \b
    Example (the paper's XNLI grid, en -> fr, data laid out under XLT_DATA by xlt data fetch, three seeds):
      xlt finetune xnli --model runs/en-fr.default -o results/xnli.en-fr \\
          --target fr --seeds 12,156,78
    \b
    Example (NER with explicit files, a smaller grid, Liu et al.'s frozen bottom):
      xlt finetune ner --model runs/en-ru -o results/ner.en-ru \\
          --train en data/ner/wikiann/en/train --dev en data/ner/wikiann/en/dev \\
          --eval en data/ner/wikiann/en/dev data/ner/wikiann/en/test \\
          --eval ru data/ner/wikiann/ru/dev data/ner/wikiann/ru/test \\
          --batch-size 32 --encoder-lr 2e-5,3e-5 --epochs 3 --freeze-bottom 4
    \b
    Example (the XNLI paper's BiLSTM-max baseline on frozen static vectors, Liu et al.'s comparison):
      xlt finetune xnli --model static:w2v.txt --codes codes -o results/xnli.w2v \\
          --eval fr data/xnli/dev-fr.tsv data/xnli/test-fr.tsv --batch-size 64 --encoder-lr 1e-3 --head-lr 1e-3
    \b
    Example (NER on multilingual BERT from the hub cache, its own WordPiece and [CLS] x [SEP] inputs):
      xlt finetune ner --model hf:bert-base-multilingual-cased -o results/ner.mbert --target ru
    \b
    Example (test-time mean-difference shift at layer 6, weight chosen per target on its dev set):
      xlt finetune xnli --model runs/en-fr -o results/xnli.mds --freeze-bottom 6 \\
          --shift shift.fr-en.npz --shift-layer 6 --shift-alpha 0.5,1,1.5,2
    \b
    Example (what the paper's XNLI grid would run, without running it):
      xlt finetune xnli --model runs/en-fr.default -o results/xnli.en-fr --target fr --dry-run
    """
    ctx = click.get_current_context()
    merged: dict[str, Any] = read_config_file(config_file) if config_file else {}
    for name in GENERATED:  # the command line wins over the file, the file over the defaults
        if ctx.get_parameter_source(name) != ParameterSource.DEFAULT or name not in merged:
            merged[name] = values[name]
    merged.update(task=task, model=values["model"], output=values["output"])
    for name, kind in LIST_FIELDS.items():
        if values[name]:
            merged[name] = _numbers(values[name], kind, "--" + name.replace("_", "-"))
    if targets:
        merged["targets"] = list(targets)
    if eval_:
        merged["eval"] = {lang: (dev, test) for lang, dev, test in eval_}
    if task_settings:
        merged["task_settings"] = {k: _task_value(v) for k, v in task_settings}
    if map_dir:
        merged["map_dir"] = list(map_dir)
    if shift:
        merged["shift"] = list(shift)
    cfg = build_config(FinetuneConfig, merged)
    from xlt.finetune.plan import make_plan

    plan = make_plan(cfg)
    # options that would play no part, refused rather than recorded as if they had
    if given_on_command_line("warmup_fraction") and all(s.schedule == "constant" for s in plan.grid):
        raise unused_setting("warmup_fraction", "warms up the linear schedule and this task's is constant "
                                                "(--schedule linear)")
    if given_on_command_line("shift_alpha") and not cfg.shift:
        raise unused_setting("shift_alpha", "weighs a --shift and none is given")
    if plan.model.kind != "static" and (unused := given_on_command_line("codes", "lstm_dim")):
        raise unused_setting(unused[0], "is for --model static:FILE")
    if dry_run:
        click.echo(plan.describe(), nl=False)
        return
    from xlt.finetune.runner import execute

    outcome = execute(plan)
    click.echo(outcome.markdown, nl=False)
    if outcome.exit_code:
        sys.exit(outcome.exit_code)
