"""``xlt report dynamics``: tracked measures (``xlt track``'s records.jsonl) against pretraining step, several
runs overlaid, and the step where each one emerges from its random-encoder bound.

* :mod:`xlt.report.dynamics_records` -- the records read into curves (one per run, measure, lang, layer)
* :mod:`xlt.report.dynamics_emergence` -- "emerges at" and each run's ordering line
* :mod:`xlt.report.dynamics_tables` -- Markdown, CSV and JSON
* :mod:`xlt.report.dynamics_plots` -- the PNGs
"""

from __future__ import annotations

import os
from typing import Optional, Sequence

from xlt.report import dynamics_plots, dynamics_tables
from xlt.report.dynamics_emergence import analyse
from xlt.report.dynamics_records import EmergenceRule, read_records
from xlt.utils.outputs import check_output_directory, directory_for_outputs


def report(record_paths: Sequence[str], output_dir: str, rule: Optional[EmergenceRule] = None) -> str:
    """Read the records, write OUTPUT_DIR/dynamics.{md,csv,json}, dynamics-emergence.csv and one PNG per
    measure (and language); return the Markdown of the "emerges at" tables and ordering lines."""
    rule = rule or EmergenceRule()
    check_output_directory(output_dir)
    dynamics = analyse(read_records(list(record_paths)), rule)
    with directory_for_outputs(output_dir):   # the figures first, the tables after, the Markdown last
        figures = dynamics_plots.plot_all(dynamics, output_dir)
        dynamics_tables.write_all(dynamics, rule, [os.path.basename(f) for f in figures], output_dir)
    return dynamics_tables.emergence_markdown(dynamics, rule)
