"""``xlt extract``, ``xlt cka`` and ``xlt shift-decode``: thin wrappers over :mod:`xlt.analysis`."""

from __future__ import annotations

from typing import Optional

import click

RUN_HELP = "Pretrained run directory (written by xlt pretrain)."


@click.command()
@click.option("--model", "run_dir", required=True, type=click.Path(file_okay=False), help=RUN_HELP)
@click.option("--lang", required=True, help="Language of the input (one of the run's).")
@click.option("--level", type=click.Choice(["sentence", "word", "token"]), default="sentence", show_default=True,
              help="sentence: mean over subwords; word: one vector per pre-tokenized word; token: every subword.")
@click.option("--pooling", type=click.Choice(["first", "mean"]), default="first", show_default=True,
              help="Word level: first subword or mean of the word's subwords.")
@click.option("--layers", default=None, help="Comma-separated layers, 0 = embeddings [default: all].")
@click.option("--include-specials", is_flag=True,
              help="Sentence/token level: also average over (or keep) the two </s> around each sentence.")
@click.option("--checkpoint", type=click.Choice(["best", "last"]), default="best", show_default=True)
@click.option("--random-init", "random_seed", type=int, default=None,
              help="Use a randomly initialised model of the run's architecture, seeded (a lower bound).")
@click.option("--batch-size", type=int, default=32, show_default=True)
@click.option("--device", default="cpu", show_default=True, help="torch device: cpu, cuda, cuda:1 ...")
@click.argument("input_path", metavar="INPUT", type=click.Path())
@click.option("-o", "--output", required=True, help="Output prefix: writes OUT.npy, OUT.json (and OUT.index.npz).")
def extract(run_dir: str, lang: str, level: str, pooling: str, layers: Optional[str], include_specials: bool,
            checkpoint: str, random_seed: Optional[int], batch_size: int, device: str, input_path: str,
            output: str) -> None:
    """Per-layer representations of INPUT (one sentence per line; word level: pre-tokenized words).

    Text goes through the run's own tokenizer and BPE. OUT.npy is float32 [layers, rows, d_model]
    (np.load(..., mmap_mode="r")); OUT.json records run, step, language, level, pooling, layers and
    the input's sha256; OUT.index.npz holds ``offsets`` (sentence i = rows offsets[i]:offsets[i+1])
    and, at token level, ``token_ids``.

    \b
    Example (sentence means of layers 0, 4 and 8 of the XNLI English dev premises):
      cut -f1 data/xnli/dev-en.tsv > en.txt
      xlt extract --model runs/en-fr --lang en --layers 0,4,8 en.txt -o reps/en.dev
    \b
    Example (first-subword word vectors of CoNLL-style words, one sentence per line):
      xlt extract --model runs/en-fr --lang fr --level word --pooling first words.fr -o reps/fr.words
    """
    from xlt.analysis.extract import extract_to_files, parse_layers

    extract_to_files(run_dir, lang, input_path, output, level, pooling, parse_layers(layers), checkpoint,
                     batch_size, device, include_specials, random_seed)
