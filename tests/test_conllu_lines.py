"""The word-line check that the CoNLL-U rewriters share (fake-english, permute-words, align --pos-from):
a malformed sentence is one error line naming its file and line, and nothing is written."""

from __future__ import annotations

import re

import pytest
from conftest import assert_one_line_error, run_in_process

from xlt.analysis.dictionaries import read_pos_lexicon
from xlt.text.conllu_lines import sentence_blocks, word_lines
from xlt.utils.errors import XltError


def conllu(*rows: str) -> str:
    return "# text = A dog\n" + "".join(row.replace(" ", "\t") + "\n" for row in rows) + "\n"


GOOD = ("1 A a DET DT _ 2 det _ _", "2 dog dog NOUN NN _ 0 root _ _")
BAD = {   # what is wrong in the second word line: the message names it
    "ID x": (("1 A a DET DT _ 2 det _ _", "x dog dog NOUN NN _ 0 root _ _"), "ID 'x' is not a word number"),
    "gap": (("1 A a DET DT _ 3 det _ _", "3 dog dog NOUN NN _ 0 root _ _"), "word id 3 out of order (expected 2)"),
    "HEAD zz": (("1 A a DET DT _ 2 det _ _", "2 dog dog NOUN NN _ zz root _ _"), "HEAD 'zz' names no word"),
    "HEAD 9": (("1 A a DET DT _ 2 det _ _", "2 dog dog NOUN NN _ 9 root _ _"), "HEAD '9' names no word of the sentence (0..2)"),
    # a tree that never reaches the root: fine-tuning's reader refuses it, so the rewriters do
    "cycle": (("1 A a DET DT _ 0 root _ _", "2 dog dog NOUN NN _ 2 det _ _"), "word 2's heads run in a cycle (2 -> 2)"),
}


def test_word_lines_skip_ranges_and_empty_nodes_and_keep_heads_without_a_tree():
    block = [(i, line) for i, line in enumerate(conllu("1-2 Adog _ _ _ _ _ _ _ _", *GOOD, "2.1 x x X X _ _ _ _ _",
                                                       ).splitlines(), start=1) if line]
    assert [columns[1] for _, columns in word_lines(block)] == ["A", "dog"]
    assert word_lines([(1, "1 A a DET DT _ _ _ _ _".replace(" ", "\t"))])[0][1][6] == "_"
    assert [len(b) for b, _ in sentence_blocks(enumerate(["a", "b", "", "c"], start=1))] == [2, 1]


@pytest.mark.parametrize("name", list(BAD))
@pytest.mark.parametrize("command", [["fake-english", "--format", "conllu"], ["permute-words", "--format", "conllu"]])
def test_a_malformed_sentence_is_one_line_and_writes_nothing(command, name, tmp_path, capsys):
    rows, what = BAD[name]
    bad, out = tmp_path / "bad.conllu", tmp_path / "out.conllu"
    bad.write_text(conllu(*GOOD) + conllu(*rows))
    assert_one_line_error(run_in_process(capsys, "-q", *command, bad, "-o", out), f"{bad}:7: {what}")
    assert not out.exists()


@pytest.mark.parametrize("name", list(BAD))
def test_the_pos_lexicon_refuses_a_malformed_sentence(name, tmp_path):
    rows, what = BAD[name]
    bad = tmp_path / "bad.conllu"
    bad.write_text(conllu(*rows))
    with pytest.raises(XltError, match=re.escape(what)) as error:
        read_pos_lexicon(bad)
    assert (error.value.path, error.value.line) == (str(bad), 3)
    bad.write_text(conllu(*GOOD))
    assert read_pos_lexicon(bad) == {"a": "DET", "dog": "NOUN"}
