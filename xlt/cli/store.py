"""``xlt binarize``: BPE'd text + vocabulary -> memory-mapped token store."""

from __future__ import annotations

import shlex

import click

from xlt.cli.options import OutputPath
from xlt.utils import log


@click.command("binarize")
@click.option("--vocab", required=True, type=click.Path(), metavar="FILE",
              help="Vocabulary file (fastBPE 'token count', with its optional .langs.json sidecar).")
@click.option("--lang", "-l", required=True, metavar="LANG", help="Language of the text; selects the entries of a "
              "language-prefixed vocabulary and is recorded in the header.")
@click.argument("input_path", metavar="[INPUT]", required=False, default="-")
@click.option("-o", "--output", "prefix", required=True, type=OutputPath("prefix"), metavar="PREFIX",
              help="Output prefix: writes PREFIX.bin, PREFIX.idx and PREFIX.json.")
def binarize(vocab: str, lang: str, input_path: str, prefix: str) -> None:
    """Encode BPE'd text (one sentence per line) into a memory-mapped token store.

    INPUT is plain, .gz or .xz text, or - / nothing for stdin. Every sentence is followed by </s>
    in PREFIX.bin, so the pretraining stream is one slice of the file; empty lines stay as empty
    sentences so line numbers match parallel files. Unknown subwords become <unk> and are counted
    in the header (n_unk, unk_rate).

    \b
    Example:
      mkdir -p stores; xlt binarize --vocab vocab --lang en en.train.bpe -o stores/en.train
    """
    from xlt.data.store import binarize as binarize_text

    command = shlex.join(["xlt", "binarize", "--vocab", vocab, "--lang", lang, input_path, "-o", prefix])
    header = binarize_text(input_path, vocab, lang, prefix, command=command)
    log.info(f"{prefix}: {header['n_sentences']:,} sentences, {header['n_tokens']:,} tokens, "
             f"{header['n_unk']:,} unknown ({100 * header['unk_rate']:.2f} %), {header['dtype']}")
