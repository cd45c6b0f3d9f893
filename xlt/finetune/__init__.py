"""Zero-shot cross-lingual transfer: fine-tune on a source language, evaluate on every target.

:mod:`xlt.finetune.task` is the contract between the task modules (XNLI, NER, parsing: data
readers, encoding, heads, metrics) and the runner (grid, seeds, selection, resumable hash-named run
directories).
"""
