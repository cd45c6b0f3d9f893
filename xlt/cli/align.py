"""``xlt align word|contextual-word|sentence|dictionary``: thin wrappers over :mod:`xlt.analysis.align`."""

from __future__ import annotations

import io
from typing import Optional

import click

from xlt.analysis.align_settings import AlignSettings, WordSettings
from xlt.cli.options import (OutputPath, build_config, checkpoint_option, dataclass_options, given_on_command_line,
                             unused_setting)

RUN_HELP = "Model of the source side: an xlt run directory (xlt pretrain), a transformers model directory, or hf:NAME."
TARGET_HELP = ("Model of the target side, for two monolingual models [default: --model, one multilingual model]; "
               "the same kinds as --model.")
# Not click.Path: hf:NAME is a model name, not a file.
MODEL = "MODEL"


def _settings(values: dict) -> AlignSettings:
    return build_config(AlignSettings, values)


def _word_settings(values: dict) -> WordSettings:
    settings = build_config(WordSettings, values)
    if not settings.csls and given_on_command_line("csls_k"):
        raise unused_setting("csls_k", "is CSLS's neighbourhood and --no-csls leaves it out")
    return settings


def _layers(text: Optional[str]):
    from xlt.analysis.extract import parse_layers

    return parse_layers(text)


def _percent(x: float) -> str:
    return f"{100 * x:.1f}"


def _show(result: dict) -> None:
    """One table row per layer on stderr (silenced by --quiet); word retrieval adds a table per UPOS."""
    from rich.console import Console
    from rich.table import Table

    from xlt.utils import log

    rows = result["results"]
    # Results name each side {"run", "lang", "step"}; a map header names the languages only.
    source, target = (side["lang"] if isinstance(side, dict) else side for side in (result["source"], result["target"]))
    title = f"{result['command']}: {source} -> {target}" + (f" (map: {result['map']})" if "map" in result else "")
    table = Table(title=title)
    table.add_column("layer", justify="right")
    tables = [table]
    if "nn" in rows[0]:
        methods = [m for m in ("nn", "csls") if m in rows[0]]
        for m in methods:
            for k in (1, 5, 10):
                table.add_column(f"{m.upper()} P@{k}", justify="right")
        table.add_column("MRR", justify="right")
        table.add_column("ranked P@1", justify="right")
        for r in rows:
            table.add_row(str(r["layer"]), *[_percent(r[m][f"p@{k}"]) for m in methods for k in (1, 5, 10)],
                          f"{r['mrr']:.3f}", _percent(r["ranked"]["p@1"]))
        breakdowns = (("by_pos", "UPOS", f"MRR by UPOS of the {source} word"),
                      ("by_spelling", "gold", "MRR by the gold translation's spelling (identical: the query's own string)"))
        for key, column, title in breakdowns:
            if key not in rows[0]:
                continue
            groups = Table(title=title)
            groups.add_column(column)
            for r in rows:
                groups.add_column(f"layer {r['layer']}", justify="right")
            groups.add_column("queries", justify="right")
            for group, first in rows[0][key].items():
                groups.add_row(group, *[f"{r[key][group]['mrr']:.3f}" for r in rows], str(first["queries"]))
            tables.append(groups)
    elif "p_at_1" in rows[0]:
        table.add_column("P@1 tgt->src", justify="right")
        table.add_column("P@1 src->tgt", justify="right")
        for r in rows:
            table.add_row(str(r["layer"]), _percent(r["p_at_1"]), _percent(r["p_at_1_source_to_target"]))
    else:
        table.add_column("mean cos before", justify="right")
        table.add_column("after", justify="right")
        for r in rows:
            table.add_row(str(r["layer"]), f"{r['cosine_before']:.3f}", f"{r['cosine_after']:.3f}")
    console = Console(file=io.StringIO(), width=140)
    for t in tables:
        console.print(t)
    log.info(console.file.getvalue().rstrip())


def _write(result: dict, output: str) -> None:
    import json

    from xlt.utils.outputs import atomic_output

    with atomic_output(output) as f:
        json.dump(result, f, indent=2, ensure_ascii=False)
        f.write("\n")
    _show(result)


def _common(fn, model_required: bool = True):
    """Options every subcommand shares: the two sides and the settings."""
    for decorator in reversed([
        click.option("--model", "model", required=model_required, metavar=MODEL,
                     help=RUN_HELP if model_required else RUN_HELP + " Or --emb-a/--emb-b."),
        click.option("--source-lang", required=True, metavar="LANG", help="Source language (one of --model's)."),
        click.option("--target-lang", required=True, metavar="LANG", help="Target language (one of --target-model's)."),
        click.option("--target-model", default=None, metavar=MODEL, help=TARGET_HELP),
        dataclass_options(AlignSettings, skip=("checkpoint",)),
        checkpoint_option,
    ]):
        fn = decorator(fn)
    return fn


@click.group()
def align() -> None:
    """Procrustes alignment of two models' representations (Wu et al., 2020, §5.1).

    Each procedure normalizes both spaces (iterative normalization), learns an orthogonal map
    W = UVᵀ from paired vectors and evaluates it (word translation: NN and CSLS P@1/5/10, MRR;
    sentences: Tatoeba P@1) or, for `dictionary`, saves one map per layer for `xlt finetune`.
    `word`, `contextual-word` and `sentence` also measure one joint model with no learned map
    (--map none; Liu et al. 2020), and `word` reads embedding files in the word2vec text format
    (--emb-a/--emb-b). A model is an xlt run, a transformers model directory or hf:NAME (e.g.
    mBERT); --finetuned reads the encoder of an xlt finetune run started from --model.

    \b
    Example (two monolingual runs, word level):
      xlt align word --model runs/en --target-model runs/fr --source-lang en --target-lang fr \\
        --train-dict data/muse/splits_reconstructed/en-fr.0-5000.txt \\
        --test-dict data/muse/splits_reconstructed/en-fr.5000-6500.txt -o word.json
    """


WORD_DICT_HELP = "MUSE training dictionary (src tgt per line); needed by --map procrustes only."


@align.command("word")
@lambda fn: _common(fn, model_required=False)
@click.option("--emb-a", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Source-side embeddings in the word2vec text format (xlt embed train), instead of --model.")
@click.option("--emb-b", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Target-side embeddings [default: --emb-a: one jointly trained space].")
@click.option("--codes", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="With --emb-a: the BPE codes of the training text, so that --subwords mean can represent "
                   "a dictionary word by its pieces.")
@click.option("--max-words", type=click.IntRange(min=10), default=None,
              help="With --emb-a: read only the first N (most frequent) rows of each file [default: all].")
@dataclass_options(WordSettings)
@click.option("--train-dict", type=click.Path(dir_okay=False), default=None, metavar="FILE", help=WORD_DICT_HELP)
@click.option("--test-dict", required=True, type=click.Path(dir_okay=False), metavar="FILE", help="MUSE test dictionary.")
@click.option("--subwords", type=click.Choice(["single", "mean"]), default="single", show_default=True,
              help="single: only words that are one vocabulary token (the XLM authors' practice); "
                   "mean: also words of several subwords, as the mean of their vectors (Liu et al.).")
@click.option("-o", "--output", default="-", show_default=True, type=OutputPath(), metavar="FILE",
              help="Result JSON (- = stdout).")
def word(model, source_lang, target_lang, target_model, emb_a, emb_b, codes, max_words, train_dict, test_dict,
         subwords, output, **settings):
    """Word translation with the token embedding tables (Figure 4a) or embedding files.

    Words are the whole-word vocabulary entries (file rows) of each side; for a transformers model,
    the tokens of its input embedding table that its own tokenizer reads as a whole word (every
    language's). Dictionary pairs with a word outside them are not usable (the result says how
    many were). --map procrustes learns an
    orthogonal map on --train-dict (Wu et al.); --map none measures the joint space as it is
    (Liu et al.). Scores: NN and CSLS P@1/5/10 over the target space, MRR (cosine) and P@k among
    --candidates, and with --pos-from the MRR per part of speech of the source word.

    \b
    Example (one bilingual run's two languages, mapped):
      xlt align word --model runs/en-fr --source-lang en --target-lang fr \\
        --train-dict data/muse/splits_reconstructed/en-fr.0-5000.txt \\
        --test-dict data/muse/splits_reconstructed/en-fr.5000-6500.txt -o word.json
    Example (jointly trained static embeddings, Liu et al.'s MRR by part of speech):
      xlt align word --emb-a w2v.txt --source-lang en --target-lang fr --map none --no-csls \\
        --codes data/codes --subwords mean --pos-from data/ud/en_ewt/en_ewt-ud-train.conllu \\
        --test-dict data/muse/splits_reconstructed/en-fr.5000-6500.txt -o mrr.json
    """
    from xlt.utils.errors import XltError

    align_settings, word_settings = _settings(settings), _word_settings(settings)
    if (model is None) == (emb_a is None):
        raise XltError("give either --model (a run) or --emb-a (an embedding file)")
    if emb_a is None and (emb_b or codes or max_words):
        raise XltError("--emb-b, --codes and --max-words go with --emb-a")
    if emb_a is not None and target_model is not None:
        raise XltError("--target-model goes with --model; the target embeddings are --emb-b")
    if emb_a is not None and align_settings.finetuned is not None:
        raise XltError("--finetuned goes with --model (an embedding file has no fine-tuned encoder)")
    if emb_a is not None and (unused := given_on_command_line("checkpoint", "batch_size")):
        raise unused_setting(unused[0], "is for --model (an embedding file has no checkpoints and no forward pass)")
    if emb_a is not None:
        from xlt.analysis.static_words import align_static_word

        result = align_static_word(emb_a, emb_b or emb_a, source_lang, target_lang, train_dict, test_dict, subwords,
                                   codes, max_words, align_settings, word_settings)
    else:
        from xlt.analysis.align import align_word

        result = align_word(model, source_lang, target_lang, train_dict, test_dict, target_model, subwords,
                            align_settings, word_settings)
    _write(result, output)


@align.command("contextual-word")
@_common
@click.option("--source-corpus", required=True, type=click.Path(), metavar="FILE",
              help="Monolingual source text, one sentence a line.")
@click.option("--target-corpus", required=True, type=click.Path(), metavar="FILE", help="Monolingual target text.")
@click.option("--n-sentences", type=click.IntRange(min=1), default=10000, show_default=True,
              help="Sentences read from each corpus (the paper: 500k).")
@click.option("--max-words", type=click.IntRange(min=1), default=50000, show_default=True,
              help="The most frequent words of each corpus that get a vector (memory: layers x words x d_model x 8 B).")
@click.option("--pooling", type=click.Choice(["first", "mean"]), default="mean", show_default=True,
              help="A word occurrence is its first subword or the mean of its subwords (the paper: mean).")
@click.option("--layers", default=None, help="Comma-separated layers, 0 = embeddings [default: all].")
@click.option("--space-cache", type=OutputPath("directory"), default=None, metavar="DIR",
              help="Keep each language's word space here and reuse it when the model's weights, the corpus and "
                   "these settings are the same (English serves every target; layers x words x d_model x 4 B each).")
@dataclass_options(WordSettings)
@click.option("--train-dict", type=click.Path(dir_okay=False), default=None, metavar="FILE", help=WORD_DICT_HELP)
@click.option("--test-dict", required=True, type=click.Path(dir_okay=False), metavar="FILE", help="MUSE test dictionary.")
@click.option("-o", "--output", default="-", show_default=True, type=OutputPath(), metavar="FILE",
              help="Result JSON (- = stdout).")
def contextual_word(model, source_lang, target_lang, target_model, source_corpus, target_corpus, n_sentences,
                    max_words, pooling, layers, space_cache, train_dict, test_dict, output, **settings):
    """Align mean contextual word vectors per layer (Figure 4b) and evaluate word translation.

    A word's vector is the mean over its occurrences of the mean of its subwords' states
    (--pooling mean): with --map none and one bilingual run, Liu et al.'s BERT word retrieval.

    \b
    Example:
      xlt align contextual-word --model runs/en --target-model runs/fr --source-lang en --target-lang fr \\
        --source-corpus data/mono/en.txt --target-corpus data/mono/fr.txt --n-sentences 100000 \\
        --train-dict data/muse/splits_reconstructed/en-fr.0-5000.txt \\
        --test-dict data/muse/splits_reconstructed/en-fr.5000-6500.txt -o cword.json
    Example (Liu et al.: one joint model, no map; the English space computed once for both targets):
      for l in fr de; do xlt align contextual-word --model runs/joint --source-lang en --target-lang $l \\
        --source-corpus text/en.raw --target-corpus text/$l.raw --map none --no-csls --space-cache spaces \\
        --test-dict data/muse/splits_reconstructed/en-$l.5000-6500.txt -o mrr-$l.json; done
    """
    from xlt.analysis.align import align_contextual_word

    align_settings, word_settings = _settings(settings), _word_settings(settings)
    _write(align_contextual_word(model, source_lang, target_lang, source_corpus, target_corpus, train_dict, test_dict,
                                 target_model, n_sentences, max_words, _layers(layers), pooling,
                                 align_settings, word_settings, space_cache), output)


@align.command("sentence")
@_common
@click.option("--train", "train", type=(click.Path(), click.Path()), multiple=True,
              metavar="SRC_FILE TGT_FILE", help="Line-parallel training files of the map (repeatable; .tsv: --columns "
                                                "of each line); needed by --map procrustes only.")
@click.option("--map", "map_kind", type=click.Choice(["procrustes", "none"]), default="procrustes", show_default=True,
              help="procrustes: an orthogonal map learned on --train (Wu et al.); none: no learned map, one joint "
                   "model's languages each normalized on their own (does the model already pair their sentences?).")
@click.option("--columns", default="1,2", show_default=True,
              help="Tab-separated columns of .tsv training files (XNLI: 1 = premise, 2 = hypothesis).")
@click.option("--test", "test", type=(click.Path(), click.Path()), required=True, metavar="SRC_FILE TGT_FILE",
              help="Line-parallel test files (Tatoeba; or .tsv files, read at --test-columns).")
@click.option("--test-columns", default="1", show_default=True,
              help="Tab-separated columns of .tsv test files (XNLI's hypotheses: 2).")
@click.option("--layers", default=None, help="Comma-separated layers, 0 = embeddings [default: all].")
@click.option("-o", "--output", default="-", show_default=True, type=OutputPath(), metavar="FILE",
              help='Result JSON (- = stdout); its "layers" and "p_at_1" are what xlt cka --retrieval reads.')
def sentence(model, source_lang, target_lang, target_model, train, map_kind, columns, test, test_columns, layers,
             output, **settings):
    """Align mean-pooled sentence vectors per layer (Figure 6) and evaluate Tatoeba retrieval (P@1).

    \b
    Example (XNLI dev + test pairs to learn, Tatoeba to evaluate):
      xlt align sentence --model runs/en --target-model runs/fr --source-lang en --target-lang fr \\
        --train data/xnli/dev-en.tsv data/xnli/dev-fr.tsv --train data/xnli/test-en.tsv data/xnli/test-fr.tsv \\
        --test data/tatoeba/v1/tatoeba.fra-eng.eng data/tatoeba/v1/tatoeba.fra-eng.fra -o sentence.json
      xlt cka compare ... --retrieval sentence.json
    Example (one joint model, no map: XNLI hypotheses and their twins, before and after fine-tuning):
      xlt align sentence --model runs/en-fake --source-lang en --target-lang fake --map none --test-columns 2 \\
        --test xnli/test-en.tsv xnli/test-fake.tsv -o pretrained.json
      xlt align sentence ... --finetuned table1/default/en-fake/xnli/runs/NAME -o finetuned.json
    """
    from xlt.analysis.align_parallel import align_sentence
    from xlt.utils.errors import XltError

    def numbers(option: str, text: str) -> list[int]:
        try:
            cols = [int(c) for c in text.split(",") if c.strip()]
        except ValueError:
            cols = []
        if not cols or min(cols) < 1:
            raise XltError(f"{option} takes 1-based column numbers such as 1,2, got {text!r}")
        return cols

    _write(align_sentence(model, source_lang, target_lang, list(train), test[0], test[1], target_model,
                          numbers("--columns", columns), _layers(layers), _settings(settings), map_kind,
                          numbers("--test-columns", test_columns)), output)


@align.command("dictionary")
@_common
@click.option("--parallel", type=(click.Path(), click.Path()), required=True, metavar="SRC_FILE TGT_FILE",
              help="Line-parallel raw text to word-align with fast_align.")
@click.option("--max-sentences", type=int, default=None, help="Use the first N lines only [default: all].")
@click.option("--layers", default=None, help="Comma-separated layers, 0 = embeddings [default: all].")
@click.option("--pooling", type=click.Choice(["first", "mean"]), default="mean", show_default=True,
              help="A word's vector: its first subword or the mean of its subwords.")
@click.option("--drop-identical", is_flag=True, help="Drop links between identical strings (names, numbers, anchors).")
@click.option("-o", "--output", "output_dir", required=True, type=OutputPath("directory"), metavar="DIR",
              help="Map directory: map.json + W_layer{l}.npy (what xlt finetune --map-dir reads).")
def dictionary(model, source_lang, target_lang, target_model, parallel, max_sentences, layers, pooling,
               drop_identical, output_dir, **settings):
    """Contextual-word dictionary from fast_align, one target -> source map per layer (Figure 5).

    fast_align runs forward and reverse (-d -o -v), the links are symmetrised with
    grow-diag-final-and and only one-to-one links are kept. OUTPUT/W_layer{l}.npy is float32
    [d_model, d_model] with x_tgt @ W in the source space; OUTPUT/map.json describes them
    (the format xlt finetune --map-dir reads).

    \b
    Example:
      xlt align dictionary --model runs/en --target-model runs/fr --source-lang en --target-lang fr \\
        --parallel data/parallel/wmt/en-fr/newstest2013.en data/parallel/wmt/en-fr/newstest2013.fr \\
        --layers 0,4,8 -o maps/en-fr
    """
    from xlt.analysis.align_parallel import align_dictionary

    result = align_dictionary(model, source_lang, target_lang, parallel[0], parallel[1], output_dir, target_model,
                              _layers(layers), pooling, drop_identical, max_sentences,
                              settings=_settings(settings))  # OUTPUT_DIR is checked by align_dictionary
    _show(result)
