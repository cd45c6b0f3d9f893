"""Masked-LM pretraining: the loop, checkpoints with exact resume, and torchrun set-up.

The network lives in :mod:`xlt.model`; the data side (streams, language sampling, masking) in
:mod:`xlt.data`. This package only wires them together and keeps the run directory.
"""
