"""``xlt track``: parse options into a TrackConfig and call :func:`xlt.track.tracker.track`."""

from __future__ import annotations

import sys

import click

from xlt.cli.options import (DEVICE_HELP, OutputPath, build_config, dataclass_options, given_on_command_line,
                             unused_setting)
from xlt.track.config import MEASURES, TrackConfig


def _config(values: dict) -> TrackConfig:
    from xlt.track.settings import DATA_SETTINGS

    # a measure's setting without its data would do nothing, so it is refused rather than ignored
    for data, settings in DATA_SETTINGS.items():
        if values.get(data) is None and (unused := given_on_command_line(*settings)):
            raise unused_setting(unused[0], f"sets a measure read from --{data.replace('_', '-')}, which is not given")
    return build_config(TrackConfig, values)


@click.command()
@click.option("--run", "runs", required=True, multiple=True, metavar="DIR",
              help="Pretraining run directory whose snapshots (checkpoints/step-N.pt) are tracked, or a "
                   "transformers Trainer's output (its checkpoint-N/ folders: step-N) (repeatable).")
@click.option("--label", "labels", multiple=True, metavar="TEXT",
              help="Display name of each --run, in the same order (default: the run directory's last two parts).")
@click.option("-o", "--output", required=True, type=OutputPath("directory"), metavar="DIR",
              help="Tracking directory: records.jsonl (appended), locks/, cache/, data/, ner/.")
@click.option("--measures", "measures", multiple=True, type=click.Choice(MEASURES), metavar="NAME",
              help="A measure to compute (repeatable; default: every one whose data is given): "
                   + ", ".join(MEASURES) + ".")
@click.option("--device", default="auto", show_default=True, metavar="DEVICE", help=DEVICE_HELP)
@dataclass_options(TrackConfig, skip=("runs", "labels", "output", "measures", "device"))
def track(**values) -> None:
    """Evaluate each new pretraining snapshot (checkpoints/step-N.pt) into tracking records.

    Measures: dev perplexity, CKA, word and sentence retrieval, the language-identity signal and
    zero-shot NER; one record per (snapshot, measure, language, layer) is appended to
    TRACKDIR/records.jsonl, with the random encoder's value as each one's bound.

    A transformers Trainer's output is a series too: each checkpoint-N/ folder is snapshot step-N
    (no dev perplexity; give --target-lang when its config names no languages).

    Idempotent and safe to overlap: a second call computes only what is new (snapshots written since,
    measures asked for since), and two calls never evaluate the same snapshot at once (the second
    skips it). Run it from cron while pretraining writes snapshots (docs/cron.md); read the curves
    with xlt report dynamics.

    \b
    Example (two rows of Table 1 pretrained with --snapshot-every 500):
      xlt track --run runs/en-fr.default --label Default \\
          --run runs/en-fr.sep-emb+l1-6 --label "Sep Emb + L1-6" \\
          --parallel xnli.dev.en xnli.dev.fr --dictionary muse/en-fr.5000-6500.txt \\
          --tatoeba tatoeba/fra-eng.eng tatoeba/fra-eng.fra --ner-data-dir work/demo/tasks -o dynamics/track
      xlt report dynamics --records dynamics/track/records.jsonl -o dynamics/report
      xlt track --run trainer-out --source-lang en --target-lang fr \\
          --parallel xnli.dev.en xnli.dev.fr -o dynamics/track
    """
    from xlt.track.tracker import track as run
    from xlt.utils import log

    summary = run(_config(values))
    busy = f", {len(summary.busy)} snapshot(s) busy in another process" if summary.busy else ""
    later = f", {len(summary.deferred)} measure(s) left for later" if summary.deferred else ""
    failed = f", {len(summary.failed)} measure(s) FAILED (see above)" if summary.failed else ""
    log.info(f"{values['output']}: {summary.records} new record(s) from {len(summary.evaluated)} snapshot(s)"
             f"{busy}{later}{failed}")
    if summary.failed:
        sys.exit(1)
