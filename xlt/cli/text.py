"""``xlt tokenize``, ``xlt codeswitch``, ``xlt fake-english`` and ``xlt permute-words``: thin wrappers
over :mod:`xlt.text.tokenize`, :mod:`xlt.text.codeswitch`, :mod:`xlt.text.fake` and
:mod:`xlt.text.word_order`."""

from __future__ import annotations

from typing import Optional

import click

from xlt.cli.options import OutputPath
from xlt.utils import log


@click.command()
@click.option("--lang", "-l", required=True, metavar="LANG",
              help="Language code of the text (en, fr, ru, de, zh, ...).")
@click.argument("input_path", metavar="[INPUT]", default="-")
@click.option("--output", "-o", "output_path", type=OutputPath(), default="-", metavar="FILE",
              help="Output file (default: stdout).")
@click.option("--workers", type=click.IntRange(min=1), default=1, show_default=True,
              help="Tokenizer processes; the line order is kept.")
@click.option("--lowercase", is_flag=True, help="Lowercase the tokens.")
@click.option("--remove-accents", is_flag=True, help="Strip accents (NFD, drop combining marks), as XLM.")
def tokenize(lang: str, input_path: str, output_path: str, workers: int, lowercase: bool, remove_accents: bool) -> None:
    """Moses-normalize and tokenize text, one sentence per line (jieba segments Chinese).

    Reads INPUT (plain, .gz or .xz; stdin when absent or -) and writes exactly one
    tokenized line per input line. Steps as XLM's tools/tokenize.sh; see docs/tokenize.md.

    \b
    Example:
      xlt tokenize --lang fr fr.txt.xz -o fr.tok --workers 2
      zcat wiki.en.gz | xlt tokenize -l en --lowercase --remove-accents > en.tok
    """
    from xlt.text.tokenize import TokenizerConfig, tokenize_file

    config = TokenizerConfig(lang, lowercase=lowercase, remove_accents=remove_accents)
    lines = tokenize_file(input_path, output_path, config, workers=workers)
    log.info(f"tokenize: {lines:,} lines")


@click.command()
@click.option("--dict", "dictionary_path", required=True, type=click.Path(), metavar="FILE",
              help="MUSE dictionary: 'source translation [weight]' per line (space or tab separated).")
@click.argument("input_path", metavar="[INPUT]", default="-")
@click.option("--output", "-o", "output_path", type=OutputPath(), default="-", metavar="FILE",
              help="Output file (default: stdout).")
@click.option("--rate", type=click.FloatRange(0, 1), default=0.3, show_default=True,
              help="Probability of replacing each dictionary word by a translation.")
@click.option("--max-fraction", type=click.FloatRange(0, 1), default=0.15, show_default=True,
              help="At most this fraction of the words of a batch is replaced.")
@click.option("--batch-lines", type=click.IntRange(min=1), default=1000, show_default=True,
              help="Consecutive lines per batch for --max-fraction.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Random seed: the same input, dictionary and seed give the same output.")
@click.option("--ignore-case", is_flag=True, help="Look words up by their lowercase form.")
@click.option("--report", "report_path", type=OutputPath(), default=None, metavar="FILE",
              help="Write the counts and settings as JSON here.")
def codeswitch(dictionary_path: str, input_path: str, output_path: str, rate: float, max_fraction: float,
               batch_lines: int, seed: int, ignore_case: bool, report_path: Optional[str]) -> None:
    """Replace dictionary words by their translations (the paper's "Extra anchors").

    Reads tokenized text (plain, .gz or .xz; stdin when absent or -). Each word the
    dictionary translates is replaced with probability --rate, by a translation drawn
    by the weight column (uniformly without one), and at most --max-fraction of the words
    of each batch of --batch-lines lines are replaced. See docs/codeswitch.md.

    \b
    Example (Wu et al. 2020 settings, English side of an en-fr model):
      xlt codeswitch --dict en-fr.txt --rate 0.3 --max-fraction 0.15 --seed 1 \\
          en.tok -o en.cs.tok --report en.cs.json
    """
    from xlt.text.codeswitch import CodeSwitchConfig, codeswitch_file

    config = CodeSwitchConfig(rate=rate, max_fraction=max_fraction, seed=seed, batch_lines=batch_lines,
                              ignore_case=ignore_case)
    codeswitch_file(input_path, output_path, dictionary_path, config, report_path)


FAKE_FORMATS = ("text", "xnli", "wikiann", "conllu", "dictionary")


@click.command("fake-english")
@click.option("--format", "fmt", type=click.Choice(FAKE_FORMATS), default="text", show_default=True,
              help="text: every line (raw or tokenized); xnli: premise<TAB>hypothesis<TAB>label; wikiann: "
                   "[en:]word<TAB>tag lines (written without the language prefix); conllu: FORM, LEMMA and "
                   "'# text =' lines; dictionary: each line's first word -> 'word twin' (the identity "
                   "dictionary English -> Fake-English). Labels, tags, ids and heads are kept.")
@click.argument("input_path", metavar="[INPUT]", default="-")
@click.option("--output", "-o", "output_path", type=OutputPath(), default="-", metavar="FILE",
              help="Output file (default: stdout).")
def fake_english(fmt: str, input_path: str, output_path: str) -> None:
    """Fake-English: English text or task data with every character replaced by a twin of its own.

    Every non-whitespace character c becomes chr(0xF0000 + ord(c)) (Unicode's private plane
    15), so Fake-English shares no character, word or BPE token with English or any real
    text, and keeps English's structure (K et al. 2020). Its language code is `fake`: every
    stage takes it as it takes fr, tokenizing it by English's rules. Deterministic; the same
    mapping reverses it. See docs/fake_english.md.

    \b
    Example (pretraining text, then the English test sets as Fake-English ones):
      xlt fake-english raw/en.part2.txt -o raw/fake.train && xlt tokenize -l fake raw/fake.train -o fake.tok
      xlt fake-english --format xnli data/xnli/test-en.tsv -o test-fake.tsv
      xlt fake-english --format conllu en_ewt-ud-test.conllu -o fake-ud-test.conllu
      xlt fake-english --format dictionary en-fr.0-5000.txt -o en-fake.txt   # word -> its twin
    """
    from xlt.text.fake import fake_file

    lines = fake_file(input_path, output_path, fmt)
    log.info(f"fake-english: {lines:,} lines")


@click.command("permute-words")
@click.option("--format", "fmt", type=click.Choice(("text", "xnli", "wikiann", "conllu")), default="text",
              show_default=True,
              help="text: tokenized text, the tokens of each sentence; xnli: premise<TAB>hypothesis<TAB>label, raw "
                   "(tokenized as fine-tuning will, then permuted); wikiann: word<TAB>tag lines, an entity "
                   "moving whole; conllu: token lines renumbered, HEADs with them. Labels and arcs are kept.")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Each sentence's order is drawn from the seed and the sentence's own text.")
@click.argument("input_path", metavar="[INPUT]", default="-")
@click.option("--output", "-o", "output_path", type=OutputPath(), default="-", metavar="FILE",
              help="Output file (default: stdout).")
def permute_words(fmt: str, seed: int, input_path: str, output_path: str) -> None:
    """K et al.'s word-order control: permute the words of each sentence, keep labels and arcs.

    For English or Fake-English text and task files: a Fake-English file permuted is the
    language `fakeperm` (tokenized as `fake`), whose transfer from English cannot rest on
    word order. Deterministic. See docs/fake_english.md.

    \b
    Example (pretraining text, then a test set: map, then permute):
      xlt permute-words text/fake.train -o text/fakeperm.train
      xlt fake-english --format conllu en_ewt-ud-test.conllu | xlt permute-words --format conllu -o fakeperm-ud-test.conllu
    """
    from xlt.text.word_order import permute_file

    lines = permute_file(input_path, output_path, fmt, seed)
    log.info(f"permute-words: {lines:,} lines")
