"""xlt codeswitch: replacement rate, the per-batch cap, weighted choice, determinism, the report, errors."""

from __future__ import annotations

import errno
import gzip
import json
import math
import os
from collections import Counter

import pytest
import synthetic
from conftest import assert_one_line_error, run_in_process, run_xlt
from scipy.stats import chi2

from xlt.text.codeswitch import CodeSwitchConfig, CodeSwitcher, Dictionary
from xlt.utils.errors import XltError

TRANSLATIONS = dict(synthetic.DICTIONARY)  # the synthetic dictionary is one-to-one


def switch(lines: list[str], dictionary: Dictionary, **settings) -> tuple[list[str], dict]:
    switcher = CodeSwitcher(dictionary, CodeSwitchConfig(**settings))
    return list(switcher.switch_lines(lines)), switcher.report()["counts"]


def changed_positions(before: list[str], after: list[str]) -> list[tuple[int, int]]:
    assert len(before) == len(after)
    positions = []
    for i, (a, b) in enumerate(zip(before, after)):
        old, new = a.split(" "), b.split(" ")
        assert len(old) == len(new)
        positions += [(i, j) for j, (x, y) in enumerate(zip(old, new)) if x != y]
    return positions


@pytest.fixture
def english(tmp_path):
    en, _ = synthetic.corpus(3000, seed=1)
    return en


@pytest.fixture
def dictionary(tmp_path):
    return Dictionary.load(synthetic.write_dictionary(tmp_path / "en-fr.txt"))


def test_rate_within_binomial_bounds_when_the_cap_does_not_bind(english, dictionary):
    out, counts = switch(english, dictionary, rate=0.3, max_fraction=1.0, seed=3)
    changed = changed_positions(english, out)
    for i, j in changed:  # every replacement is a translation of the word it replaced
        assert out[i].split(" ")[j] == TRANSLATIONS[english[i].split(" ")[j]]
    n = sum(1 for line in english for word in line.split() if word in TRANSLATIONS)
    assert n == counts["words_in_dictionary"] == 6 * len(english)
    assert abs(len(changed) - 0.3 * n) <= 5 * math.sqrt(n * 0.3 * 0.7)
    assert counts["words_replaced"] == len(changed) and counts["capped_batches"] == 0


def test_rate_zero_changes_nothing_and_rate_one_changes_every_dictionary_word(english, dictionary):
    assert switch(english, dictionary, rate=0.0, max_fraction=1.0)[0] == english
    out, counts = switch(english, dictionary, rate=1.0, max_fraction=1.0)
    assert len(changed_positions(english, out)) == counts["words_in_dictionary"]
    assert all(line.endswith(" .") for line in out)


def test_cap_holds_in_every_batch_without_favouring_the_start(english, dictionary):
    batch_lines = 20
    out, counts = switch(english, dictionary, rate=0.5, max_fraction=0.1, batch_lines=batch_lines, seed=5)
    changed = changed_positions(english, out)
    first_half = second_half = 0
    for start in range(0, len(english), batch_lines):
        in_batch = [(i, j) for i, j in changed if start <= i < start + batch_lines]
        words = sum(len(line.split()) for line in english[start:start + batch_lines])
        assert len(in_batch) <= 0.1 * words
        # ~70 of 120 dictionary words are drawn, so the cap (14) binds and is reached exactly.
        assert len(in_batch) == math.floor(0.1 * words)
        first_half += sum(1 for i, _ in in_batch if i < start + batch_lines // 2)
        second_half += sum(1 for i, _ in in_batch if i >= start + batch_lines // 2)
    total = first_half + second_half
    assert abs(first_half - total / 2) <= 5 * math.sqrt(total / 4), (first_half, second_half)
    # Every word position in a sentence is as likely to be replaced (dictionary words are at 0..5).
    by_position = Counter(j for _, j in changed)
    assert set(by_position) == set(range(6))
    assert chi2.sf(sum((c - total / 6) ** 2 / (total / 6) for c in by_position.values()), df=5) > 1e-6
    assert counts["capped_batches"] == counts["batches"] == len(english) // batch_lines


def test_cap_is_an_exact_floor():
    assert CodeSwitchConfig(max_fraction=0.29).cap(100) == 29
    assert CodeSwitchConfig(max_fraction=0.15).cap(20) == 3
    assert CodeSwitchConfig(max_fraction=0.15).cap(6) == 0


def chi_square(observed: Counter, expected: dict) -> float:
    return sum((observed[k] - e) ** 2 / e for k, e in expected.items())


def test_weighted_choice_follows_the_weights(tmp_path):
    path = tmp_path / "weighted.txt"
    path.write_text("x a 1\nx b 2\nx\tc\t7\n", encoding="utf-8")
    lines = ["x x x x x"] * 2000
    out, counts = switch(lines, Dictionary.load(path), rate=1.0, max_fraction=1.0, seed=11)
    observed = Counter(word for line in out for word in line.split())
    expected = {"a": 1000, "b": 2000, "c": 7000}
    assert set(observed) == set(expected)
    assert chi_square(observed, expected) < chi2.ppf(1 - 1e-6, df=2)
    assert counts["distinct_anchors_added"] == 3


def test_unweighted_choice_is_uniform(tmp_path):
    path = tmp_path / "uniform.txt"
    path.write_text("x a\nx b\nx c\nx d\n", encoding="utf-8")
    out, _ = switch(["x x x x x"] * 2000, Dictionary.load(path), rate=1.0, max_fraction=1.0, seed=12)
    observed = Counter(word for line in out for word in line.split())
    assert chi_square(observed, dict.fromkeys("abcd", 2500)) < chi2.ppf(1 - 1e-6, df=3)


def test_choose_matches_a_linear_scan(tmp_path):
    path = tmp_path / "weighted.txt"
    path.write_text("w p 0.5\nw q 3\nw r 1.5\nw s 5\n", encoding="utf-8")
    dictionary = Dictionary.load(path)
    targets, weights = ["p", "q", "r", "s"], [0.5, 3, 1.5, 5]
    for step in range(1000):
        u = step / 1000
        threshold, running = u * sum(weights), 0.0
        expected = next(t for t, w in zip(targets, weights) if (running := running + w) > threshold)
        assert dictionary.choose("w", u) == expected, u


def test_same_seed_same_output_and_different_seeds_differ(tmp_path, bilingual):
    en, _ = bilingual
    dict_path = synthetic.write_dictionary(tmp_path / "d.txt")
    outputs = []
    for seed, name in [(1, "a"), (1, "b"), (2, "c")]:
        out = tmp_path / f"{name}.txt"
        run_xlt("codeswitch", "--dict", dict_path, "--seed", seed, en, "-o", out, check=True)
        outputs.append(out.read_text(encoding="utf-8"))
    assert outputs[0] == outputs[1] and outputs[0] != outputs[2]
    gz = tmp_path / "en.txt.gz"
    gz.write_bytes(gzip.compress(en.read_bytes()))
    res = run_xlt("codeswitch", "--dict", dict_path, "--seed", 1, gz, check=True)
    assert res.stdout == outputs[0]


def test_lines_spacing_and_empty_lines_are_kept(dictionary):
    lines = ["", "the cat", "  the  dog  ", "nothing to see", "", "the"] * 50
    out, counts = switch(lines, dictionary, rate=1.0, max_fraction=1.0, batch_lines=7)
    assert len(out) == len(lines)
    assert [line == "" for line in out] == [line == "" for line in lines]
    assert out[:6] == ["", "le chat", "  le  chien  ", "nothing to see", "", "le"]
    assert counts["words_seen"] == 50 * 8 and counts["lines"] == len(lines)


def test_report_counts_match_the_output(tmp_path, bilingual):
    en, _ = bilingual
    dict_path = synthetic.write_dictionary(tmp_path / "d.txt", weights=True)
    out, report_path = tmp_path / "out.txt", tmp_path / "report.json"
    run_xlt("codeswitch", "--dict", dict_path, "--rate", "0.4", "--max-fraction", "0.2", "--batch-lines", "30",
            "--seed", "7", en, "-o", out, "--report", report_path, check=True)
    before = en.read_text(encoding="utf-8").splitlines()
    after = out.read_text(encoding="utf-8").splitlines()
    changed = changed_positions(before, after)
    report = json.loads(report_path.read_text(encoding="utf-8"))
    counts = report["counts"]
    assert counts["lines"] == len(before) == len(after)
    assert counts["words_seen"] == sum(len(line.split()) for line in before)
    assert counts["words_in_dictionary"] == sum(w in TRANSLATIONS for line in before for w in line.split())
    assert counts["words_replaced"] == len(changed)
    assert counts["distinct_anchors_added"] == len({after[i].split(" ")[j] for i, j in changed})
    assert counts["words_drawn"] >= counts["words_replaced"]
    assert report["settings"] == {"rate": 0.4, "max_fraction": 0.2, "seed": 7, "batch_lines": 30,
                                  "ignore_case": False}
    assert report["dictionary"]["weighted"] is True and report["dictionary"]["pairs"] == len(synthetic.DICTIONARY)


def test_identical_and_repeated_pairs_are_dropped(tmp_path):
    path = tmp_path / "d.txt"
    path.write_text("paris paris\ncat chat\ncat chat\ncat matou\n2019 2019\n", encoding="utf-8")
    dictionary = Dictionary.load(path)
    assert dictionary.translations == {"cat": ("chat", "matou")}
    summary = dictionary.summary()
    assert (summary["pairs"], summary["identical_pairs_dropped"], summary["duplicate_pairs_dropped"]) == (5, 2, 1)
    _, counts = switch(["paris cat 2019"], dictionary, rate=1.0, max_fraction=1.0)
    assert (counts["words_in_dictionary"], counts["words_replaced"]) == (1, 1)


def test_ignore_case_looks_up_lowercase_forms(dictionary):
    assert switch(["The Cat"], dictionary, rate=1.0, max_fraction=1.0)[0] == ["The Cat"]
    assert switch(["The Cat"], dictionary, rate=1.0, max_fraction=1.0, ignore_case=True)[0] == ["le chat"]


@pytest.mark.parametrize("content,line,fragment", [
    ("cat chat\ndog\n", 2, "got 1 columns"),
    ("cat chat\ndog chien 1 2\n", 2, "got 4 columns"),
    ("cat chat 1\ndog chien heavy\n", 2, "weight must be a positive number, got 'heavy'"),
    ("cat chat 1\ndog chien -0.5\n", 2, "got '-0.5'"),
    ("cat chat 1\ndog chien nan\n", 2, "got 'nan'"),
    ("cat chat\n\ndog chien\n", 2, "empty dictionary line"),
    ("cat chat 1\ndog chien\n", 2, "weight column present on some lines"),
])
def test_malformed_dictionary_is_one_line_error(tmp_path, bilingual, content, line, fragment):
    en, _ = bilingual
    dict_path = tmp_path / "bad-dict.txt"
    dict_path.write_text(content, encoding="utf-8")
    out = tmp_path / "out.txt"
    res = run_xlt("codeswitch", "--dict", dict_path, en, "-o", out, "--report", tmp_path / "r.json")
    assert_one_line_error(res, "xlt codeswitch", f"{dict_path}:{line}:", fragment)
    assert not out.exists() and not (tmp_path / "r.json").exists()


def test_a_report_the_disk_refuses_takes_the_output_with_it(tmp_path, bilingual, capsys, monkeypatch):
    # the disk fills at the report's flush, after the whole output was written: both or neither
    en, _ = bilingual
    dict_path = synthetic.write_dictionary(tmp_path / "d.txt")
    out, report = tmp_path / "out.txt", tmp_path / "r.json"
    real_fsync = os.fsync

    def full_for_the_report(fd):
        if os.readlink(f"/proc/self/fd/{fd}").startswith(f"{report}."):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", full_for_the_report)
    res = run_in_process(capsys, "-q", "codeswitch", "--dict", dict_path, en, "-o", out, "--report", report)
    assert_one_line_error(res, f"{report}: cannot write (No space left on device)")
    assert not out.exists() and not report.exists() and not list(tmp_path.glob("*.tmp"))


def test_empty_dictionary_and_bad_settings_are_errors(tmp_path):
    path = tmp_path / "empty.txt"
    path.write_text("", encoding="utf-8")
    with pytest.raises(XltError, match="dictionary is empty"):
        Dictionary.load(path)
    with pytest.raises(XltError, match="rate must be between 0 and 1"):
        CodeSwitchConfig(rate=1.5)
    res = run_xlt("codeswitch", "--dict", tmp_path / "missing.txt", input="a\n")
    assert_one_line_error(res, "missing.txt", "no such file")


def test_muse_dictionary_from_the_mirror(mirror):
    dictionary = Dictionary.load(mirror / "muse" / "full" / "en-fr.txt")
    summary = dictionary.summary()
    assert summary["pairs"] == 113_286 and not summary["weighted"]
    assert summary["identical_pairs_dropped"] > 0
    assert "chat" in dictionary.translations["cat"]
    out, counts = switch(["the cat sat on the mat ."] * 100, dictionary, rate=1.0, max_fraction=1.0)
    assert counts["words_replaced"] == counts["words_in_dictionary"] > 0
    assert len(out) == 100
