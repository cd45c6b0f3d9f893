"""``xlt extract``, ``xlt cka`` and ``xlt shift-decode``: thin wrappers over :mod:`xlt.analysis`."""

from __future__ import annotations

from typing import Optional

import click

from xlt.cli.options import OutputPath, checkpoint_option, device_option, finetuned_option, given_on_command_line, unused_setting

RUN_HELP = "An xlt run directory (xlt pretrain), a transformers model directory, or hf:NAME."
# Not click.Path: hf:NAME is a model name, not a file.
MODEL = "MODEL"


@click.command()
@click.option("--model", "run_dir", required=True, metavar=MODEL, help=RUN_HELP)
@click.option("--lang", "-l", required=True, metavar="LANG", help="Language of the input (one of the run's).")
@click.option("--level", type=click.Choice(["sentence", "word", "token"]), default="sentence", show_default=True,
              help="sentence: mean over subwords; word: one vector per pre-tokenized word; token: every subword.")
@click.option("--pooling", type=click.Choice(["first", "mean"]), default="first", show_default=True,
              help="Word level: first subword or mean of the word's subwords.")
@click.option("--layers", default=None, help="Comma-separated layers, 0 = embeddings [default: all].")
@click.option("--include-specials", is_flag=True,
              help="Sentence/token level: also average over (or keep) the two </s> around each sentence.")
@checkpoint_option
@finetuned_option
@click.option("--random-init", "random_seed", type=int, default=None,
              help="Use a randomly initialised model of the run's architecture, seeded (a lower bound).")
@click.option("--batch-size", type=int, default=32, show_default=True)
@device_option
@click.argument("input_path", metavar="INPUT", type=click.Path())
@click.option("-o", "--output", required=True, type=OutputPath("prefix"), metavar="PREFIX",
              help="Output prefix: writes OUT.npy, OUT.json and OUT.index.npz (rows of each sentence).")
def extract(run_dir: str, lang: str, level: str, pooling: str, layers: Optional[str], include_specials: bool,
            checkpoint: str, finetuned: Optional[str], random_seed: Optional[int], batch_size: int, device: str,
            input_path: str, output: str) -> None:
    """Per-layer representations of INPUT (one sentence per line; word level: pre-tokenized words).

    Text goes through the run's own tokenizer and BPE. OUT.npy is float32 [layers, rows, d_model]
    (np.load(..., mmap_mode="r")); OUT.json records run, step, language, level, pooling, layers and
    the input's sha256; OUT.index.npz holds ``offsets`` (sentence i = rows offsets[i]:offsets[i+1])
    and, at token level, ``token_ids``.

    \b
    Example (sentence means of layers 0, 4 and 8 of the XNLI English dev premises):
      cut -f1 data/xnli/dev-en.tsv | uniq > en.txt; mkdir -p reps
      xlt extract --model runs/en-fr --lang en --layers 0,4,8 en.txt -o reps/en.dev
    \b
    Example (first-subword word vectors of CoNLL-style words, one sentence per line):
      xlt extract --model runs/en-fr --lang fr --level word --pooling first words.fr -o reps/fr.words
    \b
    Example (the same sentences through the encoder of an xlt finetune run started from runs/en-fr):
      xlt extract --model runs/en-fr --lang fr --finetuned table1/default/en-fr/ner fr.txt -o reps/fr.ner
    """
    from xlt.analysis.extract import extract_to_files, parse_layers

    if level != "word" and given_on_command_line("pooling"):
        raise unused_setting("pooling", f"pools a word's subwords and --level is {level}")
    if level == "word" and include_specials:
        raise unused_setting("include_specials", "is for --level sentence or token (a word has no </s>)")
    extract_to_files(run_dir, lang, input_path, output, level, pooling, parse_layers(layers), checkpoint,
                     batch_size, device, include_specials, random_seed, finetuned)


def _prefix(output: str, suffix: str, *extensions: str) -> str:
    """``output`` without ``suffix``, once every file PREFIX+extension can be written (checked before
    the work, so a bad -o does not fail after it, or between two of the outputs)."""
    from xlt.utils.outputs import check_output_paths

    prefix = output[:-len(suffix)] if output.endswith(suffix) else output
    check_output_paths(*(prefix + extension for extension in extensions or (suffix,)))
    return prefix


@click.group()
def cka() -> None:
    """Linear CKA between layer representations of parallel sentences (Wu et al., 2020, Figure 7).

    `compare` computes one column (two models, two languages in one model, or a model against a
    randomly initialised one); `table` lays several columns out as Figure 7.

    \b
    Example (the en-fr columns of Figure 7 on the XNLI dev premises):
      cut -f1 data/xnli/dev-en.tsv | uniq > en.txt; cut -f1 data/xnli/dev-fr.tsv | uniq > fr.txt; mkdir -p cka
      xlt cka compare --model-a runs/en-fr --lang-a en --text-a en.txt \\
          --lang-b fr --text-b fr.txt --label en-fr --column Bilingual -o cka/en-fr.bi
      xlt cka table cka/en-fr.bi.json cka/en-fr.mono.json cka/en-fr.random.json -o cka/fig7
    """


@cka.command()
@click.option("--model-a", metavar=MODEL,
              help="Model of side A (with --lang-a and --text-a), as --model of xlt extract.")
@click.option("--lang-a", metavar="LANG", help="Language of side A.")
@click.option("--text-a", type=click.Path(), metavar="FILE", help="Side A's sentences, one per line.")
@click.option("--reps-a", type=click.Path(), metavar="PREFIX",
              help="Instead: an `xlt extract` sentence-level output prefix for side A.")
@click.option("--model-b", metavar=MODEL, help="Model of side B [default: --model-a].")
@click.option("--lang-b", metavar="LANG", help="Language of side B.")
@click.option("--text-b", type=click.Path(), metavar="FILE", help="Side B's sentences, line-parallel to side A's.")
@click.option("--reps-b", type=click.Path(), metavar="PREFIX",
              help="Instead: an `xlt extract` sentence-level output prefix for side B.")
@click.option("--random-b", type=int, default=None,
              help="Side B through a randomly initialised model of --model-b's architecture, with this seed.")
@click.option("--label", default="", help="Column group in the table, e.g. en-fr.")
@click.option("--column", default="", help="Column name within the group, e.g. Bilingual, Monolingual, Random.")
@click.option("--layers", default=None, help="Comma-separated layers, 0 = embeddings [default: all].")
@click.option("--matrix", is_flag=True, help="Also every layer of A against every layer of B.")
@click.option("--debiased", is_flag=True, help="Unbiased HSIC estimator (Song et al. 2012) instead of the plain one.")
@click.option("--n-sentences", type=click.IntRange(min=1), default=None,
              help="Use the first N sentences only [default: all].")
@click.option("--include-specials", is_flag=True, help="Average over the two </s> of each sentence too.")
@click.option("--retrieval", type=click.Path(), default=None, metavar="FILE",
              help='Sentence-retrieval result {"layers": [...], "p_at_1": [...]}: report the Pearson r.')
@checkpoint_option
@click.option("--batch-size", type=int, default=32, show_default=True)
@device_option
@click.option("-o", "--output", required=True, type=OutputPath("prefix"), metavar="PREFIX",
              help="Output prefix: OUT.json, OUT.png.")
def compare(model_a, lang_a, text_a, reps_a, model_b, lang_b, text_b, reps_b, random_b, label, column, layers,
            matrix, debiased, n_sentences, include_specials, retrieval, checkpoint, batch_size, device,
            output) -> None:
    """CKA per layer between two sides holding the same parallel sentences.

    \b
    Example (one model, two languages; -o's folder must exist):
      mkdir -p cka
      xlt cka compare --model-a runs/en-fr --lang-a en --text-a en.txt \\
          --lang-b fr --text-b fr.txt --label en-fr --column Bilingual --matrix -o cka/en-fr.bi
    \b
    Example (two monolingual models; the random-encoder lower bound):
      xlt cka compare --model-a runs/en --lang-a en --text-a en.txt \\
          --model-b runs/fr --lang-b fr --text-b fr.txt --label en-fr --column Monolingual -o cka/en-fr.mono
      xlt cka compare --model-a runs/en --lang-a en --text-a en.txt --model-b runs/fr --random-b 0 \\
          --lang-b fr --text-b fr.txt --label en-fr --column Random -o cka/en-fr.random
    """
    from xlt.analysis.cka_compare import CompareSettings, compare as run_compare
    from xlt.analysis.cka_files import write_column
    from xlt.analysis.extract import parse_layers
    from xlt.report.cka_plots import show_column

    a = _side("a", model_a, lang_a, text_a, reps_a, None)
    b = _side("b", model_b or model_a, lang_b, text_b, reps_b, random_b, own_model=model_b)
    settings = CompareSettings(parse_layers(layers), debiased, matrix, n_sentences, include_specials, checkpoint,
                               batch_size, device)
    prefix = _prefix(output, ".json", ".json", ".png")
    result = run_compare(a, b, settings, label, column, retrieval)
    write_column(result, prefix, show_column)   # the layer x layer matrix if computed, else the column; the table


def _side(name: str, run, lang, text, reps, random_seed, own_model=None):
    from xlt.analysis.cka_compare import Side
    from xlt.utils.errors import XltError

    if reps:
        # representations already extracted: a text beside them would be silently left unread (a
        # --model-a may stand for side B's model, its default; a --model-b is side B's alone)
        given = {"model": own_model, "lang": lang, "text": text, "random": random_seed}
        if ignored := [f"--{option}-{name}" for option, value in given.items() if value is not None]:
            raise XltError(f"--reps-{name} is side {name.upper()}'s representations: {', '.join(ignored)} "
                           "would be ignored")
        return Side(reps=reps)
    if not (run and lang and text):
        raise XltError(f"side {name.upper()} needs --model-{name}, --lang-{name} and --text-{name}, or --reps-{name}")
    return Side(run, lang, text, random_seed)


@cka.command()
@click.argument("columns", nargs=-1, required=True, type=click.Path())
@click.option("-o", "--output", required=True, type=OutputPath("prefix"), metavar="PREFIX",
              help="Output prefix: OUT.json, OUT.tsv, OUT.png.")
def table(columns: tuple[str, ...], output: str) -> None:
    """Lay out `xlt cka compare` outputs as Figure 7: rows L0..Ln and AVER, one column per file.

    \b
    Example:
      xlt cka table cka/en-fr.bi.json cka/en-fr.mono.json cka/en-fr.random.json -o cka/fig7
    """
    from xlt.analysis.cka_files import assemble_table, write_table
    from xlt.report.cka_plots import show_table

    prefix = _prefix(output, ".json", ".json", ".tsv", ".png")
    table = assemble_table(columns)
    write_table(table, prefix, show_table)


@click.group("shift-decode")
def shift_decode() -> None:
    """Mean of Language, mean difference shift, unsupervised token translation (Liu et al., 2020, §4).

    `means` averages one language's hidden states per layer; `shift` pairs two means into the file
    that `xlt finetune --shift` reads; `translate` decodes source text shifted towards the target
    for every layer x alpha (BLEU-1 and convert rate); `table` lays results out as Liu et al.'s Table 2.

    \b
    Example (en->fr on the XNLI test premises):
      xlt shift-decode means --model runs/en-fr --lang en held-out.en -o means.en.npz
      xlt shift-decode means --model runs/en-fr --lang fr held-out.fr -o means.fr.npz
      xlt shift-decode shift --src means.en.npz --tgt means.fr.npz -o shift.en-fr.npz
      cut -f1 data/xnli/test-en.tsv | uniq > test.en; cut -f1 data/xnli/test-fr.tsv | uniq > test.fr
      xlt shift-decode translate --model runs/en-fr --shift shift.en-fr.npz \\
          --input test.en --reference test.fr -o en-fr.json
      xlt shift-decode shift --src means.fr.npz --tgt means.en.npz -o shift.fr-en.npz
      xlt shift-decode translate --model runs/en-fr --shift shift.fr-en.npz \\
          --input test.fr --reference test.en -o fr-en.json
      xlt shift-decode table en-fr.json fr-en.json --layer 7 --alpha 3 -o table2
    """


@shift_decode.command()
@click.option("--model", "run_dir", required=True, metavar=MODEL, help=RUN_HELP)
@click.option("--lang", "-l", required=True, metavar="LANG", help="Language of the text.")
@click.option("--n-sentences", type=click.IntRange(min=1), default=10000, show_default=True,
              help="Average over the first N sentences (a fixed sample, so means are comparable).")
@click.option("--include-specials", is_flag=True, help="Average over the </s> around each sentence too.")
@checkpoint_option
@click.option("--batch-size", type=int, default=32, show_default=True)
@device_option
@click.argument("text", type=click.Path())
@click.option("-o", "--output", required=True, type=OutputPath(), metavar="FILE",
              help="Means file (.npz: mean [n_layers+1, d_model], header).")
def means(run_dir, lang, n_sentences, include_specials, checkpoint, batch_size, device, text, output) -> None:
    """Mean of Language: the mean hidden state of every layer over every subword of held-out TEXT.

    \b
    Example:
      xlt shift-decode means --model runs/en-fr --lang fr --n-sentences 10000 held-out.fr -o means.fr.npz
    """
    from xlt.analysis.shift import compute_means
    from xlt.utils.outputs import check_output_paths

    check_output_paths(output)
    compute_means(run_dir, lang, text, output, n_sentences, include_specials, checkpoint, batch_size, device)


@shift_decode.command()
@click.option("--src", "src_means", required=True, type=click.Path(), metavar="FILE",
              help="Means file of the source language.")
@click.option("--tgt", "tgt_means", required=True, type=click.Path(), metavar="FILE",
              help="Means file of the target language.")
@click.option("-o", "--output", required=True, type=OutputPath(), metavar="FILE",
              help="Shift file (.npz: mean_src, mean_tgt, header).")
def shift(src_means: str, tgt_means: str, output: str) -> None:
    """Pair two means of one model into a shift file (D(l) = mean_tgt(l) - mean_src(l)).

    \b
    Example:
      xlt shift-decode shift --src means.en.npz --tgt means.fr.npz -o shift.en-fr.npz
    """
    from xlt.model.interventions import LanguageShift

    LanguageShift.from_means(src_means, tgt_means).save(output)


@shift_decode.command()
@click.option("--model", "run_dir", required=True, metavar=MODEL, help=RUN_HELP)
@click.option("--shift", "shift_path", required=True, type=click.Path(), metavar="FILE",
              help="Shift file (xlt shift-decode shift).")
@click.option("--input", "input_path", required=True, type=click.Path(), metavar="FILE",
              help="Source-language text, one per line.")
@click.option("--reference", required=True, type=click.Path(), metavar="FILE",
              help="Reference translations, line-parallel.")
@click.option("--layers", default=None, help="Layers to shift after (0 = embeddings) [default: 1..n_layers].")
@click.option("--alphas", default="1,2,3", show_default=True, help="Comma-separated shift weights.")
@click.option("--n-sentences", type=click.IntRange(min=1), default=None, help="Use the first N sentences only.")
@click.option("--token-set", "token_sets", type=(str, click.Path()), multiple=True, metavar="LANG FILE",
              help="Token set of a language from its BPE'd text [default: the vocabulary's ownership].")
@click.option("--decode-lang", default=None, metavar="LANG",
              help="Language whose MLM head decodes [default: the source].")
@click.option("--samples", type=int, default=3, show_default=True, help="Decoded sentences kept in the output.")
@checkpoint_option
@click.option("--batch-size", type=int, default=32, show_default=True)
@device_option
@click.option("-o", "--output", required=True, type=OutputPath(), metavar="FILE",
              help="Result JSON (grid of layer x alpha, best, samples).")
def translate(run_dir, shift_path, input_path, reference, layers, alphas, n_sentences, token_sets, decode_lang,
              samples, checkpoint, batch_size, device, output) -> None:
    """Unsupervised token translation: shift after layer l by alpha * D(l), decode every position.

    \b
    Example:
      xlt shift-decode translate --model runs/en-fr --shift shift.en-fr.npz \\
          --input test.en --reference test.fr --layers 4,6,7,8 --alphas 1,2,3 -o en-fr.json
    """
    from xlt.analysis.extract import parse_layers
    from xlt.analysis.shift import TranslateSettings, translate as run_translate
    from xlt.analysis.shift_table import write_translate
    from xlt.utils.errors import XltError

    try:
        weights = tuple(float(a) for a in alphas.split(",") if a.strip())
    except ValueError:
        raise XltError(f"--alphas takes comma-separated numbers such as 1,2,3, got {alphas!r}") from None
    settings = TranslateSettings(parse_layers(layers), weights, n_sentences, decode_lang, checkpoint, batch_size,
                                 device, samples)
    write_translate(run_translate(run_dir, shift_path, input_path, reference, settings, dict(token_sets)), output)


@shift_decode.command("table")
@click.argument("results", nargs=-1, required=True, type=click.Path())
@click.option("--layer", type=int, required=True, help="Layer of the fixed-setting BLEU-1 row (Liu et al.: 11).")
@click.option("--alpha", type=float, default=3.0, show_default=True, help="Alpha of the fixed-setting BLEU-1 row.")
@click.option("--cr-layer", type=int, default=None, help="Layer of the convert-rate rows [default: --layer].")
@click.option("-o", "--output", required=True, type=OutputPath("prefix"), metavar="PREFIX",
              help="Output prefix: OUT.json, OUT.tsv.")
def shift_table(results, layer, alpha, cr_layer, output) -> None:
    """Lay `translate` results out as Liu et al.'s Table 2, one column per direction.

    \b
    Example:
      xlt shift-decode table en-fr.json fr-en.json --layer 7 --alpha 3 --cr-layer 6 -o table2
    """
    from xlt.analysis.shift_table import assemble_table2, write_table2

    prefix = _prefix(output, ".json", ".json", ".tsv")
    write_table2(assemble_table2(results, layer, alpha, cr_layer), prefix)
