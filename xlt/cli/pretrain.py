"""``xlt pretrain``: parse options into a PretrainConfig, resolve it (:func:`xlt.pretrain.plan.resolve`)
and train the plan (:func:`xlt.pretrain.trainer.pretrain`), or print it with --dry-run."""

from __future__ import annotations

import os

import click

from xlt.cli.options import OutputPath, build_config, dataclass_options, given_on_command_line, unused_setting
from xlt.pretrain.config import PretrainConfig


@click.command()
@click.option("--run-dir", required=True, type=OutputPath("directory"), metavar="DIR",
              help="Run directory: created, or resumed when it already holds this run.")
@click.option("--dry-run", is_flag=True,
              help="Print the resolved run (model size, tokens per step, curriculum, snapshot steps) and "
                   "write nothing.")
@dataclass_options(PretrainConfig, metavars={"vocab": "FILE", "codes": "LANG FILE"})
def pretrain(run_dir: str, dry_run: bool, **values) -> None:
    """Pretrain a bilingual or multilingual masked language model.

    One batch is one language, drawn with p proportional to (share of sentences)^alpha (one batch per
    step, or --langs-per-step of them); 15% of tokens are predicted (80% <mask>, 10% kept, 10%
    random). Running the same command on an existing run directory resumes it exactly. The same
    command runs under torchrun for several GPUs or nodes.

    \b
    Example (the paper's Sep L1-3 row, the demo's recipe, ~12 CPU-min; a model
    this small leaves the unigram plateau only after 8-token windows, see docs/pretrain.md):
      xlt pretrain --run-dir runs/en-fr.sep-l1-3 --vocab vocab --sharing sep-l1-3 \\
          --train en data/en.train --train fr data/fr.train \\
          --dev en data/en.dev --dev fr data/fr.dev --equal-copies-init \\
          --preset mini --batch-size 16 --stream-len 64 --dropout 0 --short-stream-len 8 \\
          --short-stream-steps 2500 --max-steps 7500 --warmup-steps 500 --lr 3e-3
    \b
    Example (8 GPUs on one node, the paper's model):
      torchrun --nproc_per_node 8 -m xlt pretrain --run-dir runs/en-fr --preset wu2020 \\
          --batch-size 96 ... (same options)
    """
    from xlt.pretrain.plan import resolve

    config = build_config(PretrainConfig, values)
    if config.warmup_steps == 0 and given_on_command_line("warmup_init_lr"):
        raise unused_setting("warmup_init_lr", "starts the warm-up and --warmup-steps is 0")
    plan = resolve(config)
    # under torchrun every rank runs this command: rank 0 says what the job does, once
    speaks = int(os.environ.get("RANK", "0")) == 0
    if dry_run:
        from xlt.pretrain.plan import describe

        if speaks:
            click.echo(describe(plan, int(os.environ.get("WORLD_SIZE", "1"))))
        return
    from xlt.pretrain.trainer import pretrain as train

    summary = train(plan, run_dir)
    best = summary["best"]
    if speaks:
        click.echo(f"{run_dir}: step {summary['step']}, best {best.get('metric', 'dev ppl')} "
                   f"{best['value']:.3f} at step {best['step']}", err=True)
