"""``xlt baselines``: a task's trivial baselines from its data files (thin wrapper over
:mod:`xlt.finetune.baselines`)."""

from __future__ import annotations

import click

from xlt.cli.options import OutputPath


@click.command()
@click.argument("task")
@click.option("--train", required=True, type=(str, click.Path()), metavar="LANG FILE",
              help="The training file the baselines are fitted on (what `xlt finetune --train` reads).")
@click.option("--eval", "eval_", required=True, multiple=True, type=(str, click.Path()), metavar="LANG FILE",
              help="A test file to score the baselines on (repeatable; one per language).")
@click.option("--task-option", "task_settings", multiple=True, type=(str, str), metavar="KEY VALUE",
              help="A task setting, as for `xlt finetune` (e.g. punct_upos, f1_mode: they change the "
                   "scores) (repeatable).")
@click.option("-o", "--output", required=True, type=OutputPath(dir_okay=False), metavar="FILE",
              help="Output JSON file.")
def baselines(task: str, train: tuple[str, str], eval_: tuple[tuple[str, str], ...], task_settings,
              output: str) -> None:
    """Trivial baselines of a task (xnli, ner, parse), from its data files only: no model.

    What a fine-tuned model must beat to show it learned anything, scored by the task's own
    reader and metric code (the numbers are comparable to `xlt finetune`'s): xnli -- chance and
    majority class (accuracy); ner -- all O and training entities (span F1); parse -- next word
    and previous word as the head, relations by UPOS (LAS, UAS). Writes OUTPUT (format
    xlt-baselines/1: every score and the best baseline per test file) and prints the table.
    See docs/baselines.md.

    \b
    Example (parsing, English source, English and French test sets; -o's folder must exist):
      mkdir -p baselines/en-fr
      xlt baselines parse --train en data/ud/en_ewt/en_ewt-ud-train.conllu \\
          --eval en data/ud/en_ewt/en_ewt-ud-test.conllu \\
          --eval fr data/ud/fr_gsd/fr_gsd-ud-test.conllu -o baselines/en-fr/parse.json
    """
    from xlt.finetune.baselines import baselines_file, markdown

    result = baselines_file(task, train, list(eval_), output, dict(task_settings))
    click.echo(markdown(result), nl=False)
