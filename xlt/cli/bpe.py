"""``xlt bpe``: fastBPE-compatible learn / apply / vocab, plus vocabulary union and anchor counts."""

from __future__ import annotations

from typing import Optional

import click

from xlt.cli import XltGroup
from xlt.cli.options import OutputPath

LANG_FILE = click.option("--vocab", "vocabs", type=(str, click.Path()), multiple=True, metavar="LANG FILE",
                         help="A language and its vocabulary (token count); repeat once per language.")


@click.group(cls=XltGroup)
def bpe() -> None:
    """Byte-pair encoding, byte-identical to fastBPE (codes and vocabularies in its formats).

    \b
    Example (Default: joint BPE, 80k merges; then count the anchors):
      xlt bpe learn --merges 80000 -o codes en.tok fr.tok
      xlt bpe apply --codes codes en.tok -o en.bpe
      xlt bpe apply --codes codes fr.tok -o fr.bpe
      xlt bpe vocab --lang en --lang fr -o vocab en.bpe fr.bpe
      xlt bpe vocab -o en.vocab en.bpe && xlt bpe vocab -o fr.vocab fr.bpe
      xlt bpe anchors --vocab en en.vocab --vocab fr fr.vocab

    See docs/bpe.md for the Default anchors and No anchors recipes.
    """


@bpe.command()
@click.option("--merges", "-n", type=click.IntRange(min=1), required=True, metavar="N",
              help="Number of merge operations (the paper: 80000 joint, 40000 per language).")
@click.option("--output", "-o", type=OutputPath(), default="-", show_default=True, metavar="FILE",
              help="Codes file ('a b count' per line).")
@click.argument("corpora", nargs=-1, required=True)
def learn(merges: int, output: str, corpora: tuple[str, ...]) -> None:
    """Learn BPE codes from one or more corpora (jointly), like `fast learnbpe N CORPUS ...`.

    Corpora may be plain, .gz, .xz or - (stdin).

    \b
    Example:
      xlt bpe learn --merges 80000 -o codes en.tok fr.tok   # joint (Default)
      xlt bpe learn --merges 40000 -o codes.en en.tok       # per language
    """
    from xlt.text.bpe import learn as learn_codes

    learn_codes(corpora, merges, output)


@bpe.command()
@click.option("--codes", "-c", required=True, type=click.Path(), metavar="FILE", help="fastBPE codes file.")
# No -v: everywhere else -v means verbose or version, and --vocab has no short form elsewhere.
@click.option("--vocab", type=click.Path(), default=None, metavar="FILE",
              help="Limit the output to subwords of this vocabulary (token count).")
@click.option("--vocab-threshold", type=click.IntRange(min=1), default=None, metavar="N",
              help="Keep only vocabulary entries with a count of at least N (needs --vocab).")
@click.option("--output", "-o", type=OutputPath(), default="-", show_default=True, metavar="FILE", help="Output file.")
@click.argument("input", default="-")
def apply(codes: str, vocab: Optional[str], vocab_threshold: Optional[int], output: str, input: str) -> None:
    """Apply BPE codes to INPUT (default stdin), like `fast applybpe OUT INPUT CODES [VOCAB]`.

    Subwords are joined by '@@ '. A plain file runs fastBPE's own multi-threaded tool; stdin and
    .gz/.xz stream through its Python binding with the same output.

    \b
    Example:
      xlt bpe apply --codes codes en.tok -o en.bpe
      xlt bpe apply --codes codes --vocab en.vocab --vocab-threshold 50 en.tok.xz -o en.bpe
    """
    from xlt.text.bpe import apply as apply_codes

    apply_codes(codes, input, output, vocab, vocab_threshold)


@bpe.command()
@click.option("--output", "-o", type=OutputPath(), default="-", show_default=True, metavar="FILE",
              help="Vocabulary file ('token count' per line).")
@click.option("--lang", "-l", "languages", multiple=True, metavar="LANG",
              help="Language of each input, in order; writes the ownership sidecar VOCAB.langs.json.")
@click.argument("inputs", nargs=-1, required=True)
def vocab(output: str, languages: tuple[str, ...], inputs: tuple[str, ...]) -> None:
    """Count the tokens of BPE'd text, like `fast getvocab INPUT ...` (any number of inputs).

    \b
    Example:
      xlt bpe vocab -o en.vocab en.bpe
      xlt bpe vocab --lang en --lang fr -o vocab en.bpe fr.bpe   # with ownership
    """
    from xlt.text.bpe import build_vocabulary

    build_vocabulary(inputs, output, languages)


@bpe.command()
@LANG_FILE
@click.option("--output", "-o", type=OutputPath(), required=True, metavar="FILE",
              help="Union vocabulary (its sidecar VOCAB.langs.json is written too).")
@click.option("--prefix-lang", is_flag=True,
              help="Prefix every entry with its language (fr:chat) so no token is shared (No anchors).")
def union(vocabs: tuple[tuple[str, str], ...], output: str, prefix_lang: bool) -> None:
    """Union of per-language vocabularies: counts summed, sorted like getvocab, ownership recorded.

    \b
    Example (Default anchors, then No anchors):
      xlt bpe union --vocab en en.vocab --vocab fr fr.vocab -o vocab
      xlt bpe union --vocab en en.vocab --vocab fr fr.vocab --prefix-lang -o vocab.noanchor
    """
    from xlt.text.anchors import union_vocabulary

    union_vocabulary(vocabs, output, prefix_lang)


@bpe.command()
@LANG_FILE
@click.option("--json", "json_path", type=OutputPath(), default=None, metavar="FILE",
              help="Also write the report as JSON (- for stdout).")
def anchors(vocabs: tuple[tuple[str, str], ...], json_path: Optional[str]) -> None:
    """Shared token types per language pair and the share of running tokens they cover.

    Inputs are per-language vocabularies with counts (`xlt bpe vocab` of each language's BPE'd text).

    \b
    Example:
      xlt bpe anchors --vocab en en.vocab --vocab fr fr.vocab --json anchors.json
    """
    from xlt.text.anchors import report_anchors

    report_anchors(vocabs, json_path)
