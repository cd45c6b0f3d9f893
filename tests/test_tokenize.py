"""xlt tokenize: Moses pipeline parity, jieba for Chinese, line integrity, workers, errors."""

from __future__ import annotations

import contextlib
import gzip
import itertools
import lzma
import os
import subprocess
import sys
import threading
import unicodedata

import pytest
from conftest import assert_one_line_error, run_xlt
from sacremoses import MosesPunctNormalizer, MosesTokenizer

from xlt.text.fake import to_fake
from xlt.text.tokenize import Tokenizer, TokenizerConfig, chunked, tokenize_chunks, tokenize_lines
from xlt.utils.errors import XltError

# Every character Python's str.splitlines() breaks on, plus controls and formats that must vanish.
LINE_BREAKERS = ["\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
TRICKY_LINES = ["", "   ", "\t", "a\u2028b", "x\ry", "\x0b", "\x85", "p\x0cq", "\x1c\x1d\x1e",
                "\u2029", "\ufeffStart", "tab\tseparated", "fin。\u2028suite", "zero\u200bwidth", "", "end"]

SENTENCES = {
    "en": ["Hello, world! It's a “test” — isn't it?", "The U.S. economy grew 3.5% in 2019... (or so).",
           "Mr. Smith paid $5,300 for 2 items: a\u00a0book & a pen."],
    "fr": ["L'été, c'est « magnifique » !", "Il a payé 5\u00a0300 euros… N'est-ce pas ?",
           "M. Dupont habite au 3, rue de l'Église."],
    "ru": ["Привет, мир! Это «тест» — не так ли?", "В 2019 г. рост составил 3,5%.", "Т. е. всё хорошо…"],
    "de": ["Das ist „gut“, oder? Ja – sehr gut!", "Er wohnt in der Str. 5 seit dem 3. Mai.",
           "Die Preise stiegen um 1.000 Euro (ca. 5 %)."],
}


def sacremoses_pipeline(lang: str, line: str) -> str:
    """The reference: sacremoses' ports of the Perl scripts, called directly."""
    normalizer = MosesPunctNormalizer(lang, pre_replace_unicode_punct=True, perl_parity=True)
    return MosesTokenizer(lang).tokenize(normalizer.normalize(line), escape=False, return_str=True)


@pytest.mark.parametrize("lang", sorted(SENTENCES))
def test_same_output_as_sacremoses_pipeline(lang):
    tokenizer = Tokenizer(lang)
    for sentence in SENTENCES[lang]:
        assert tokenizer.tokenize(sentence) == sacremoses_pipeline(lang, sentence)


def test_known_moses_outputs_without_escaping():
    assert Tokenizer("en").tokenize("Hello, world! It's <b>&amp;</b>") == "Hello , world ! It 's < b > & amp ; < / b >"
    assert Tokenizer("fr").tokenize("L'été, c'est « magnifique » !") == "L' été , c' est \" magnifique \" !"
    # For English, normalize-punctuation.perl moves "..." inside the closing quote.
    assert Tokenizer("en").tokenize("“Quoted”… and — dashed") == '" Quoted ... " and - dashed'


def test_non_printing_characters_become_spaces_as_in_perl():
    # sacremoses' post_remove_control_chars would delete them and glue "tab" and "separated".
    assert Tokenizer("en").tokenize("tab\tseparated\u200bword") == "tab separated word"
    assert Tokenizer("zh").tokenize("你好\t世界") == "你好 世界"


def test_chinese_is_segmented_by_jieba():
    tokenizer = Tokenizer("zh")
    assert tokenizer.tokenize("我喜欢Python编程。") == "我 喜欢 Python 编程 。"
    line = "今天天气很好，我们去公园玩吧！"
    out = tokenizer.tokenize(line)
    assert out.replace(" ", "") == line and len(out.split()) >= 6
    # Full-width punctuation is kept, as XLM's Stanford segmenter on raw text kept it.
    assert "，" in out.split() and "！" in out.split()


def test_jieba_logs_stay_off_stderr():
    res = run_xlt("--quiet", "tokenize", "--lang", "zh", input="我喜欢编程。\n")
    assert res.returncode == 0 and res.stdout == "我 喜欢 编程 。\n"
    assert res.stderr == ""
    res = run_xlt("tokenize", "--lang", "zh", input="我喜欢编程。\n")
    assert "prefix dict" not in res.stderr and "Loading model" not in res.stderr


@pytest.mark.parametrize("lang", ["en", "fr", "zh"])
def test_a_line_is_never_split(lang):
    for options in ({}, {"lowercase": True, "remove_accents": True}):
        tokenizer = Tokenizer(lang, **options)
        for breaker in LINE_BREAKERS + ["\n"]:
            out = tokenizer.tokenize(f"Avant{breaker}apres {breaker}")
            assert out.splitlines() == [out], (breaker, out)
            # normalize-punctuation.perl deletes \r (gluing the words); the other breakers separate words.
            glued = breaker == "\r" and lang != "zh"
            expected = ["Avantapres"] if glued else ["Avant", "apres"]
            assert out.split() == [w.lower() if options else w for w in expected], (breaker, out)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_cli_keeps_the_line_count_on_tricky_input(tmp_path, lang):
    path = tmp_path / "tricky.txt"
    path.write_bytes(("\n".join(TRICKY_LINES) + "\r\n").encode("utf-8"))  # CRLF on the last line
    out = tmp_path / "out.txt"
    run_xlt("tokenize", "--lang", lang, path, "-o", out, check=True)
    lines = out.read_bytes().decode("utf-8").split("\n")
    assert lines[-1] == "" and len(lines) - 1 == len(TRICKY_LINES)
    produced = lines[:-1]
    assert all(len(line.splitlines()) <= 1 for line in produced)
    for source, line in zip(TRICKY_LINES, produced):
        if not source.strip():
            assert line == "", (source, line)
    assert produced[TRICKY_LINES.index("a\u2028b")] == "a b"


def test_progress_bar_with_lines_per_second_only_on_a_terminal():
    master, terminal = os.openpty()
    received: list[bytes] = []

    def drain():
        with contextlib.suppress(OSError):  # EIO once the child has exited and closed the terminal
            while chunk := os.read(master, 65536):
                received.append(chunk)

    reader = threading.Thread(target=drain)
    reader.start()
    lines = "".join(f"Line {i}, here.\n" for i in range(2000)).encode()
    proc = subprocess.run([sys.executable, "-m", "xlt", "tokenize", "--lang", "en"], input=lines,
                          stdout=subprocess.PIPE, stderr=terminal)
    os.close(terminal)
    reader.join()
    os.close(master)
    assert proc.returncode == 0 and proc.stdout.count(b"\n") == 2000
    assert b"lines/s" in b"".join(received)
    assert "lines/s" not in run_xlt("tokenize", "--lang", "en", input=lines.decode()).stderr


def test_stdin_to_stdout_and_empty_input():
    res = run_xlt("tokenize", "--lang", "en", input="One, two.\n\nThree!\n", check=True)
    assert res.stdout == "One , two .\n\nThree !\n"
    # an empty corpus is refused where it is named, not at bpe learn's "no words" one stage later
    res = run_xlt("tokenize", "--lang", "en", input="")
    assert_one_line_error(res, "<stdin>: empty input: no lines")
    assert res.stdout == ""


def test_lowercase_and_accent_removal():
    line = "Ça Été ÉCOLE naïve"
    assert Tokenizer("fr").tokenize(line) == "Ça Été ÉCOLE naïve"
    assert Tokenizer("fr", lowercase=True).tokenize(line) == "ça été école naïve"
    assert Tokenizer("fr", remove_accents=True).tokenize(line) == "Ca Ete ECOLE naive"
    assert Tokenizer("fr", lowercase=True, remove_accents=True).tokenize(line) == "ca ete ecole naive"
    # XLM's accent removal drops every combining mark, so Russian й/ё lose theirs too.
    assert Tokenizer("ru", lowercase=True, remove_accents=True).tokenize("Ёлка, йод.") == "елка , иод ."
    res = run_xlt("tokenize", "--lang", "de", "--lowercase", "--remove-accents", input="Über Straße\n", check=True)
    assert res.stdout == "uber straße\n"


def xlm_lowercase_and_remove_accent(line: str) -> str:
    """XLM's tools/lowercase_and_remove_accent.py, step by step (lower, NFD, drop Mn, lower)."""
    text = unicodedata.normalize("NFD", line.rstrip().lower())
    return "".join(ch for ch in text if unicodedata.category(ch) != "Mn").lower()


def test_accent_removal_matches_xlm_on_many_scripts():
    words = "İstanbul Ελληνικά Tiếng_Việt Ñandú Øre Ångström Łódź Ёжик Ǆemal ﬁne 한국어"
    tokenized = Tokenizer("en").tokenize(words)
    assert Tokenizer("en", lowercase=True, remove_accents=True).tokenize(words) == xlm_lowercase_and_remove_accent(tokenized)


def test_two_workers_give_the_same_output_as_one():
    lines = [s for group in SENTENCES.values() for s in group] + TRICKY_LINES
    lines = [f"{i}: {line}" if i % 5 else line for i, line in enumerate(lines * 40)]
    config = TokenizerConfig("fr", lowercase=True)
    serial = list(tokenize_lines(lines, config, workers=1))
    parallel = list(tokenize_lines(lines, config, workers=2, chunk_lines=7))
    assert parallel == serial and len(serial) == len(lines)


def test_workers_read_the_input_lazily():
    pulled = itertools.count()

    def endless_input():
        for _ in range(1_000_000):
            next(pulled)
            yield "a b c"

    chunks = tokenize_chunks(chunked(endless_input(), 10), TokenizerConfig("en"), workers=2)
    first_three = list(itertools.islice(chunks, 3))
    chunks.close()
    assert first_three == [["a b c"] * 10] * 3
    assert next(pulled) <= 10 * (4 * 2 + 3)


def test_cli_workers_on_wikipedia_sample(tmp_path, mirror):
    sample = mirror / "mono" / "en" / "enwiki_wikiextractor_sample_30MB.txt.xz"
    with lzma.open(sample, "rt", encoding="utf-8") as f:
        head = list(itertools.islice(f, 1500))
    source = tmp_path / "head.txt"
    source.write_text("".join(head), encoding="utf-8")
    one, two = tmp_path / "one.tok", tmp_path / "two.tok"
    run_xlt("tokenize", "--lang", "en", source, "-o", one, check=True)
    run_xlt("tokenize", "--lang", "en", source, "-o", two, "--workers", "2", check=True)
    assert one.read_bytes() == two.read_bytes()
    assert one.read_text(encoding="utf-8").count("\n") == len(head)


@pytest.mark.parametrize("suffix,opener", [(".gz", gzip.open), (".xz", lzma.open)])
def test_compressed_input(tmp_path, suffix, opener):
    text = "Hello, world!\n\nÇa va?\n"
    path = tmp_path / f"in.txt{suffix}"
    with opener(path, "wt", encoding="utf-8") as f:
        f.write(text)
    res = run_xlt("tokenize", "--lang", "fr", path, check=True)
    assert res.stdout == "Hello , world !\n\nÇa va ?\n"


def test_unknown_language_is_one_line_error(tmp_path):
    source = tmp_path / "in.txt"
    source.write_text("hello\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    res = run_xlt("tokenize", "--lang", "xx", source, "-o", out)
    assert_one_line_error(res, "xlt tokenize", "unknown language 'xx'")
    assert not out.exists() and list(tmp_path.iterdir()) == [source]


def test_text_blanked_by_the_tokenizer_is_an_error_or_a_note(tmp_path):
    """Fake-English under a real language's code: Moses' step blanks its private-use characters, and
    the corpus became blank lines, silently; Fake-English's own code tokenizes it as English."""
    english = ["The cat sleeps .", "", "A dog barks ."]
    source, out = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("\n".join(to_fake(line) for line in english) + "\n", encoding="utf-8")
    assert_one_line_error(run_xlt("tokenize", "--lang", "de", source, "-o", out), str(source),
                          "every line tokenizes to nothing as de", "give Fake-English as --lang fake")
    assert list(tmp_path.iterdir()) == [source]
    run_xlt("tokenize", "--lang", "fake", source, "-o", out, check=True)
    assert out.read_text(encoding="utf-8").splitlines() == [to_fake(line) for line in english]
    # some lines only: they stay, blank, and a note counts them; a line of format characters alone (a
    # BOM, zero-width spaces) is a blank line, and a file holding only a BOM an empty corpus
    source.write_text("Der Hund bellt .\n" + to_fake("The cat sleeps .") + "\n\u200b\u200d\n", encoding="utf-8")
    res = run_xlt("tokenize", "--lang", "de", source, "-o", out, check=True)
    assert out.read_text(encoding="utf-8").splitlines() == ["Der Hund bellt .", "", ""]
    assert "note: 1 of 2 lines tokenize to nothing as de" in res.stderr
    source.write_text("\ufeff\n", encoding="utf-8")
    assert_one_line_error(run_xlt("tokenize", "--lang", "en", source, "-o", out),
                          f"{source}: empty input: no sentence (every line is blank)")


@pytest.mark.parametrize("workers", ["1", "2"])
def test_non_utf8_input_is_one_line_error_without_output(tmp_path, workers):
    source = tmp_path / "in.txt"
    source.write_bytes(b"good line\n" * 600 + b"bad \xff byte\n" + b"more\n")
    out = tmp_path / "out.txt"
    for _ in range(3):   # the pool's workers are stopped by SIGTERM: none may unwind with a traceback of its own
        res = run_xlt("tokenize", "--lang", "en", source, "-o", out, "--workers", workers)
        assert_one_line_error(res, f"{source}:601:", "UTF-8")
        assert list(tmp_path.iterdir()) == [source]


def test_failed_run_keeps_the_previous_output(tmp_path):
    source = tmp_path / "in.txt"
    source.write_bytes(b"ok\n\xfe\n")
    out = tmp_path / "out.txt"
    out.write_text("previous\n", encoding="utf-8")
    assert_one_line_error(run_xlt("tokenize", "--lang", "en", source, "-o", out), ":2:")
    assert out.read_text(encoding="utf-8") == "previous\n"


def test_config_round_trip_and_validation(tmp_path):
    config = TokenizerConfig("ru", lowercase=True, remove_accents=True)
    path = tmp_path / "tokenizer.json"
    config.save(path)
    assert TokenizerConfig.load(path) == config
    assert Tokenizer.from_config(config).tokenize("Ёлка") == "елка"
    with pytest.raises(XltError, match="unknown tokenizer setting"):
        TokenizerConfig.from_dict({"lang": "en", "lowercse": True})
    with pytest.raises(XltError, match="unknown language 'english'"):
        TokenizerConfig("english")
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(XltError, match="not a valid tokenizer config"):
        TokenizerConfig.load(path)


def test_help_has_an_example():
    res = run_xlt("tokenize", "--help", check=True)
    assert "Example" in res.stdout


def test_config_records_the_backend():
    assert TokenizerConfig("zh").to_dict()["backend"] == "jieba"
    assert TokenizerConfig("en").to_dict()["backend"] == "moses"
