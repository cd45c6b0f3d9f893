"""XNLI task: reading, truncation, batches, the first-token classifier, accuracy."""

from __future__ import annotations

import random

import pytest
import torch
from finetune_fixtures import make_pipeline, predict, tiny_encoder, train_steps

from xlt.finetune.registry import TASKS, get_task
from xlt.finetune.xnli import NLI_LABELS, XNLITask, truncate_pair
from xlt.model.xlt_run import PretrainedRun
from xlt.text.pipeline import model_input
from xlt.text.vocab import EOS_ID
from xlt.utils.errors import XltError

WORDS = "the cat dog zebra a sees eats sleeps".split()
PAIRS = [("the cat sees a dog", "a cat sees", "entailment"),
         ("the zebra eats", "the dog sleeps", "neutral"),
         ("a dog sleeps", "the dog eats a zebra", "contradiction"),
         ("the cat eats", "the cat eats", "entailment"),
         ("zebra", "the zebra sleeps", "neutral"),
         ("a cat", "a dog", "contradiction")]


def write_tsv(path, pairs):
    path.write_text("".join(f"{p}\t{h}\t{l}\n" for p, h, l in pairs), encoding="utf-8")
    return str(path)


@pytest.fixture
def text(tmp_path):
    return make_pipeline(tmp_path / "pipe", WORDS)


def test_read_keeps_every_pair_with_its_line(tmp_path):
    examples = XNLITask().read(write_tsv(tmp_path / "train.tsv", PAIRS))
    assert [(e.premise, e.hypothesis, e.label) for e in examples] == PAIRS
    assert [e.line for e in examples] == list(range(1, len(PAIRS) + 1))


@pytest.mark.parametrize("line, message", [
    ("a cat\ta dog", "got 2 column"),
    ("a cat\ta dog\tneutral\textra", "got 4 column"),
    ("a cat\ta dog\tcontradictory", "unknown label 'contradictory'"),
    ("\ta dog\tneutral", "empty premise"),
])
def test_malformed_lines_name_file_and_line(tmp_path, line, message):
    path = tmp_path / "dev.tsv"
    path.write_text(f"a\tb\tneutral\n{line}\n", encoding="utf-8")
    with pytest.raises(XltError, match=message) as err:
        XNLITask().read(str(path))
    assert (err.value.path, err.value.line) == (str(path), 2)


def test_empty_split_is_an_error(tmp_path):
    path = tmp_path / "empty.tsv"
    path.write_text("", encoding="utf-8")
    with pytest.raises(XltError, match="no examples") as err:
        XNLITask().read(str(path))
    assert err.value.path == str(path)


def test_the_cli_reports_a_bad_tsv_in_one_line(tmp_path):
    """The error path the CLI shows: file and line in one line (through XltError's str)."""
    path = tmp_path / "dev.tsv"
    path.write_text("a\tb\n", encoding="utf-8")
    with pytest.raises(XltError) as err:
        XNLITask().read(str(path))
    assert str(err.value).startswith(f"{path}:1: expected premise")


def reference_truncation(a, b, budget):
    a, b = list(a), list(b)
    while len(a) + len(b) > budget:
        if len(a) > len(b):
            a.pop()
        else:
            b.pop()
    return a, b


def test_truncation_is_longest_first_one_subword_at_a_time():
    rng = random.Random(0)
    for _ in range(2000):
        a = list(range(rng.randint(1, 40)))
        b = list(range(100, 100 + rng.randint(1, 40)))
        budget = rng.randint(2, 90)
        assert truncate_pair(a, b, budget) == reference_truncation(a, b, budget), (len(a), len(b), budget)


def test_batches_pad_and_lay_out_premise_then_hypothesis(tmp_path, text):
    task = XNLITask()
    examples = task.read(write_tsv(tmp_path / "t.tsv", PAIRS))
    labels = task.labels(examples)
    batches = list(task.batches(examples, text, labels, 4, 64, False, None))
    assert [b.example_ids for b in batches] == [[0, 1, 2, 3], [4, 5]]
    for batch in batches:
        for row, i in enumerate(batch.example_ids):
            a, b = text.encode_lines([examples[i].premise, examples[i].hypothesis])
            expected = model_input(a, b)
            n = len(expected)
            assert batch.input_ids[row, :n].tolist() == expected
            assert batch.input_ids[row, 0] == EOS_ID
            pad = batch.padding_mask[row] if batch.padding_mask is not None else torch.zeros(n, dtype=torch.bool)
            assert not pad[:n].any() and pad[n:].all()
        assert batch.fields["label"].tolist() == [labels.index(examples[i].label) for i in batch.example_ids]


def test_long_pairs_are_cut_to_max_len(tmp_path, text):
    task = XNLITask()
    long = " ".join(["zebra"] * 30)
    examples = task.read(write_tsv(tmp_path / "t.tsv", [(long, "the cat", "neutral")]))
    batch = next(task.batches(examples, text, task.labels(examples), 8, 20, False, None))
    row = batch.input_ids[0].tolist()
    assert len(row) == 20 and row.count(EOS_ID) == 3 and row[-1] == EOS_ID
    assert row[-3:-1] == text.encode_lines(["the cat"])[0]          # the short hypothesis survives whole


def test_shuffle_follows_the_generator(tmp_path, text):
    task = XNLITask()
    examples = task.read(write_tsv(tmp_path / "t.tsv", PAIRS * 3))
    labels = task.labels(examples)

    def order(seed):
        gen = torch.Generator().manual_seed(seed)
        return [i for b in task.batches(examples, text, labels, 5, 64, True, gen) for i in b.example_ids]

    assert order(1) == order(1) and order(1) != order(2)
    assert sorted(order(1)) == list(range(len(examples)))


def test_head_overfits_a_handful_of_pairs(tmp_path, text):
    task = get_task("xnli", dropout=0.0)
    examples = task.read(write_tsv(tmp_path / "t.tsv", PAIRS))
    labels = task.labels(examples)
    encoder = tiny_encoder(len(text.vocab))
    torch.manual_seed(0)
    head = task.make_head(encoder.config.d_model, labels)
    batches = list(task.batches(examples, text, labels, 4, 64, False, None))
    logits = head(encoder(batches[0].input_ids, "en", batches[0].padding_mask).last_hidden_state, batches[0])
    assert logits.shape == (4, 3)
    losses = train_steps(task, head, encoder, batches, 40)
    assert losses[-1] < 0.2 * losses[0]
    predictions = predict(head, encoder, batches)
    assert all(len(rows) == 1 and rows[0] in NLI_LABELS for rows in predictions.values())
    assert task.evaluate(examples, predictions, labels) == {"accuracy": 100.0}


def test_mean_pooling_reads_every_input_state_and_no_padding(tmp_path, text):
    task = get_task("xnli", dropout=0.0, pooling="mean")
    examples = task.read(write_tsv(tmp_path / "t.tsv", PAIRS))
    labels = task.labels(examples)
    batch = next(task.batches(examples, text, labels, 4, 64, False, None))
    assert batch.padding_mask is not None  # rows of different lengths
    head = task.make_head(8, labels)
    hidden = torch.randn(*batch.input_ids.shape, 8)
    lengths = (~batch.padding_mask).sum(1)
    expected = torch.stack([hidden[row, :n].mean(0) for row, n in enumerate(lengths.tolist())])
    torch.testing.assert_close(head(hidden, batch), head.classifier(expected))
    hidden[batch.padding_mask] = 1e6  # whatever sits at the pads is not read
    torch.testing.assert_close(head(hidden, batch), head.classifier(expected))
    first = get_task("xnli", dropout=0.0).make_head(8, labels)
    first.load_state_dict(head.state_dict())
    torch.testing.assert_close(first(hidden, batch), first.classifier(hidden[:, 0]))
    with pytest.raises(XltError, match="pooling must be one of first, mean, pair-max, got 'max'"):
        get_task("xnli", pooling="max")


def test_evaluate_is_accuracy_in_percent(tmp_path):
    task = XNLITask()
    examples = task.read(write_tsv(tmp_path / "t.tsv", PAIRS[:4]))
    predictions = {0: ["entailment"], 1: ["neutral"], 2: ["neutral"], 3: ["contradiction"]}
    assert task.evaluate(examples, predictions, list(NLI_LABELS)) == {"accuracy": 50.0}


def test_registry_knows_the_tasks_and_refuses_typos():
    assert TASKS["xnli"] is XNLITask
    assert get_task("xnli", dropout=0.2).settings.dropout == 0.2
    with pytest.raises(XltError, match="unknown task 'nli'"):
        get_task("nli")
    with pytest.raises(XltError, match="unknown xnli setting.*dropuot"):
        get_task("xnli", dropuot=0.2)


def test_mirror_splits_read_whole(mirror):
    task = XNLITask()
    dev = task.read(str(mirror / "xnli" / "dev-fr.tsv"))
    assert len(dev) == 2490 and {e.label for e in dev} == set(NLI_LABELS)
    assert len(task.read(str(mirror / "nli" / "mnli" / "mnli_20k.tsv"))) == 20021


@pytest.fixture(scope="module")
def pretrained(tiny_run):
    return PretrainedRun.load(tiny_run, "last")


def test_end_to_end_on_a_pretrained_run(tmp_path, pretrained):
    """Read, batch through the run's own text pipeline, encode, decode, evaluate: every pair predicted."""
    task = XNLITask()
    examples = task.read(write_tsv(tmp_path / "t.tsv", [("the cat sees the dog .", "le chat voit", "neutral")] * 3))
    labels = task.labels(examples)
    head = task.make_head(pretrained.config.d_model, labels)
    batches = list(task.batches(examples, pretrained.text("en"), labels, 2, 32, False, None))
    predictions: dict[int, list] = {}
    with torch.no_grad():
        for batch in batches:
            hidden = pretrained.model.encoder(batch.input_ids, "en", batch.padding_mask).last_hidden_state
            for i, row in zip(batch.example_ids, head.decode(head(hidden, batch), batch)):
                predictions.setdefault(i, []).append(row)
    assert sorted(predictions) == [0, 1, 2]
    assert 0.0 <= task.evaluate(examples, predictions, labels)["accuracy"] <= 100.0
