"""``xlt embed train``: a thin wrapper over :func:`xlt.embed.train.train_embeddings`."""

from __future__ import annotations

import click

from xlt.cli.options import OutputPath, build_config, dataclass_options, given_on_command_line, unused_setting
from xlt.embed.config import GLOVE_ONLY, WORD2VEC_ONLY, EmbedConfig


@click.group()
def embed() -> None:
    """Static word embeddings (Word2Vec, GloVe) trained jointly over several languages.

    The baselines of Liu et al. (2020) §3: trained from scratch on the same tokenized (and BPE'd)
    text as a BERT run, evaluated with `xlt align word --emb-a/--emb-b`.

    \b
    Example:
      xlt embed train --method word2vec --text en en.bpe --text fr fr.bpe --dim 768 -o w2v.txt
      xlt align word --emb-a w2v.txt --emb-b w2v.txt --source-lang en --target-lang fr \\
        --map none --test-dict data/muse/splits_reconstructed/en-fr.5000-6500.txt -o mrr.json
    """


@embed.command("train")
@click.option("--text", "texts", type=(str, click.Path(dir_okay=False)), multiple=True, required=True,
              metavar="LANG FILE", help="A language's tokenized (optionally BPE'd) text, one sentence a line "
                                        "(repeatable: all languages are trained into one space).")
@dataclass_options(EmbedConfig)
@click.option("-o", "--output", required=True, type=OutputPath(dir_okay=False), metavar="FILE",
              help="Embeddings in the word2vec text format; FILE.json describes them (config, inputs, versions).")
def train(texts, output, **settings):
    """Train Word2Vec (gensim) or GloVe on several languages' text, written in the word2vec text format.

    The languages share one vocabulary and one space, with no language prefix: the files are read
    line by line in turn (one line of each language) as one corpus, Liu et al.'s joint training.
    A word occurring in two languages is one vector (an anchor). Rows are sorted by frequency.

    \b
    Example (the Liu et al. baselines on the BPE'd text of a run, then a shorter window):
      xlt embed train --method glove --text en data/en.bpe --text fr data/fr.bpe --dim 768 -o glove.txt
      xlt embed train --method word2vec --text en data/en.bpe --text fr data/fr.bpe --window 128 -o w2v-128.txt
    """
    from xlt.embed.train import train_embeddings

    config = build_config(EmbedConfig, settings)
    other = "glove" if config.method == "word2vec" else "word2vec"
    if unused := given_on_command_line(*(GLOVE_ONLY if other == "glove" else WORD2VEC_ONLY)):
        raise unused_setting(unused[0], f"is a {other} setting and --method is {config.method}")
    train_embeddings(list(texts), output, config)
