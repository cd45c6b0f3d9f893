"""xlt align word --pairs-out / --pairs-from: scoring every system of a comparison on one pair set."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import assert_one_line_error, run_xlt

from xlt.analysis.align import WordSettings
from xlt.analysis.dictionaries import read_muse_dictionary
from xlt.analysis.pair_sets import checksum
from xlt.embed.formats import write_word2vec
from xlt.analysis.static_words import align_static_word


def _at(degrees: float) -> list[float]:
    return [np.cos(np.radians(degrees)), np.sin(np.radians(degrees))]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A joint 2-d space: en words e1..e3 and fr words f1..f3 at hand-picked angles, 8 filler rows (the
    target space needs 10 words for P@10; fillers are never MRR candidates); dictionaries."""
    root = tmp_path_factory.mktemp("pairs")
    angles = {"e1": 0, "e2": 90, "e3": 200, "f1": 60, "f2": 20, "f3": 80}
    fillers = {f"z{i}": 300 + 5 * i for i in range(8)}
    words = {**angles, **fillers}
    write_word2vec(root / "joint.txt", list(words), np.array([_at(a) for a in words.values()]))
    (root / "dict.txt").write_text("e1 f1\ne2 f2\ne3 f3\nghost f1\n", encoding="utf-8")  # ghost: no vector
    (root / "first-two.txt").write_text("e1 f1\ne2 f2\n", encoding="utf-8")
    (root / "last-two.txt").write_text("e2 f2\ne3 f3\n", encoding="utf-8")
    (root / "unknown.txt").write_text("qqq www\nyyy zzz\n", encoding="utf-8")
    (root / "ghost.txt").write_text("ghost f1\ne1 f1\n", encoding="utf-8")
    return root


def word(files, *args):
    return run_xlt("align", "word", "--emb-a", files / "joint.txt", "--source-lang", "en", "--target-lang", "fr",
                   "--map", "none", "--no-csls", "--test-dict", files / "dict.txt", *args)


def mrr(files, *pairs_from) -> dict:
    return align_static_word(str(files / "joint.txt"), str(files / "joint.txt"), "en", "fr", None,
                             str(files / "dict.txt"),
                             word=WordSettings(map="none", csls=False, pairs_from=[str(files / p) for p in pairs_from]))


def test_mrr_on_a_restricted_pair_set_by_hand(files):
    # Every usable pair (ghost has no vector): candidates f1 (60 deg), f2 (20), f3 (80).
    # e1 (0): f2 > f1 -> rank 2; e2 (90): f3 > f1 > f2 -> rank 3; e3 (200): f3 first -> rank 1.
    whole = mrr(files)
    assert whole["test"]["usable"] == 3 and whole["test"]["pairs"] == 4 and "pairs_from" not in whole["test"]
    assert whole["results"][0]["mrr"] == pytest.approx((1 / 2 + 1 / 3 + 1) / 3)
    # Restricted to e1-f1, e2-f2: the candidates are f1 and f2 only, so e2 now ranks f2 second, not third:
    # (1/2 + 1/2) / 2, not the mean of the unrestricted reciprocal ranks (1/2 + 1/3) / 2.
    two = mrr(files, "first-two.txt")
    scores = two["results"][0]
    assert scores["mrr"] == pytest.approx(0.5) and scores["mrr_candidates"] == 2 and scores["queries"] == 2
    assert two["test"]["usable"] == 2 and two["test"]["pairs"] == 4
    assert two["test"]["pairs_from"] == {"files": [str(files / "first-two.txt")], "pairs": 2}
    assert two["test"]["checksum"] == checksum([("e2", "f2"), ("e1", "f1")]) != whole["test"]["checksum"]
    # Two files: only the pair in both (e2-f2), ranked among its one candidate.
    one = mrr(files, "first-two.txt", "last-two.txt")
    assert one["test"]["usable"] == 1 and one["results"][0]["mrr"] == 1.0
    assert one["test"]["checksum"] == checksum([("e2", "f2")])


def test_the_pairs_file_round_trips(files, tmp_path):
    res = word(files, "--pairs-out", tmp_path / "scored.pairs", "-o", tmp_path / "first.json")
    assert res.returncode == 0, res.stderr
    first = json.loads((tmp_path / "first.json").read_text())
    # the pairs scored, in the dictionary's order, as a MUSE dictionary: ghost (no vector) is not among them
    assert (tmp_path / "scored.pairs").read_text() == "e1 f1\ne2 f2\ne3 f3\n"
    assert read_muse_dictionary(tmp_path / "scored.pairs") == [("e1", "f1"), ("e2", "f2"), ("e3", "f3")]
    assert first["test"]["pairs_out"] == str(tmp_path / "scored.pairs")
    # read back: the same set, the same scores, the same file written again
    res = word(files, "--pairs-from", tmp_path / "scored.pairs", "--pairs-out", tmp_path / "again.pairs",
               "-o", tmp_path / "second.json")
    assert res.returncode == 0, res.stderr
    second = json.loads((tmp_path / "second.json").read_text())
    assert (tmp_path / "again.pairs").read_bytes() == (tmp_path / "scored.pairs").read_bytes()
    assert second["test"]["checksum"] == first["test"]["checksum"]
    assert second["test"]["usable"] == first["test"]["usable"] == 3
    assert second["results"] == first["results"]


def test_pairs_files_that_cannot_be_scored_are_one_error_line(files, tmp_path):
    # no word of the file in the vocabulary (nor in the test dictionary)
    assert_one_line_error(word(files, "--pairs-from", files / "unknown.txt"), "unknown.txt:",
                          "2 of the 2 --pairs-from pairs are not in the test dictionary", "'qqq www'")
    # in the dictionary, but this system has no vector for "ghost": refused, not scored as a miss
    assert_one_line_error(word(files, "--pairs-from", files / "ghost.txt"), "ghost.txt:",
                          "1 of the 2 --pairs-from pairs cannot be scored here", "'ghost f1'")
    (tmp_path / "disjoint.txt").write_text("e3 f3\n", encoding="utf-8")
    assert_one_line_error(word(files, "--pairs-from", files / "first-two.txt", "--pairs-from",
                               tmp_path / "disjoint.txt"), "disjoint.txt:", "no pair in common")
    assert_one_line_error(word(files, "--pairs-from", tmp_path / "absent.txt"), "absent.txt", "no such pairs file")
    assert not list(tmp_path.glob("*.json"))
