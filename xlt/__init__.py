"""xlt: a command-line toolkit for cross-lingual representation research.

The package folders follow the pipeline: ``text`` (tokenize, BPE, vocabularies, code-switching),
``data`` (memory-mapped token stores and data recipes), then the later stages. ``cli`` is a thin
layer: each subcommand parses options and calls one library function.
"""

__version__ = "0.1.0"
