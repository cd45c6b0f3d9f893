"""Parsing task: CoNLL-U reading and its errors, first-subword batches, the biaffine head, LAS/UAS."""

from __future__ import annotations

import random

import pytest
import torch
from torch import nn
from finetune_fixtures import make_pipeline, predict, tiny_encoder, train_steps

from xlt.finetune.parse import ParseScores, ParseTask, read_conllu
from xlt.finetune.registry import TASKS, get_task
from xlt.text.vocab import EOS_ID
from xlt.utils import log
from xlt.utils.errors import XltError

WORDS = "the cat dog zebra a sees eats sleeps".split()

SAMPLE = """# sent_id = 1
# text = the cat sees a zebra .
1\tthe\tthe\tDET\t_\t_\t2\tdet\t_\t_
2\tcat\tcat\tNOUN\t_\t_\t3\tnsubj\t_\t_
3\tsees\tsee\tVERB\t_\t_\t0\troot\t_\t_
4-5\tazebra\t_\t_\t_\t_\t_\t_\t_\t_
4\ta\ta\tDET\t_\t_\t5\tdet\t_\t_
5\tzebra\tzebra\tNOUN\t_\t_\t3\tobj\t_\t_
5.1\tsees\tsee\tVERB\t_\t_\t_\t_\t3:conj\t_
6\t.\t.\tPUNCT\t_\t_\t3\tpunct\t_\t_

# sent_id = 2
1\tdog\tdog\tNOUN\t_\t_\t2\tnsubj:pass\t_\t_
2\tsleeps\tsleep\tVERB\t_\t_\t0\troot\t_\t_
"""


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_read_skips_ranges_and_empty_nodes(tmp_path):
    trees = read_conllu(write(tmp_path / "s.conllu", SAMPLE))
    assert [t.words for t in trees] == [["the", "cat", "sees", "a", "zebra", "."], ["dog", "sleeps"]]
    assert trees[0].heads == [2, 3, 0, 5, 3, 3] and trees[1].heads == [2, 0]
    assert trees[0].upos[-1] == "PUNCT" and trees[1].relations == ["nsubj:pass", "root"]
    assert [t.line for t in trees] == [3, 13]


def broken(line_number, replacement):
    lines = SAMPLE.splitlines()
    lines[line_number - 1] = replacement
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("line, replacement, message", [
    (4, "2\tcat\tcat\tNOUN\t_\t_\t3\tnsubj\t_", "expected 10 tab-separated columns, got 9"),
    (4, "2\tcat\tcat\tNOUN\t_\t_\tx\tnsubj\t_\t_", "HEAD 'x' is not a word number"),
    (4, "2\tcat\tcat\tNOUN\t_\t_\t_\tnsubj\t_\t_", "without a head"),
    (4, "2\tcat\tcat\tNOUN\t_\t_\t3\t_\t_\t_", "without a relation"),
    (4, "3\tcat\tcat\tNOUN\t_\t_\t3\tnsubj\t_\t_", "word id 3 out of order"),
    (4, "2x\tcat\tcat\tNOUN\t_\t_\t3\tnsubj\t_\t_", "ID '2x' is not a word number"),
    (4, "2\t\tcat\tNOUN\t_\t_\t3\tnsubj\t_\t_", "a word with an empty FORM"),
    (4, "2\tcat\tcat\tNOUN\t_\t_\t9\tnsubj\t_\t_", "head 9 is outside the sentence"),
    (4, "2\tcat\tcat\tNOUN\t_\t_\t2\tnsubj\t_\t_", r"word 2's heads run in a cycle \(2 -> 2\)"),
])
def test_malformed_lines_name_file_and_line(tmp_path, line, replacement, message):
    path = write(tmp_path / "bad.conllu", broken(line, replacement))
    with pytest.raises(XltError, match=message) as err:
        read_conllu(path)
    assert (err.value.path, err.value.line) == (path, line)


def test_a_cycle_of_heads_is_named_at_its_first_word(tmp_path):
    path = write(tmp_path / "cycle.conllu", broken(8, "5\tzebra\tzebra\tNOUN\t_\t_\t4\tobj\t_\t_"))
    with pytest.raises(XltError, match=r"word 4's heads run in a cycle \(4 -> 5 -> 4\)") as err:
        read_conllu(path)
    assert (err.value.path, err.value.line) == (path, 7)


def test_empty_split(tmp_path):
    with pytest.raises(XltError, match="no sentences"):
        read_conllu(write(tmp_path / "e.conllu", "# only a comment\n\n"))


def test_labels_with_and_without_subtypes(tmp_path):
    trees = read_conllu(write(tmp_path / "s.conllu", SAMPLE))
    assert ParseTask().labels(trees) == ["det", "nsubj", "obj", "punct", "root"]
    assert "nsubj:pass" in ParseTask(strip_subtypes=False).labels(trees)
    assert TASKS["parse"] is ParseTask
    with pytest.raises(XltError, match="unknown parse setting"):
        get_task("parse", arc_dims=3)


def random_treebank(rng, n):
    """Random projective-or-not trees over WORDS: each word's head drawn among earlier words or ROOT."""
    out = []
    for s in range(n):
        size = rng.randint(1, 9)
        order = list(range(1, size + 1))
        rng.shuffle(order)
        heads = {order[0]: 0}
        for k, w in enumerate(order[1:], start=1):
            heads[w] = rng.choice(order[:k])
        lines = [f"{w}\t{rng.choice(WORDS)}\t_\t{rng.choice(['NOUN', 'VERB', 'PUNCT'])}\t_\t_\t{heads[w]}\t"
                 f"{'root' if heads[w] == 0 else rng.choice(['det', 'nsubj', 'obj:x'])}\t_\t_"
                 for w in range(1, size + 1)]
        out.append("\n".join(lines) + "\n\n")
    return "".join(out)


def test_batches_point_at_first_subwords_and_gold_nodes(tmp_path):
    task = ParseTask()
    trees = task.read(write(tmp_path / "t.conllu", random_treebank(random.Random(0), 10)))
    labels = task.labels(trees)
    text = make_pipeline(tmp_path / "pipe", WORDS)
    seen = []
    for batch in task.batches(trees, text, labels, 4, 128, False, None):
        assert (batch.input_ids[:, 0] == EOS_ID).all()
        for row, i in enumerate(batch.example_ids):
            tree = trees[i]
            ids, starts = text.encode_words(tree.words)
            n = int(batch.fields["n_words"][row])
            assert n == len(tree.words)
            positions = batch.fields["word_positions"][row, :n]
            assert batch.input_ids[row, positions].tolist() == [ids[s] for s in starts]
            assert batch.fields["heads"][row, :n].tolist() == tree.heads
            assert [labels[r] for r in batch.fields["relations"][row, :n].tolist()] == \
                   [task.relation(r) for r in tree.relations]
            assert (batch.fields["heads"][row, n:] == -100).all()
            seen.append(i)
    assert sorted(seen) == list(range(len(trees)))


def test_long_sentences_keep_the_words_that_fit_and_say_so(tmp_path, monkeypatch):
    task = ParseTask()
    trees = task.read(write(tmp_path / "s.conllu", SAMPLE))
    text = make_pipeline(tmp_path / "pipe", WORDS)
    messages = []
    monkeypatch.setattr(log, "info", messages.append)
    monkeypatch.setattr("xlt.finetune.parse.info", messages.append)
    # "the cat sees a" = the(1) cat(1) s@@ e@@ e@@ s(4) a(1): 7 subwords fit in max_len 9.
    batch, = task.batches(trees, text, task.labels(trees), 2, 9, False, None)
    list(task.batches(trees, text, task.labels(trees), 2, 9, True, torch.Generator()))   # said once per file
    assert batch.fields["n_words"].tolist() == [4, 1]                     # do@@ g s@@ l@@ e@@ e@@ p@@ s: 8
    assert batch.fields["heads"][0].tolist() == [2, 3, 0, -100]          # "a" is headed by zebra, cut off
    assert batch.input_ids.shape[1] == 9
    assert len(messages) == 1 and "2 sentence(s)" in messages[0]
    assert "their last 3 word(s) are left out" in messages[0]
    predictions = {0: [([2, 3, 0, 3], ["det", "nsubj", "root", "det"])], 1: [([2], ["nsubj"])]}
    # Scored (punctuation skipped): the cat sees a zebra dog sleeps = 7; right: the cat sees dog; cut:
    # zebra and sleeps (the results say how many, beside the scores)
    assert task.evaluate(trees, predictions, task.labels(trees)) == pytest.approx(
        {"las": 400 / 7, "uas": 400 / 7, "scored_words": 7, "cut_words": 2})


def test_unseen_relation_counts_as_wrong_not_as_an_error(tmp_path):
    task = ParseTask()
    trees = task.read(write(tmp_path / "s.conllu", SAMPLE))
    labels = ["det", "nsubj", "root"]                    # obj and punct never seen in "training"
    text = make_pipeline(tmp_path / "pipe", WORDS)
    batch = next(task.batches(trees, text, labels, 2, 64, False, None))
    assert batch.fields["relations"][0].tolist()[:6] == [0, 1, 2, 0, -100, -100]
    gold = {i: [(t.heads, [task.relation(r) for r in t.relations])] for i, t in enumerate(trees)}
    assert task.evaluate(trees, gold, labels) == {"las": 100.0, "uas": 100.0, "scored_words": 7.0, "cut_words": 0.0}


def test_biaffine_head_overfits_and_decodes_trees(tmp_path):
    task = get_task("parse", dropout=0.0, arc_dim=64, label_dim=32)
    trees = task.read(write(tmp_path / "t.conllu", random_treebank(random.Random(1), 6)))
    labels = task.labels(trees)
    text = make_pipeline(tmp_path / "pipe", WORDS)
    encoder = tiny_encoder(len(text.vocab))
    torch.manual_seed(0)
    head = task.make_head(encoder.config.d_model, labels)
    batches = list(task.batches(trees, text, labels, 3, 64, False, None))
    first = batches[0]
    scores = head(encoder(first.input_ids, "en", first.padding_mask).last_hidden_state, first)
    n = first.fields["word_positions"].shape[1]
    assert scores.arcs.shape == (3, n + 1, n + 1)
    losses = train_steps(task, head, encoder, batches, 25)
    assert losses[-1] < 0.1 * losses[0]
    predictions = predict(head, encoder, batches)
    for i, tree in enumerate(trees):
        (heads, relations), = predictions[i]
        assert len(heads) == len(relations) == len(tree.words)
        assert heads.count(0) == 1 and set(relations) <= set(labels)
    assert task.evaluate(trees, predictions, labels) == {"las": 100.0, "uas": 100.0, "scored_words": 24.0,
                                                         "cut_words": 0.0}
    # Scores made under bf16 autocast (the default on a GPU) decode through the fp32 relation layers.
    assert task.evaluate(trees, predict(head, encoder, batches, bf16=True), labels)["las"] >= 90.0
    with torch.autocast("cpu", dtype=torch.bfloat16):  # and they train there (xlt finetune --precision bf16)
        loss = head.loss(head(encoder(first.input_ids, "en", first.padding_mask).last_hidden_state, first), first)
    loss.backward()
    assert torch.isfinite(loss) and head.rel_bilinear.weight.grad is not None


def test_relation_scores_are_the_textbook_bilinear_plus_linear():
    """The einsum relation scorer against nn.Bilinear's own forward, values and gradients, with
    heads drawn at random (padding rows included: heads -1 are clamped to ROOT)."""
    torch.manual_seed(0)
    labels = [f"rel{i}" for i in range(7)]
    head = ParseTask(arc_dim=8, label_dim=5).make_head(6, labels)
    nn.init.normal_(head.rel_bilinear.weight)
    nn.init.normal_(head.rel_bilinear.bias)
    B, n = 3, 4
    dep_rel = torch.randn(B, n + 1, 5, requires_grad=True)
    head_rel = torch.randn(B, n + 1, 5, requires_grad=True)
    heads = torch.randint(-1, n + 1, (B, n))
    scores = ParseScores(torch.zeros(B, n + 1, n + 1), dep_rel, head_rel)
    got = head.relation_scores(scores, heads)
    gathered = torch.stack([head_rel[b, heads[b].clamp(min=0)] for b in range(B)])
    dep = dep_rel[:, 1:]
    want = head.rel_bilinear(dep, gathered) + head.rel_linear(torch.cat([dep, gathered], -1))
    assert got.shape == (B, n, len(labels))
    torch.testing.assert_close(got, want)
    weights = torch.randn_like(want)
    grads = torch.autograd.grad((got * weights).sum(), [dep_rel, head_rel, head.rel_bilinear.weight])
    want_grads = torch.autograd.grad((want * weights).sum(), [dep_rel, head_rel, head.rel_bilinear.weight])
    for g, w in zip(grads, want_grads):
        torch.testing.assert_close(g, w)
    # Under bf16 autocast (a GPU's default) the bilinear form stays fp32, as nn.Bilinear's was: with the
    # linear part zeroed, the scores are the fp32 ones to fp32 precision (bf16 would miss by ~1e-2).
    nn.init.zeros_(head.rel_linear.weight)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed = head.relation_scores(scores, heads)
    torch.testing.assert_close(mixed, head.rel_bilinear(dep, gathered))


def test_mirror_treebanks_read_whole(mirror):
    task = ParseTask()
    dev = task.read(str(mirror / "ud" / "en_ewt" / "en_ewt-ud-dev.conllu"))
    assert len(dev) == 2002 and sum(len(t.words) for t in dev) == 25148
    for treebank in ("fr_gsd", "ru_gsd", "zh_gsdsimp", "de_gsd"):
        trees = task.read(str(mirror / "ud" / treebank / f"{treebank}-ud-test.conllu"))
        assert all(t.heads.count(0) >= 1 for t in trees)
