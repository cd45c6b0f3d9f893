"""xlt bpe learn / apply: byte-identical to fastBPE's own `fast` tool, and the one error path."""

from __future__ import annotations

import contextlib
import gzip
import lzma
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import MIRROR, assert_one_line_error, run_xlt
from synthetic import corpus

from xlt.text.bpe import BPE
from xlt.text.fastbpe import fast_tool

FAST = fast_tool()
SAMPLE_LINES = 3000
MERGES = 2000


def fast(*args: str) -> bytes:
    """stdout of fastBPE's own tool (its log on stderr is dropped)."""
    return subprocess.run([FAST, *map(str, args)], capture_output=True, check=True).stdout


def fast_apply(tmp: Path, input: Path, codes: Path, vocab: Path | None = None) -> bytes:
    out = tmp / f"fast-{input.name}.bpe"
    fast("applybpe", out, input, codes, *([vocab] if vocab else []))
    return out.read_bytes()


def head_lines(path: Path, n: int) -> bytes:
    with lzma.open(path, "rb") as f:
        return b"".join(f.readline() for _ in range(n))


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> dict[str, Path]:
    """First lines of the mirror's English and French Wikipedia text, and fastBPE's joint codes."""
    if not MIRROR.is_dir():
        pytest.fail(f"data mirror not found at {MIRROR}; set XLT_DATA_MIRROR")
    tmp = tmp_path_factory.mktemp("sample")
    en, fr = tmp / "en.txt", tmp / "fr.txt"
    en.write_bytes(head_lines(MIRROR / "mono/en/enwiki_wikiextractor_sample_30MB.txt.xz", SAMPLE_LINES))
    fr.write_bytes(head_lines(MIRROR / "mono/fr/frwiki_vikidia_wivico_piaf_13MB.txt.xz", SAMPLE_LINES))
    codes = tmp / "fast.codes"
    codes.write_bytes(fast("learnbpe", MERGES, en, fr))
    return {"dir": tmp, "en": en, "fr": fr, "codes": codes}


def nonascii_corpus(tmp: Path) -> Path:
    """The synthetic French side with accents, CJK and emoji mixed in (multi-byte UTF-8)."""
    _, fr = corpus(300, seed=3)
    lines = [line.replace("e", "é").replace("a", "à") + " 猫が 見る 🐈" for line in fr]
    path = tmp / "nonascii.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# ---- learn -----------------------------------------------------------------------------------
def test_learn_matches_fast_on_the_mirror_sample(sample, tmp_path):
    out = tmp_path / "codes"
    run_xlt("bpe", "learn", "--merges", MERGES, "-o", out, sample["en"], sample["fr"], check=True)
    assert out.read_bytes() == sample["codes"].read_bytes()


def test_learn_from_compressed_and_stdin_streams_the_same_corpus(sample, tmp_path):
    en_gz = tmp_path / "en.txt.gz"
    en_gz.write_bytes(gzip.compress(sample["en"].read_bytes()))
    res = run_xlt("bpe", "learn", "-n", MERGES, en_gz, "-", input=sample["fr"].read_bytes(), check=True)
    assert res.stdout.encode("utf-8") == sample["codes"].read_bytes()


def test_learn_matches_fast_on_synthetic_and_non_ascii_text(bilingual, tmp_path):
    en, fr = bilingual
    other = nonascii_corpus(tmp_path)
    for corpora, merges in (([en, fr], 60), ([other], 40), ([en, other], 80)):
        res = run_xlt("bpe", "learn", "-n", merges, *corpora, check=True)
        assert res.stdout.encode("utf-8") == fast("learnbpe", merges, *corpora)
        assert res.stderr == ""  # fastBPE's log is kept out of the user's stderr


def test_learn_keeps_the_last_word_of_a_file_without_final_newline(tmp_path):
    text = "lower lowest newer newest wider\nwidest slower slowest"
    cut, whole = tmp_path / "cut.txt", tmp_path / "whole.txt"
    cut.write_text(text, encoding="utf-8")
    whole.write_text(text + "\n", encoding="utf-8")
    ours = run_xlt("bpe", "learn", "-n", 12, cut, check=True).stdout.encode("utf-8")
    assert ours == fast("learnbpe", 12, whole)
    assert ours != fast("learnbpe", 12, cut)  # fastBPE ignores "slowest" there
    # and the missing newline does not glue the file's last word to the next file's first
    joint = run_xlt("bpe", "learn", "-n", 12, cut, whole, check=True).stdout.encode("utf-8")
    assert joint == fast("learnbpe", 12, whole, whole)


def test_learn_stops_after_the_last_real_merge(tmp_path):
    path = tmp_path / "tiny.txt"
    path.write_text("ab ab abc\nb c\n", encoding="utf-8")
    reference = fast("learnbpe", 10, path).decode().splitlines()
    assert reference[3:] == ["a b</w> 0"] * 7  # fastBPE repeats a zero-count merge ...
    res = run_xlt("bpe", "learn", "-n", 10, path, "-o", tmp_path / "codes", check=True)
    assert (tmp_path / "codes").read_text().splitlines() == reference[:3]  # ... xlt stops there
    assert "only 3 merges" in res.stderr
    out = run_xlt("bpe", "apply", "--codes", tmp_path / "codes", input="abc ab\n", check=True)
    assert out.stdout == "abc ab\n"


# ---- apply -----------------------------------------------------------------------------------
def test_apply_matches_fast_for_file_stdin_and_xz(sample, tmp_path):
    codes, fr = sample["codes"], sample["fr"]
    reference = fast_apply(tmp_path, fr, codes)
    out = tmp_path / "fr.bpe"
    run_xlt("bpe", "apply", "--codes", codes, fr, "-o", out, check=True)
    assert out.read_bytes() == reference
    streamed = run_xlt("bpe", "apply", "--codes", codes, input=fr.read_bytes(), check=True)
    assert streamed.stdout.encode("utf-8") == reference
    piped = run_xlt("bpe", "apply", "--codes", codes, "/dev/stdin", input=fr.read_bytes(), check=True)
    assert piped.stdout.encode("utf-8") == reference  # a pipe named as a file is streamed, not mapped
    fr_xz = tmp_path / "fr.txt.xz"
    fr_xz.write_bytes(lzma.compress(fr.read_bytes()))
    run_xlt("bpe", "apply", "--codes", codes, fr_xz, "-o", out, check=True)
    assert out.read_bytes() == reference


def test_apply_with_a_vocabulary_and_a_threshold_matches_fast(sample, tmp_path):
    codes, en, fr = sample["codes"], sample["en"], sample["fr"]
    fr_bpe, vocab = tmp_path / "fr.bpe", tmp_path / "fr.vocab"
    fr_bpe.write_bytes(fast_apply(tmp_path, fr, codes))
    vocab.write_bytes(fast("getvocab", fr_bpe))
    reference = fast_apply(tmp_path, en, codes, vocab)
    assert reference != fast_apply(tmp_path, en, codes)  # the vocabulary really limits something
    for input_args, stdin in (([en], None), ([], en.read_bytes())):
        res = run_xlt("bpe", "apply", "--codes", codes, "--vocab", vocab, *input_args, input=stdin, check=True)
        assert res.stdout.encode("utf-8") == reference
    threshold = 20
    kept = [line for line in vocab.read_text().splitlines(keepends=True) if int(line.split()[1]) >= threshold]
    limited = tmp_path / "limited.vocab"
    limited.write_text("".join(kept))
    reference = fast_apply(tmp_path, en, codes, limited)
    res = run_xlt("bpe", "apply", "--codes", codes, "--vocab", vocab, "--vocab-threshold", threshold, en, check=True)
    assert res.stdout.encode("utf-8") == reference
    lines = en.read_text(encoding="utf-8").split("\n")[:-1]
    python = BPE(codes, vocab, vocab_threshold=threshold, native=False)  # xlt's own applier, for pip installs
    assert "\n".join(python.apply(lines)) + "\n" == reference.decode("utf-8")


def test_apply_keeps_whitespace_and_the_last_word_the_same_for_file_and_stdin(sample, tmp_path):
    text = "  the  garden\tof élan \r\n\n\n猫  vital   \n  \nlast word"
    odd, with_newline = tmp_path / "odd.txt", tmp_path / "odd_nl.txt"
    odd.write_text(text, encoding="utf-8")
    with_newline.write_text(text + "\n", encoding="utf-8")
    reference = fast_apply(tmp_path, with_newline, sample["codes"])
    from_file = run_xlt("bpe", "apply", "--codes", sample["codes"], odd, check=True).stdout
    from_stdin = run_xlt("bpe", "apply", "--codes", sample["codes"], input=text, check=True).stdout
    assert from_file.encode("utf-8") == from_stdin.encode("utf-8") == reference[:-1]
    one_word, one_line = tmp_path / "one.txt", tmp_path / "one_nl.txt"
    one_word.write_text("gardens", encoding="utf-8")  # no separator at all: fastBPE alone fails on it
    one_line.write_text("gardens\n", encoding="utf-8")
    ours = run_xlt("bpe", "apply", "--codes", sample["codes"], one_word, check=True).stdout
    assert ours.encode("utf-8") == fast_apply(tmp_path, one_line, sample["codes"])[:-1]


@pytest.mark.parametrize("native", [True, False])  # fastBPE's binding, and xlt's Python applier
def test_in_process_bpe_equals_the_command(sample, tmp_path, native):
    lines = sample["en"].read_text(encoding="utf-8").split("\n")[:-1]
    reference = fast_apply(tmp_path, sample["en"], sample["codes"]).decode("utf-8").split("\n")[:-1]
    bpe = BPE(sample["codes"], native=native)
    assert bpe.apply(lines[:500]) + bpe.apply(lines[500:]) == reference
    other = nonascii_corpus(tmp_path)
    odd = ["  the  garden\tof élan \r", "", "猫  vital   ", "a\0b\0c ab\0", "x" * 3000]
    other.write_bytes(other.read_bytes() + ("\n".join(odd) + "\n").encode("utf-8"))
    reference = fast_apply(tmp_path, other, sample["codes"]).decode("utf-8").split("\n")[:-1]
    assert BPE(sample["codes"], native=native).apply(other.read_bytes().decode("utf-8").split("\n")[:-1]) == reference


def textbook_bpe(word: str, ranks: dict[tuple[str, str], int]) -> str:
    """Sennrich et al.'s apply step: merge the best-ranked adjacent pair everywhere, until none is left."""
    pieces = list(word[:-1]) + [word[-1] + "</w>"]
    while len(pieces) > 1:
        best = min(zip(pieces, pieces[1:]), key=lambda p: ranks.get(p, len(ranks)))
        if best not in ranks:
            break
        merged, i = [], 0
        while i < len(pieces):
            if i + 1 < len(pieces) and (pieces[i], pieces[i + 1]) == best:
                merged.append(pieces[i] + pieces[i + 1])
                i += 2
            else:
                merged.append(pieces[i])
                i += 1
        pieces = merged
    return "@@ ".join(pieces)[: -len("</w>")]


def test_apply_agrees_with_the_textbook_algorithm(tmp_path):
    path = nonascii_corpus(tmp_path)
    codes = tmp_path / "codes"
    run_xlt("bpe", "learn", "-n", 50, path, "-o", codes, check=True)
    ranks = {tuple(line.split(" ")[:2]): i for i, line in enumerate(codes.read_text(encoding="utf-8").splitlines())}
    words = sorted(set(path.read_text(encoding="utf-8").split()))
    assert BPE(codes).apply(words) == [textbook_bpe(w, ranks) for w in words]


# ---- errors: one line, exit 2, no output left behind -----------------------------------------
def assert_fails_cleanly(tmp_path: Path, args: list, *fragments: str, input: bytes | None = None) -> None:
    before = set(tmp_path.iterdir())
    res = run_xlt("bpe", *args, "-o", tmp_path / "out", input=input)
    assert_one_line_error(res, *fragments)
    assert set(tmp_path.iterdir()) == before, "a failed run left files behind"


def test_bad_inputs_give_one_line_and_no_output(tmp_path):
    good = tmp_path / "good.txt"
    good.write_text("low lower lowest\n", encoding="utf-8")
    codes = tmp_path / "codes"
    codes.write_text("l o 3\nlo w 3\n", encoding="utf-8")
    bad_utf8 = tmp_path / "latin1.txt"
    bad_utf8.write_bytes("ok line\nd\xe9j\xe0 vu\n".encode("latin-1"))
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n\n", encoding="utf-8")
    bad_codes = tmp_path / "bad.codes"
    bad_codes.write_text("l o 3\nlo w\n", encoding="utf-8")
    repeated = tmp_path / "repeated.codes"
    repeated.write_text("l o 3\nl o 2\n", encoding="utf-8")
    bad_vocab = tmp_path / "bad.vocab"
    bad_vocab.write_text("low 3\nlo@@ three\n", encoding="utf-8")
    vocab = tmp_path / "ok.vocab"
    vocab.write_text("low 3\nlo@@ 1\n", encoding="utf-8")

    assert_fails_cleanly(tmp_path, ["learn", "-n", 5, tmp_path / "missing.txt"], "missing.txt", "no such corpus")
    assert_fails_cleanly(tmp_path, ["learn", "-n", 5, empty], "empty.txt", "empty corpus")
    # one empty corpus of several is named too: its language would be learned from the others' text
    assert_fails_cleanly(tmp_path, ["learn", "-n", 5, good, empty], f"{empty}: empty corpus: no words")
    assert_fails_cleanly(tmp_path, ["vocab", good, empty], f"{empty}: empty corpus: no words")
    assert_fails_cleanly(tmp_path, ["learn", "-n", 5, good, bad_utf8], "latin1.txt:2:", "UTF-8")
    assert_fails_cleanly(tmp_path, ["learn", "-n", 5, "-"], "single character", input=b"a b c\n")
    assert_fails_cleanly(tmp_path, ["apply", "--codes", codes, bad_utf8], "latin1.txt:2:", "UTF-8")
    assert_fails_cleanly(tmp_path, ["apply", "--codes", codes, "-"], "<stdin>:2:", input=bad_utf8.read_bytes())
    assert_fails_cleanly(tmp_path, ["apply", "--codes", tmp_path / "nope", good], "nope", "no such codes file")
    assert_fails_cleanly(tmp_path, ["apply", "--codes", bad_codes, good], "bad.codes:2:", "malformed codes line")
    assert_fails_cleanly(tmp_path, ["apply", "--codes", repeated, good], "repeated.codes:2:", "repeats")
    assert_fails_cleanly(tmp_path, ["apply", "--codes", codes, "--vocab", bad_vocab, good], "bad.vocab:2:",
                         "malformed vocabulary line")
    assert_fails_cleanly(tmp_path, ["apply", "--codes", codes, "--vocab", vocab, "--vocab-threshold", 9, good],
                         "ok.vocab", "at least 9")
    assert_fails_cleanly(tmp_path, ["apply", "--codes", codes, "--vocab-threshold", 9, good], "needs --vocab")
    # an archive cut short: the error names the line after the last one it still holds, as tokenize does
    cut = tmp_path / "cut.txt.gz"
    whole = gzip.compress("".join(f"line {i} low lower\n" for i in range(5000)).encode())
    cut.write_bytes(whole[:len(whole) // 2])
    held = 0
    with gzip.open(cut, "rb") as f, contextlib.suppress(EOFError):
        for _ in f:
            held += 1
    assert 0 < held < 5000
    for command in (["learn", "-n", 5, cut], ["vocab", cut]):
        assert_fails_cleanly(tmp_path, command, f"cut.txt.gz:{held + 1}: cannot read input")


def test_apply_without_the_fast_tool_streams_the_same_bytes(sample, tmp_path, monkeypatch):
    import xlt.text.bpe as bpe_module

    reference = fast_apply(tmp_path, sample["fr"], sample["codes"])
    monkeypatch.setattr(bpe_module, "find_fast_tool", lambda: None)  # as in a pip install: no `fast`
    out = tmp_path / "fr.bpe"
    bpe_module.apply(sample["codes"], sample["fr"], out)
    assert out.read_bytes() == reference
    monkeypatch.setattr(bpe_module, "_binding_available", lambda required: False)  # nor its binding
    bpe_module.apply(sample["codes"], sample["fr"], out)
    assert out.read_bytes() == reference


def test_a_wrong_fast_tool_setting_is_one_line(tmp_path):
    good = tmp_path / "good.txt"
    good.write_text("low lower\n", encoding="utf-8")
    codes = tmp_path / "codes"
    codes.write_text("l o 2\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "xlt", "bpe", "apply", "--codes", str(codes), str(good)],
                          capture_output=True, text=True, env={**os.environ, "XLT_FASTBPE": str(tmp_path / "no-fast")})
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "make install" in proc.stderr and "no-fast" in proc.stderr


# ---- the in-process learner against fastBPE and against textbook BPE ---------------------------
def tie_corpus(tmp: Path, seed: int, alphabet: str, lines: int) -> Path:
    """Short random words over a small alphabet: most pairs tie, so only fastBPE's exact order passes."""
    rng = random.Random(seed)
    text = "\n".join(" ".join("".join(rng.choice(alphabet) for _ in range(rng.choice((1, 2, 3, 5, 9, 17))))
                               for _ in range(rng.randint(0, 9))) for _ in range(lines))
    path = tmp / f"ties{seed}.txt"
    path.write_text(text + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("seed, alphabet, lines, merges", [
    (1, "ab", 200, 300), (2, "abc", 1500, 2000), (3, "aé猫🐈\t\r", 800, 400), (4, "xyz", 5, 50)])
def test_learn_and_vocab_match_fast_where_pairs_tie(tmp_path, monkeypatch, seed, alphabet, lines, merges):
    from xlt.text.bpe import build_vocabulary, learn

    path = tie_corpus(tmp_path, seed, alphabet, lines)
    reference = [line for line in fast("learnbpe", merges, path).splitlines(keepends=True) if not line.endswith(b" 0\n")]
    vocab = fast("getvocab", path)
    monkeypatch.setattr(subprocess, "Popen", None)  # no tool runs: learn and vocab are in-process
    learn([path], merges, tmp_path / "codes")
    assert (tmp_path / "codes").read_bytes() == b"".join(reference)
    build_vocabulary([path], tmp_path / "vocab")
    assert (tmp_path / "vocab").read_bytes() == vocab


def test_learn_matches_fast_on_a_nul_byte_and_one_letter_words(tmp_path):
    path = tmp_path / "odd.txt"  # fastBPE splits a word into characters only up to a NUL byte
    path.write_bytes(b"ab\0cd ab\0cd \0x a a b ab abab\x00 cd\n" * 3)
    res = run_xlt("bpe", "learn", "-n", 20, path, check=True)
    assert res.stdout.encode("utf-8") == b"".join(
        line for line in fast("learnbpe", 20, path).splitlines(keepends=True) if not line.endswith(b" 0\n"))


def textbook_merges(words: dict[str, int], merges: int, chosen: list[tuple[str, str, int]]) -> list[tuple[str, str, int]]:
    """Sennrich et al.'s learner, recounting every pair of the whole corpus before each merge.

    Ties have no textbook answer: where several pairs share the top count, take the one in
    ``chosen`` if it is among them (fastBPE's order decides), else the first and let the test fail.
    """
    split = {w: list(w[:-1]) + [w[-1] + "</w>"] for w in words}
    result = []
    for step in range(merges):
        counts: dict[tuple[str, str], int] = {}
        for word, pieces in split.items():
            for pair in zip(pieces, pieces[1:]):
                counts[pair] = counts.get(pair, 0) + words[word]
        if not counts:
            break
        top = max(counts.values())
        tied = sorted(p for p, c in counts.items() if c == top)
        pair = chosen[step][:2] if step < len(chosen) and chosen[step][:2] in tied else tied[0]
        result.append((*pair, top))
        for word, pieces in split.items():
            merged, i = [], 0
            while i < len(pieces):
                if i + 1 < len(pieces) and (pieces[i], pieces[i + 1]) == pair:
                    merged.append(pieces[i] + pieces[i + 1])
                    i += 2
                else:
                    merged.append(pieces[i])
                    i += 1
            split[word] = merged
    return result


def test_learn_agrees_with_textbook_bpe(tmp_path):
    text = "low low low low low lower lower newest newest newest newest newest newest widest widest widest " \
           "aaaa aaa aa banana bandana élan élan 猫猫 猫\n"
    path = tmp_path / "tiny.txt"
    path.write_text(text, encoding="utf-8")
    codes = tmp_path / "codes"
    written = run_xlt("bpe", "learn", "-n", 100, path, "-o", codes, check=True)
    ours = [tuple(line.split(" ")) for line in codes.read_text(encoding="utf-8").splitlines()]
    ours = [(a, b, int(c)) for a, b, c in ours]
    words: dict[str, int] = {}
    for word in text.split():
        words[word] = words.get(word, 0) + 1
    assert ours == textbook_merges(words, 100, ours)
    assert f"only {len(ours)} merges" in written.stderr  # the corpus ran out of pairs before 100


CHILD_OF_A_KILLED_PARENT = """
import subprocess, sys
from xlt.text.fastbpe import run_fast
print("started", flush=True)
run_fast(["60"], stdout=subprocess.DEVNULL, tool="sleep")
"""


def _state(pid: int) -> str:
    """A process's state letter ("Z": a zombie init has not reaped yet), "" once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return ""


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="parent-death signals are Linux's")
def test_the_tool_dies_with_a_parent_killed_outright():
    # kill -9 (the OOM killer) of `xlt bpe apply` left `fast applybpe` running, re-parented to init,
    # on a temporary nobody would rename; SIGTERM was always passed on
    parent = subprocess.Popen([sys.executable, "-c", CHILD_OF_A_KILLED_PARENT], stdout=subprocess.PIPE, text=True)
    child = None
    try:
        assert parent.stdout.readline() == "started\n"
        children = Path(f"/proc/{parent.pid}/task/{parent.pid}/children")
        deadline = time.time() + 30
        while not children.read_text().split() and time.time() < deadline:
            time.sleep(0.02)
        (child,) = map(int, children.read_text().split())
        parent.kill()
        parent.wait()
        deadline = time.time() + 10
        while _state(child) not in ("", "Z") and time.time() < deadline:
            time.sleep(0.02)
        assert _state(child) in ("", "Z"), "the tool outlived its parent"
    finally:
        parent.kill()
        if child is not None and _state(child) not in ("", "Z"):
            os.kill(child, signal.SIGKILL)
