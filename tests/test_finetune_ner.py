"""NER task: file layouts, IOB1 -> IOB2, overlapping windows, first-subword batches, the tagger, span F1."""

from __future__ import annotations

import random

import pytest
import torch
from finetune_fixtures import make_pipeline, predict, tiny_encoder, train_steps

from xlt.finetune.ner import NERTask, Window, iob1_to_iob2, plan_windows, read_tagged
from xlt.finetune.ordering import epoch_order, epoch_steps, example_sizes, ordered_batches
from xlt.finetune.registry import get_task
from xlt.text.vocab import EOS_ID
from xlt.utils.errors import XltError

WORDS = "the cat dog zebra a sees eats sleeps".split()


def write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


def conll(sentences, template="{w}\t{t}"):
    return "".join("".join(template.format(w=w, t=t) + "\n" for w, t in s) + "\n" for s in sentences)


# ---- reading -----------------------------------------------------------------------------------
@pytest.mark.parametrize("tags, iob2", [
    (["I-PER", "I-PER", "O", "I-LOC", "B-LOC", "I-LOC"], ["B-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC"]),
    (["I-PER", "I-LOC"], ["B-PER", "B-LOC"]),
    (["B-PER", "I-PER", "O", "B-LOC"], ["B-PER", "I-PER", "O", "B-LOC"]),      # IOB2 stays as it is
])
def test_iob1_to_iob2(tags, iob2):
    assert iob1_to_iob2(tags) == iob2


def test_wikiann_prefix_is_stripped(tmp_path):
    path = write(tmp_path / "train", "en:R.H.\tB-ORG\nen:Saunders\tI-ORG\nen:(\tO\n\n\n"
                                     "en:;\tO\nen:en:x\tB-PER\n")          # no final blank line
    sentences = read_tagged(path)
    assert [s.words for s in sentences] == [["R.H.", "Saunders", "("], [";", "en:x"]]
    assert [s.tags for s in sentences] == [["B-ORG", "I-ORG", "O"], ["O", "B-PER"]]
    assert [s.line for s in sentences] == [1, 6]


def test_a_colon_word_outside_wikiann_is_kept(tmp_path):
    sentences = read_tagged(write(tmp_path / "t", "re:Invent\tB-MISC\nthere\tO\n"))
    assert sentences[0].words == ["re:Invent", "there"]


def test_conll2003_iob1_columns_and_docstart(tmp_path):
    text = ("-DOCSTART- -X- -X- O\n\n"
            "EU NNP B-NP I-ORG\nrejects VBZ B-VP O\nGerman JJ B-NP I-MISC\n\n"
            "Peter NNP B-NP I-PER\nBlackburn NNP I-NP I-PER\n\n")
    sentences = read_tagged(write(tmp_path / "eng.train", text))
    assert [s.words for s in sentences] == [["EU", "rejects", "German"], ["Peter", "Blackburn"]]
    assert [s.tags for s in sentences] == [["B-ORG", "O", "B-MISC"], ["B-PER", "I-PER"]]


def test_msra_characters(tmp_path):
    sentences = read_tagged(write(tmp_path / "msra", conll([[("中", "B-ORG"), ("共", "I-ORG"), ("致", "O")]])))
    assert sentences[0].words == ["中", "共", "致"] and sentences[0].tags == ["B-ORG", "I-ORG", "O"]


def test_universal_ner_numbered_columns_with_comments(tmp_path):
    text = ("# newdoc id = batch-0000\n# sent_id = batch-0000-0001\n# text = 同样施力\n"
            "1\t同样\tO\t-\t-\n2\t施力\tB-LOC\t-\tlinpq\n\n"
            "# sent_id = 2\n# text = 看\n1\t看\tI-PER\t-\t-\n\n")
    sentences = read_tagged(write(tmp_path / "zh.iob2", text))
    assert [s.words for s in sentences] == [["同样", "施力"], ["看"]]
    assert [s.tags for s in sentences] == [["O", "B-LOC"], ["B-PER"]]
    assert [s.line for s in sentences] == [4, 9]


def test_zero_based_numbering_wikineural(tmp_path):
    sentences = read_tagged(write(tmp_path / "val.conllu", "0\tHer\tO\n1\tvisit\tO\n2\tTuvalu\tB-LOC\n\n"))
    assert sentences[0].words == ["Her", "visit", "Tuvalu"]


@pytest.mark.parametrize("text, line, message", [
    ("a\tO\nb\tX-PER\n", 2, "bad tag 'X-PER'"),
    ("a\tO\nb\tS-PER\n", 2, "IOBES"),
    ("a\tO\n\nb\tx\tO\n", 3, "expected 2 columns"),
    ("a\n", 1, "at least two columns"),
    ("en:a\tO\n\nb\tO\n", 3, "'en:'-prefixed"),
    ("1\ta\tO\n2\tb\tO\n\n1\tc\tO\n3\td\tO\n", 4, "numbered tokens"),
])
def test_malformed_files_name_file_and_line(tmp_path, text, line, message):
    path = write(tmp_path / "bad", text)
    with pytest.raises(XltError, match=message) as err:
        read_tagged(path)
    assert (err.value.path, err.value.line) == (path, line)


def test_empty_split(tmp_path):
    with pytest.raises(XltError, match="no sentences"):
        read_tagged(write(tmp_path / "empty", "\n\n# text = x\n"))


def test_unknown_label_in_dev_names_file_and_line(tmp_path):
    task = NERTask()
    train = task.read(write(tmp_path / "train", conll([[("the", "B-PER"), ("cat", "O")]])))
    dev = task.read(write(tmp_path / "dev", conll([[("a", "O")], [("the", "O"), ("zebra", "B-LOC")]])))
    labels = task.labels(train)
    assert labels == ["O", "B-PER", "I-PER"]
    text = make_pipeline(tmp_path / "pipe", WORDS)
    with pytest.raises(XltError, match="'B-LOC' was not seen in training") as err:
        next(task.batches(dev, text, labels, 8, 32, False, None))
    assert (err.value.path, err.value.line) == (str(tmp_path / "dev"), 4)
    with pytest.raises(XltError, match="not seen in training"):
        task.evaluate(dev, {0: [[(0, "O")]], 1: [[(0, "O"), (1, "O")]]}, labels)


# ---- windows -----------------------------------------------------------------------------------
def check_windows(lengths, budget, owner):
    windows = plan_windows(lengths, budget, owner)
    clipped = [min(n, budget) for n in lengths]
    owned = [w for window in windows for w in window.owned]
    assert owned == list(range(len(lengths)))                       # every word exactly once, in order
    previous_end = 0
    for window in windows:
        assert sum(clipped[window.first:window.end]) <= budget
        assert window.first <= window.owned[0] and window.owned[-1] < window.end
        assert window.end > previous_end                              # always something new
        previous_end = window.end
    assert windows[-1].end == len(lengths) and windows[0].first == 0
    return windows


def context(lengths, budget, window, w):
    clipped = [min(n, budget) for n in lengths]
    left = sum(clipped[window.first:w]) if window.first > 0 else float("inf")
    right = sum(clipped[w:window.end]) - 1 if window.end < len(lengths) else float("inf")
    return min(left, right)


def test_windows_put_every_word_back_exactly_once():
    rng = random.Random(0)
    for _ in range(3000):
        lengths = [rng.choice([1, 1, 1, 2, 3, rng.randint(1, 12)]) for _ in range(rng.randint(1, 40))]
        budget = rng.randint(1, 24)
        check_windows(lengths, budget, "first")
        check_windows(lengths, budget, "center")


def test_owners_first_and_center():
    rng = random.Random(1)
    for _ in range(500):
        lengths = [rng.randint(1, 4) for _ in range(rng.randint(1, 30))]
        budget = rng.randint(4, 16)
        # "first" keeps every window (each takes a new word, which it owns), so it lists all candidates.
        every = plan_windows(lengths, budget, "first")
        first_owner = {w: k for k, window in enumerate(every) for w in window.owned}
        for k, window in enumerate(every):
            for w in range(window.first, window.end):
                assert first_owner[w] <= k
        for window in plan_windows(lengths, budget, "center"):
            assert (window.first, window.end) in {(v.first, v.end) for v in every}
            for w in window.owned:
                best = max(context(lengths, budget, v, w) for v in every if v.first <= w < v.end)
                assert context(lengths, budget, window, w) == best


def test_a_short_sentence_is_one_window_and_overlap_is_half_a_window():
    assert plan_windows([1, 2, 1], 10) == [Window(0, 3, (0, 1, 2))]
    windows = plan_windows([1] * 10, 4, "first")
    assert [(w.first, w.end) for w in windows] == [(0, 4), (2, 6), (4, 8), (6, 10)]
    assert [w.owned for w in windows] == [(0, 1, 2, 3), (4, 5), (6, 7), (8, 9)]
    center = plan_windows([1] * 10, 4, "center")
    assert [w.owned for w in center] == [(0, 1, 2), (3, 4), (5, 6), (7, 8, 9)]


# ---- batches and head --------------------------------------------------------------------------
def sentences(rng, n):
    out = []
    for _ in range(n):
        size = rng.randint(1, 12)
        out.append([(rng.choice(WORDS), rng.choice(["O", "O", "B-PER", "I-PER", "B-LOC"])) for _ in range(size)])
    return out


@pytest.mark.parametrize("max_len", [64, 9, 4])
def test_batches_point_at_every_words_first_subword_once(tmp_path, max_len):
    task = NERTask()
    data = task.read(write(tmp_path / "train", conll(sentences(random.Random(max_len), 12))))
    labels = task.labels(data)
    text = make_pipeline(tmp_path / "pipe", WORDS)
    seen: dict[int, list[int]] = {}
    for batch in task.batches(data, text, labels, 5, max_len, False, None):
        assert batch.input_ids.shape[1] <= max_len
        assert (batch.input_ids[:, 0] == EOS_ID).all()
        for row, example_id in enumerate(batch.example_ids):
            sentence = data[example_id]
            ids, starts = text.encode_words(sentence.words)
            for position, w, tag in zip(batch.fields["word_positions"][row].tolist(),
                                        batch.fields["word_index"][row].tolist(), batch.fields["tags"][row].tolist()):
                if w < 0:
                    assert tag == -100
                    continue
                assert batch.input_ids[row, position] == ids[starts[w]]
                assert labels[tag] == sentence.tags[w]
                seen.setdefault(example_id, []).append(w)
    assert {i: sorted(ws) for i, ws in seen.items()} == {i: list(range(len(s.words))) for i, s in enumerate(data)}


def test_tagger_overfits_and_windows_merge_back(tmp_path):
    task = get_task("ner", dropout=0.0)
    data = task.read(write(tmp_path / "train", conll(sentences(random.Random(3), 6))))
    labels = task.labels(data)
    text = make_pipeline(tmp_path / "pipe", WORDS)
    encoder = tiny_encoder(len(text.vocab))
    torch.manual_seed(0)
    head = task.make_head(encoder.config.d_model, labels)
    batches = list(task.batches(data, text, labels, 4, 12, False, None))      # long sentences -> windows
    assert sum(len(b.example_ids) for b in batches) > len(data)
    logits = head(encoder(batches[0].input_ids, "en", batches[0].padding_mask).last_hidden_state, batches[0])
    assert logits.shape == (*batches[0].fields["word_positions"].shape, len(labels))
    losses = train_steps(task, head, encoder, batches, 30)
    assert losses[-1] < 0.2 * losses[0]
    predictions = predict(head, encoder, batches)
    merged = [task.predicted_tags(s, predictions[i]) for i, s in enumerate(data)]
    assert [len(m) for m in merged] == [len(s.words) for s in data]
    assert task.evaluate(data, predictions, labels)["f1"] == 100.0


def test_an_epoch_has_as_many_steps_as_counted_windows_included(tmp_path):
    """The learning-rate schedule's length is counted from the rows (windows) each sentence becomes."""
    task = NERTask()
    data = task.read(write(tmp_path / "train", conll(sentences(random.Random(3), 9))))
    labels = task.labels(data)
    text = make_pipeline(tmp_path / "pipe", WORDS)
    sizes = example_sizes(task, data, text, labels, 12)
    assert sum(sizes.rows) > len(data)                                 # some sentences are cut
    order = epoch_order(len(data), 0, 5, None)
    batches = [ob.batch for ob in ordered_batches(task, data, order, text, labels, 4, 12)]
    assert epoch_steps(sizes.rows, order, 4) == len(batches) > -(-len(data) // 4)
    rows = [0] * len(data)
    for batch in batches:
        for i in batch.example_ids:
            rows[i] += 1
    assert rows == sizes.rows


def test_evaluate_applies_the_chosen_postprocessing_and_f1_mode(tmp_path):
    data = NERTask().read(write(tmp_path / "dev", conll([[("the", "B-PER"), ("cat", "I-PER"), ("a", "O")]])))
    labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    windows = {0: [[(2, "O")], [(0, "I-LOC"), (1, "I-PER")]]}     # rows in any order, words anywhere
    assert get_task("ner").evaluate(data, windows, labels)["f1"] == 100.0    # -> B-PER I-PER O
    assert get_task("ner", postprocess="none").evaluate(data, windows, labels)["f1"] == 0.0
    lone = {0: [[(0, "I-PER"), (1, "I-PER"), (2, "O")]]}
    assert get_task("ner", postprocess="none").evaluate(data, lone, labels)["f1"] == 100.0
    assert get_task("ner", postprocess="none", f1_mode="strict").evaluate(data, lone, labels)["f1"] == 0.0
    with pytest.raises(ValueError, match="no prediction"):
        get_task("ner").evaluate(data, {0: [[(0, "O")]]}, labels)
    with pytest.raises(XltError, match="window_owner"):
        get_task("ner", window_owner="last")


def test_mirror_wikiann_and_msra(mirror):
    task = NERTask()
    dev = task.read(str(mirror / "ner" / "wikiann" / "en" / "dev"))
    assert len(dev) == 10000 and dev[0].words[:2] == ["Sioux", "Falls"]
    assert task.labels(dev) == ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"]
    msra = task.read(str(mirror / "ner" / "msra" / "msra_test_char_bio.txt"))
    assert len(msra) == 4631 and all(len(w) == 1 for s in msra[:50] for w in s.words)


def test_later_epochs_reuse_the_encodings(tmp_path, monkeypatch):
    task = NERTask()
    data = task.read(write(tmp_path / "train", conll(sentences(random.Random(4), 7))))
    text = make_pipeline(tmp_path / "pipe", WORDS)
    calls = []
    encode = text.encode_words
    monkeypatch.setattr(text, "encode_words", lambda words: calls.append(words) or encode(words))
    for epoch in range(3):
        gen = torch.Generator().manual_seed(epoch)
        list(task.batches(list(data), text, task.labels(data), 3, 32, True, gen))
    assert len(calls) == len(data)
