"""``xlt report``: the papers' tables and figures from a pipeline's result files (thin commands)."""

from __future__ import annotations

from typing import Callable

import click

from xlt.cli.options import OutputPath, build_config, dataclass_options
from xlt.report.dynamics_records import EmergenceRule

LANGS_HELP = "Target languages, comma-separated, in column order."
PAPER_HELP = "Paper numbers file [default: the one shipped with xlt, xlt/report/paper_numbers.json]."


def _languages(text: str) -> list[str]:
    from xlt.text.tokenize import check_language
    from xlt.utils.errors import XltError

    languages = [lang.strip() for lang in text.split(",") if lang.strip()]
    if not languages:
        raise XltError("--langs needs at least one language code, e.g. fr,ru,zh")
    odd = [lang for lang in languages if not lang.replace("-", "").replace("_", "").isalnum()]
    if odd:
        raise XltError("--langs takes comma-separated language codes such as fr,ru,zh; "
                       f"got {', '.join(map(repr, odd))}")
    for lang in languages:   # a typo would be a column of empty cells, as if its results were missing
        check_language(lang)
    return languages


def _common(func: Callable) -> Callable:
    func = click.option("-o", "--output", "output_dir", required=True, type=OutputPath("directory"),
                        metavar="DIR",
                        help="Output directory: NAME.md, NAME.csv, NAME.tex, NAME.json (and NAME.png).")(func)
    func = click.option("--paper-numbers", type=click.Path(), default=None, metavar="FILE", help=PAPER_HELP)(func)
    return func


def _emit(table, output_dir: str, plot=None) -> None:
    from xlt.report.render import markdown, write_report

    write_report(table, output_dir, plot)
    click.echo(markdown(table), nl=False)   # after the files: `| head` still gets them written


@click.group()
def report() -> None:
    """Lay result files out as the papers' tables, with the papers' numbers and findings.

    Each command reads one stage's outputs, writes OUT/NAME.{md,csv,tex,json} (and a PNG for the
    per-layer figures) and prints the Markdown. A missing or unreadable result is a marked gap
    with its reason, never an error; see docs/reproduce.md.

    \b
    Example (what `make reproduce-table1` runs at the end):
      xlt report table1 --results-dir work/demo/table1 -o work/demo/report
    """


@report.command("table1", short_help="Wu et al. 2020 Table 1 (XNLI, NER, parsing; ten rows).")
@click.option("--results-dir", required=True, type=click.Path(exists=True, file_okay=False), metavar="DIR",
              help="RESULTS_DIR/<row>/en-<lang>/<task>/results.json (row control: No pretraining), and "
                   "RESULTS_DIR/baselines/en-<lang>/<task>.json (xlt baselines).")
@click.option("--langs", metavar="LANG,...", default="fr,ru,zh", show_default=True, help=LANGS_HELP)
@_common
def table1(results_dir: str, langs: str, paper_numbers, output_dir: str) -> None:
    """Wu et al. Table 1: ten rows x (XNLI, NER, parsing) x languages, with the Δ (average) column.

    Two reference rows follow Default: No pretraining (the control: an untrained encoder fine-tuned
    the same way) and the best trivial baseline (`xlt baselines`). A second table gives every row's
    English (source) test scores. The Fake-English pair (`fake` in --langs) gets a table of its own:
    zero-shot, English and relative transfer per task, and the paper's findings decided on it; with
    `fakeperm` too, K et al.'s word-order control follows it (docs/fake_english.md).

    \b
    Example:
      xlt report table1 --results-dir work/demo/table1 --langs fr,ru,zh -o work/demo/report
    """
    from xlt.report import paper, table1 as t1

    _emit(t1.build(results_dir, _languages(langs), paper.load(paper_numbers)), output_dir)


@report.command("steps", short_help="A Table 1 row's zero-shot and English scores against pretraining steps.")
@click.option("--results-dir", required=True, type=click.Path(exists=True, file_okay=False), metavar="DIR",
              help="RESULTS_DIR/step-<N>/en-<lang>/<task>/results.json: each snapshot fine-tuned "
                   "(`xlt finetune --checkpoint step-N`).")
@click.option("--table1-dir", required=True, type=click.Path(exists=True, file_okay=False), metavar="DIR",
              help="Table 1's results directory: its No pretraining control and trivial baselines.")
@click.option("-l", "--lang", metavar="LANG", default="fake", show_default=True, help="The pair's target language.")
@click.option("--row", metavar="ROW", default="default", show_default=True,
              help="The Table 1 row whose snapshots these are (default, sep-l1-3, ...): the title, and the "
                   "output's name for another row than Default.")
@click.option("-o", "--output", "output_dir", required=True, type=OutputPath("directory"), metavar="DIR",
              help="Output directory: steps-LANG.md, .csv, .tex, .json and .png (steps-LANG-ROW.* for another row).")
def steps(results_dir: str, table1_dir: str, lang: str, row: str, output_dir: str) -> None:
    """A Table 1 row's snapshots against pretraining steps: dev perplexity and, per task, the zero-shot and
    English scores and the relative transfer, with Table 1's control and baselines below; under the
    table, per task, the first snapshot that meets the targets (relative transfer 0.5, a margin over
    No pretraining), or how far the last one is. `make reproduce-steps` runs it (make/steps.mk).

    \b
    Example:
      xlt report steps --results-dir work/demo/steps --table1-dir work/demo/table1 --lang fake -o work/demo/report
      xlt report steps --results-dir work/demo/steps-sep-l1-3 --table1-dir work/demo/table1 --row sep-l1-3 -o work/demo/report
    """
    from xlt.report import paper
    from xlt.report import steps as steps_report
    from xlt.report.table1_fake import ONE_LAYER
    from xlt.utils.errors import XltError

    languages = _languages(lang)
    if len(languages) != 1:
        raise XltError(f"--lang takes one language code, got {lang!r}")
    labels = {key: paper_row["label"] for key, paper_row in paper.table1_rows(paper.load()).items()}
    labels[ONE_LAYER.key] = ONE_LAYER.label   # Fake-English's extra row (make's EXTRA_ROWS_fake)
    if row not in labels:
        raise XltError(f"--row {row!r} is not a Table 1 row (one of: {', '.join(labels)})")
    table, plot = steps_report.build(results_dir, table1_dir, languages[0], row, labels[row])
    _emit(table, output_dir, plot)


@report.command("figure7", short_help="Wu et al. 2020 Figure 7 (CKA per layer).")
@click.option("--results-dir", required=True, type=click.Path(exists=True, file_okay=False), metavar="DIR",
              help="Directory of `xlt cka compare` outputs (*.json).")
@click.option("--langs", metavar="LANG,...", default="fr,de,ru,zh", show_default=True, help=LANGS_HELP)
@_common
def figure7(results_dir: str, langs: str, paper_numbers, output_dir: str) -> None:
    """Wu et al. Figure 7: CKA per layer (Bilingual, Monolingual, Random) per language pair, plus a PNG.

    \b
    Example:
      xlt report figure7 --results-dir work/demo/figure7 -o work/demo/report
    """
    from xlt.report import figure7 as f7, paper

    table, plot = f7.build(results_dir, _languages(langs), paper.load(paper_numbers))
    _emit(table, output_dir, plot)


@report.command("alignment", short_help="Wu et al. 2020 §5.1 (Procrustes alignment per layer).")
@click.option("--results-dir", required=True, type=click.Path(exists=True, file_okay=False), metavar="DIR",
              help="Directory of `xlt align` outputs: en-<lang>.{word,contextual-word,sentence}.json.")
@click.option("--langs", metavar="LANG,...", default="fr,de,ru,zh", show_default=True, help=LANGS_HELP)
@_common
def alignment(results_dir: str, langs: str, paper_numbers, output_dir: str) -> None:
    """Wu et al. §5.1: word, contextual-word and sentence Procrustes alignment per layer, plus a PNG.

    \b
    Example:
      xlt report alignment --results-dir work/demo/alignment -o work/demo/report
    """
    from xlt.report import alignment as al, paper

    table, plot = al.build(results_dir, _languages(langs), paper.load(paper_numbers))
    _emit(table, output_dir, plot)


@report.command("kept-alignment", short_help="The alignment a joint model keeps after fine-tuning, per layer.")
@click.option("--results-dir", required=True, type=click.Path(exists=True, file_okay=False), metavar="DIR",
              help="RESULTS_DIR/<row>/en-<lang>/{pretrained,xnli,ner,parse}.json: `xlt align sentence --map none` "
                   "outputs, before fine-tuning and after each task's.")
@click.option("--langs", metavar="LANG,...", default="fake", show_default=True, help=LANGS_HELP)
@click.option("--rows", metavar="ROW,...", default=None,
              help="Table 1 rows to show, in order [default: every row in RESULTS_DIR].")
@click.option("-o", "--output", "output_dir", required=True, type=OutputPath("directory"), metavar="DIR",
              help="Output directory: kept-alignment.md, .csv, .tex, .json and .png.")
def kept_alignment(results_dir: str, langs: str, rows, output_dir: str) -> None:
    """Sentence retrieval across a joint model's two languages per layer (P@1), for Table 1's model
    before fine-tuning and after each task's fine-tuning on English: how much of the alignment
    pretraining built the fine-tuned encoder still has. `make reproduce-kept-alignment` runs it.

    \b
    Example:
      xlt report kept-alignment --results-dir work/demo/kept-alignment --langs fake -o work/demo/report
    """
    from xlt.report import kept_alignment as kept

    chosen = [row.strip() for row in rows.split(",") if row.strip()] if rows else None
    table, plot = kept.build(results_dir, _languages(langs), chosen)
    _emit(table, output_dir, plot)


@report.command("liu-table2", short_help="Liu et al. 2020 Table 2 (token translation by MDS).")
@click.option("--results-dir", required=True, type=click.Path(exists=True, file_okay=False), metavar="DIR",
              help="Directory searched for `xlt shift-decode translate` outputs (*.translate.json).")
@click.option("--bleu-layer", type=int, default=None,
              help="Layer of the fixed BLEU-1 row [default: one below the top, Liu et al.'s 11 of 12].")
@click.option("--cr-layer", type=int, default=None,
              help="Layer of the convert-rate rows [default: two below the top, Liu et al.'s 10 of 12].")
@click.option("--langs", metavar="LANG,...", default="fr,ru,zh", show_default=True,
              help="Languages: columns en->L, then L->en.")
@_common
def liu_table2(results_dir: str, bleu_layer, cr_layer, langs: str, paper_numbers, output_dir: str) -> None:
    """Liu et al. Table 2: unsupervised token translation (BLEU-1, convert rate) per direction.

    \b
    Example:
      xlt report liu-table2 --results-dir work/demo/liu --langs fr -o work/demo/report
    """
    from xlt.report import liu, paper

    _emit(liu.build_table2(results_dir, paper.load(paper_numbers), bleu_layer, cr_layer, _languages(langs)),
          output_dir)


@report.command("liu-table4", short_help="Liu et al. 2020 Table 4 (XNLI with MDS).")
@click.option("--results-dir", required=True, type=click.Path(exists=True, file_okay=False), metavar="DIR",
              help="RESULTS_DIR/en-<lang>/xnli-mds/results.json (bottom frozen, with --shift); or, one model "
                   "for every target (make ... MODEL=), RESULTS_DIR/xnli-mds/ and RESULTS_DIR/xnli-all/.")
@click.option("--table1-dir", default=None, type=click.Path(exists=True, file_okay=False), metavar="DIR",
              help="Table 1 results: its Default XNLI cells are the 'fine-tune all layers' row (one model per "
                   "pair; not read when RESULTS_DIR/xnli-mds/results.json is there).")
@click.option("--langs", metavar="LANG,...", default="fr,ru,zh", show_default=True, help=LANGS_HELP)
@_common
def liu_table4(results_dir: str, table1_dir: str, langs: str, paper_numbers, output_dir: str) -> None:
    """Liu et al. Table 4: XNLI fine-tuning all layers, the top layers, and the top layers + MDS.

    \b
    Example:
      xlt report liu-table4 --results-dir work/demo/liu --table1-dir work/demo/table1 --langs fr -o work/demo/report
      xlt report liu-table4 --results-dir work/demo/model/hf-bert-base-multilingual-cased/liu \\
          -o work/demo/model/hf-bert-base-multilingual-cased/report
    """
    from xlt.report import liu, paper

    _emit(liu.build_table4(results_dir, table1_dir, _languages(langs), paper.load(paper_numbers)), output_dir)


LAYER_HELP = ("BERT's layer: last, best (per file: an upper bound) or a number (0 = embeddings); the papers do not "
              "say which.")


def _layer(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if value in ("last", "best") or value.isdigit():
        return value
    raise click.BadParameter(f"{value!r} is none of last, best or a layer number (0 = embeddings)")


def _sizes(text: str) -> list[int]:
    from xlt.utils.errors import XltError

    try:
        sizes = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise XltError(f"--sizes takes comma-separated line counts such as 4000,20000; got {text!r}") from None
    if not sizes or any(s < 1 for s in sizes):
        raise XltError(f"--sizes takes positive line counts, got {text!r}")
    return sizes


@report.command("liu-figures", short_help="Liu et al. 2020 Figures 1-4 (BERT vs Word2Vec/GloVe).")
@click.option("--results-dir", required=True, type=click.Path(exists=True, file_okay=False), metavar="DIR",
              help="RESULTS_DIR/n<N>/mrr/<model>/en-<lang>.json and RESULTS_DIR/n<N>/xnli/<model>/results.json "
                   "(make reproduce-liu-figures).")
@click.option("--sizes", metavar="N,N", required=True, help="Data sizes (lines per language): the small, the big.")
@click.option("--langs", metavar="LANG,...", default="fr,de,ru,zh", show_default=True, help=LANGS_HELP)
@click.option("--layer", default="last", show_default=True, callback=_layer, help=LAYER_HELP)
@_common
def liu_figures(results_dir: str, sizes: str, langs: str, layer: str, paper_numbers, output_dir: str) -> None:
    """Liu et al. Figures 1-4: word retrieval MRR and XNLI zero-shot of BERT, BERT on 20-token windows,
    Word2Vec (windows 5, 128, 256) and GloVe at two data sizes, bar charts (PNG) and the findings.

    \b
    Example:
      xlt report liu-figures --results-dir work/demo/liu-fig --sizes 4000,20000 --langs fr -o work/demo/report
    """
    from xlt.report import liu_figures as lf, paper

    table, plot = lf.figures(results_dir, _languages(langs), _sizes(sizes), paper.load(paper_numbers), layer)
    _emit(table, output_dir, plot)


@report.command("liu-pos", short_help="Liu et al. 2020 Table 1 of the short paper (MRR by part of speech).")
@click.option("--results-dir", required=True, type=click.Path(exists=True, file_okay=False), metavar="DIR",
              help="RESULTS_DIR/en-<lang>.json: `xlt align ... --pos-from` outputs (BERT at the big size).")
@click.option("--langs", metavar="LANG,...", default="fr,de,ru,zh", show_default=True, help=LANGS_HELP)
@click.option("--layer", default="last", show_default=True, callback=_layer, help=LAYER_HELP)
@_common
def liu_pos(results_dir: str, langs: str, layer: str, paper_numbers, output_dir: str) -> None:
    """Liu et al. Table 1: MRR by part of speech (closed, open, noun, verb, adverb, adjective) of the English
    word, tagged by UD English EWT (OntoNotes is not freely available), plus a PNG.

    \b
    Example:
      xlt report liu-pos --results-dir work/demo/liu-fig/n20000/mrr/bert --langs fr -o work/demo/report
    """
    from xlt.report import liu_figures as lf, paper

    table, plot = lf.pos_table(results_dir, _languages(langs), paper.load(paper_numbers), layer)
    _emit(table, output_dir, plot)


@report.command("dynamics", short_help="Tracked measures against pretraining step, and when each emerges.")
@click.option("--records", "records", required=True, multiple=True, type=click.Path(), metavar="FILE",
              help="A records.jsonl of `xlt track`, or - for stdin (repeatable: every run in the files is overlaid).")
@click.option("-o", "--output", "output_dir", required=True, type=OutputPath("directory"), metavar="DIR",
              help="Output directory: dynamics.md, dynamics.csv, dynamics-emergence.csv, dynamics.json and "
                   "dynamics-MEASURE[-LANG].png.")
@dataclass_options(EmergenceRule)
def dynamics(records: tuple[str, ...], output_dir: str, **rule) -> None:
    """Each tracked measure against pretraining step (log-scaled steps; runs overlaid, each with its
    random-encoder bound dashed) and, per run, measure, language and layer, the step where it first
    stays clearly beyond that bound ("emerges at"), with the order in which they emerge: perplexity,
    alignment or transfer first, and which layer. Prints the "emerges at" tables; see docs/dynamics.md.

    \b
    Example (what make reproduce-dynamics tracked; then runs tracked into two directories, overlaid):
      xlt report dynamics --records work/demo/dynamics/track/records.jsonl -o work/demo/dynamics/report
      xlt report dynamics --records track/default/records.jsonl \\
          --records track/sep-emb+l1-6/records.jsonl -o report
    """
    from xlt.report.dynamics import report as dynamics_report

    click.echo(dynamics_report(records, output_dir, build_config(EmergenceRule, rule)), nl=False)
