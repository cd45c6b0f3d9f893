"""MUSE dictionaries, grow-diag-final-and on hand-made alignments, one-to-one links, fast_align."""

from __future__ import annotations

import pytest
import synthetic
import systran_align

from xlt.analysis.dictionaries import contextual_dictionary, grow_diag_final_and, one_to_one, read_muse_dictionary
from xlt.analysis.fastalign import FastAlignSettings, LexicalTable, align_directions
from xlt.utils.errors import XltError


def test_muse_dictionary_space_or_tab(tmp_path):
    path = tmp_path / "en-fr.txt"
    path.write_text("the\tle\nthe la\n\ncat chat 0.5\nthe le\n", encoding="utf-8")
    assert read_muse_dictionary(path) == [("the", "le"), ("the", "la"), ("cat", "chat")]


@pytest.mark.parametrize("bad", ["the\n", "a b c\n", "a b c d\n"])
def test_muse_dictionary_bad_line_names_it(tmp_path, bad):
    path = tmp_path / "d.txt"
    path.write_text("ok bien\n" + bad, encoding="utf-8")
    with pytest.raises(XltError) as e:
        read_muse_dictionary(path)
    assert e.value.line == 2 and e.value.path == str(path)


def test_empty_dictionary(tmp_path):
    (tmp_path / "d.txt").write_text("\n", encoding="utf-8")
    with pytest.raises(XltError, match="empty dictionary"):
        read_muse_dictionary(tmp_path / "d.txt")


# Hand-made alignments whose grow-diag-final-and follows from the textbook definition alone.
GDFA_CASES = {
    "agreement is kept": ([(0, 0), (1, 1)], [(0, 0), (1, 1)], [(0, 0), (1, 1)]),
    # (2,1) touches (1,1) by a side with source 2 unaligned; then (2,2) touches (1,1) diagonally
    # while target 2 is unaligned.
    "grow by side then diagonal": ([(0, 0), (1, 1), (2, 1)], [(0, 0), (1, 1), (2, 2)],
                                   [(0, 0), (1, 1), (2, 1), (2, 2)]),
    # (0,1) touches (0,0) but both of its words are already aligned: grow-diag refuses it.
    "grow needs an unaligned word": ([(0, 0), (1, 1), (0, 1)], [(0, 0), (1, 1)], [(0, 0), (1, 1)]),
    # Isolated links: final-and takes them when both words are unaligned.
    "final-and adds isolated links": ([(0, 0), (2, 3)], [(0, 0), (3, 2)], [(0, 0), (2, 3), (3, 2)]),
    # ...but not when one word is taken (plain grow-diag-final would add (3,2) too).
    "final AND, not final": ([(0, 0), (3, 1)], [(0, 0), (3, 2)], [(0, 0), (3, 1)]),
    # Growth chains through links added in the same pass, far from the intersection.
    "chains": ([(0, 0), (1, 1), (2, 2), (3, 3)], [(0, 0)], [(0, 0), (1, 1), (2, 2), (3, 3)]),
    "nothing in common, nothing isolated": ([(0, 0), (1, 0)], [(0, 1)], [(0, 0)]),
    "empty": ([], [], []),
}


@pytest.mark.parametrize("name", GDFA_CASES)
def test_grow_diag_final_and_textbook_cases(name):
    forward, reverse, expected = GDFA_CASES[name]
    result = grow_diag_final_and(forward, reverse)
    assert result == expected
    assert set(forward) & set(reverse) <= set(result) <= set(forward) | set(reverse)


def test_one_to_one_drops_every_link_that_shares_a_word():
    links = [(0, 0), (1, 1), (1, 2), (3, 3), (2, 3), (4, 5)]
    assert one_to_one(links) == [(0, 0), (4, 5)]


@pytest.fixture(scope="module")
def parallel():
    en, fr = synthetic.corpus(300, seed=3)
    return [s.split() for s in en], [s.split() for s in fr]


def test_directional_links_reproduce_the_wheels_symmetrised_output(parallel, tmp_path):
    """systran_align's Aligner symmetrises internally; our decode + our GDFA must agree with it."""
    source, target = parallel
    forward, reverse = align_directions(source, target)
    bitext = tmp_path / "bitext"
    bitext.write_text("".join(f"{' '.join(s)} ||| {' '.join(t)}\n" for s, t in zip(source, target)), encoding="utf-8")
    fwd, bwd = str(tmp_path / "f"), str(tmp_path / "b")
    systran_align.generate_alignment_probabilities(str(bitext), fwd, bwd, favor_diagonal=True, optimize_tension=True,
                                                   variational_bayes=True)
    aligner = systran_align.Aligner(fwd, bwd)
    for s, t, f, r in zip(source, target, forward, reverse):
        # Forward gives each target word at most one source word; reverse the other way round.
        assert len({j for _, j in f}) == len(f) and len({i for i, _ in r}) == len(r)
        assert grow_diag_final_and(f, r) == sorted(aligner.align(s, t)["alignments"])
    assert LexicalTable.read(fwd).ids["<eps>"] == 1


def test_contextual_dictionary_finds_the_grammar_translations(parallel):
    source, target = parallel
    truth = set(synthetic.DICTIONARY) | {(".", ".")}
    result = contextual_dictionary(source, target)
    pairs = [(source[k][i], target[k][j]) for k, links in enumerate(result.links) for i, j in links]
    assert result.n_links == len(pairs) > 5 * len(source)
    assert sum(p in truth for p in pairs) / len(pairs) > 0.95
    kept = contextual_dictionary(source, target, drop_identical=True)
    assert kept.n_identical_dropped == sum(a == b for a, b in pairs) >= len(source) * 0.9
    assert all(source[k][i] != target[k][j] for k, links in enumerate(kept.links) for i, j in links)


def test_empty_sides_get_no_links_and_the_separator_is_refused():
    forward, reverse = align_directions([["a", "b"], []], [["x", "y"], ["z"]], FastAlignSettings(iterations=2))
    assert forward[1] == reverse[1] == []
    with pytest.raises(XltError, match=r"\|\|\|"):
        align_directions([["a", "|||"]], [["x"]])
