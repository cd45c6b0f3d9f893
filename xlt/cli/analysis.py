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


def _prefix(output: str, suffix: str) -> str:
    return output[:-len(suffix)] if output.endswith(suffix) else output


@click.group()
def cka() -> None:
    """Linear CKA between layer representations of parallel sentences (Wu et al. 2020, Figure 7).

    `compare` computes one column (two models, two languages in one model, or a model against a
    randomly initialised one); `table` lays several columns out as Figure 7.

    \b
    Example (the en-fr columns of Figure 7 on the XNLI dev premises):
      cut -f1 data/xnli/dev-en.tsv > en.txt; cut -f1 data/xnli/dev-fr.tsv > fr.txt
      xlt cka compare --model-a runs/en-fr --lang-a en --text-a en.txt \\
          --lang-b fr --text-b fr.txt --label en-fr --column Bilingual -o cka/en-fr.bi
      xlt cka table cka/en-fr.bi.json cka/en-fr.mono.json cka/en-fr.random.json -o cka/fig7
    """


@cka.command()
@click.option("--model-a", help="Run directory of side A (with --lang-a and --text-a).")
@click.option("--lang-a", help="Language of side A.")
@click.option("--text-a", type=click.Path(), help="Side A's sentences, one per line.")
@click.option("--reps-a", help="Instead: an `xlt extract` sentence-level output prefix for side A.")
@click.option("--model-b", help="Run directory of side B [default: --model-a].")
@click.option("--lang-b", help="Language of side B.")
@click.option("--text-b", type=click.Path(), help="Side B's sentences, line-parallel to side A's.")
@click.option("--reps-b", help="Instead: an `xlt extract` sentence-level output prefix for side B.")
@click.option("--random-b", type=int, default=None,
              help="Side B through a randomly initialised model of --model-b's architecture, with this seed.")
@click.option("--label", default="", help="Column group in the table, e.g. en-fr.")
@click.option("--column", default="", help="Column name within the group, e.g. Bilingual, Monolingual, Random.")
@click.option("--layers", default=None, help="Comma-separated layers, 0 = embeddings [default: all].")
@click.option("--matrix", is_flag=True, help="Also every layer of A against every layer of B.")
@click.option("--debiased", is_flag=True, help="Unbiased HSIC estimator (Song et al. 2012) instead of the plain one.")
@click.option("--n-sentences", type=int, default=None, help="Use the first N sentences only [default: all].")
@click.option("--include-specials", is_flag=True, help="Average over the two </s> of each sentence too.")
@click.option("--retrieval", type=click.Path(), default=None,
              help='Sentence-retrieval result {"layers": [...], "p_at_1": [...]}: report the Pearson r.')
@click.option("--checkpoint", type=click.Choice(["best", "last"]), default="best", show_default=True)
@click.option("--batch-size", type=int, default=32, show_default=True)
@click.option("--device", default="cpu", show_default=True)
@click.option("-o", "--output", required=True, help="Output prefix: OUT.json, OUT.png.")
def compare(model_a, lang_a, text_a, reps_a, model_b, lang_b, text_b, reps_b, random_b, label, column, layers,
            matrix, debiased, n_sentences, include_specials, retrieval, checkpoint, batch_size, device,
            output) -> None:
    """CKA per layer between two sides holding the same parallel sentences.

    \b
    Example (one model, two languages):
      xlt cka compare --model-a runs/en-fr --lang-a en --text-a en.txt \\
          --lang-b fr --text-b fr.txt --label en-fr --column Bilingual --matrix -o cka/en-fr.bi
    \b
    Example (two monolingual models; the random-encoder lower bound):
      xlt cka compare --model-a runs/en --lang-a en --text-a en.txt \\
          --model-b runs/fr --lang-b fr --text-b fr.txt --label en-fr --column Monolingual -o cka/en-fr.mono
      xlt cka compare --model-a runs/en --lang-a en --text-a en.txt --model-b runs/fr --random-b 0 \\
          --lang-b fr --text-b fr.txt --label en-fr --column Random -o cka/en-fr.random
    """
    from xlt.analysis.cka import CompareSettings, Side, compare as run_compare, write_column
    from xlt.analysis.extract import parse_layers

    a = _side("a", model_a, lang_a, text_a, reps_a, None)
    b = _side("b", model_b or model_a, lang_b, text_b, reps_b, random_b)
    settings = CompareSettings(parse_layers(layers), debiased, matrix, n_sentences, include_specials, checkpoint,
                               batch_size, device)
    write_column(run_compare(a, b, settings, label, column, retrieval), _prefix(output, ".json"))


def _side(name: str, run, lang, text, reps, random_seed):
    from xlt.analysis.cka import Side
    from xlt.utils.errors import XltError

    if reps:
        return Side(reps=reps)
    if not (run and lang and text):
        raise XltError(f"side {name.upper()} needs --model-{name}, --lang-{name} and --text-{name}, or --reps-{name}")
    return Side(run, lang, text, random_seed)


@cka.command()
@click.argument("columns", nargs=-1, required=True, type=click.Path())
@click.option("-o", "--output", required=True, help="Output prefix: OUT.json, OUT.tsv, OUT.png.")
def table(columns: tuple[str, ...], output: str) -> None:
    """Lay out `xlt cka compare` outputs as Figure 7: rows L0..Ln and AVER, one column per file.

    \b
    Example:
      xlt cka table cka/en-fr.bi.json cka/en-fr.mono.json cka/en-fr.random.json -o cka/fig7
    """
    from xlt.analysis.cka import assemble_table, write_table

    write_table(assemble_table(columns), _prefix(output, ".json"))
