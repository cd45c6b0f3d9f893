"""``xlt report``: the papers' tables and figures from a pipeline's result files.

* :mod:`xlt.report.paper` -- the papers' numbers (``paper_numbers.json``) and their sources
* :mod:`xlt.report.sources` -- result files -> values, or the reason a value is missing
* :mod:`xlt.report.render` -- a report table as Markdown, CSV, LaTeX and JSON
* :mod:`xlt.report.findings` -- a paper's claim checked on xlt's numbers and on the paper's
* :mod:`xlt.report.table1`, :mod:`xlt.report.figure7`, :mod:`xlt.report.alignment`,
  :mod:`xlt.report.liu` -- one module per reproduced table or figure (Table 1's cells in
  :mod:`xlt.report.table1_cells`, its Fake-English pair in :mod:`xlt.report.table1_fake`, K et al.'s
  word-order control in :mod:`xlt.report.table1_word_order`)
* :mod:`xlt.report.plots` -- per-layer line plots (matplotlib, Agg backend)
"""
