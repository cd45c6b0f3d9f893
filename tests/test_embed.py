"""xlt embed: the word2vec text format, Word2Vec through gensim, GloVe against its objective by hand."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from conftest import assert_one_line_error, run_xlt

from xlt.embed.config import EmbedConfig
from xlt.embed.corpus import JointCorpus
from xlt.embed.formats import cosine, read_word2vec, write_word2vec
from xlt.embed.glove import cooccurrence, fit_glove, glove_objective, weighting
from xlt.embed.train import train_embeddings
from xlt.utils.errors import XltError

TOPICS = {"en": [["apple", "banana", "cherry", "eat", "sweet"], ["car", "truck", "bus", "drive", "road"]],
          "fr": [["pomme", "banane", "cerise", "manger", "sucre"], ["voiture", "camion", "autobus", "conduire", "route"]]}


def topic_corpus(path, lang, n=600, seed=0):
    """Each line: 6 words drawn from one topic, so words of a topic co-occur and never across topics."""
    rng = random.Random(seed)
    lines = [" ".join(rng.choice(TOPICS[lang][t]) for _ in range(6)) for t in (rng.randrange(2) for _ in range(n))]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# ---- the word2vec text format ------------------------------------------------------------------

def test_word2vec_format_round_trip_and_max_words(tmp_path):
    words = ["the", "chat", "été", "@@x"]
    vectors = np.arange(12, dtype=np.float32).reshape(4, 3) / 7
    write_word2vec(tmp_path / "e.txt", words, vectors)
    assert (tmp_path / "e.txt").read_text(encoding="utf-8").splitlines()[0] == "4 3"
    emb = read_word2vec(tmp_path / "e.txt")
    assert emb.words == words and emb.row["été"] == 2
    assert np.allclose(emb.vectors, vectors, rtol=1e-5)
    assert read_word2vec(tmp_path / "e.txt", max_words=2).words == ["the", "chat"]
    with pytest.raises(XltError, match="whitespace"):
        write_word2vec(tmp_path / "bad.txt", ["a b"], np.zeros((1, 3)))
    assert not (tmp_path / "bad.txt").exists()


@pytest.mark.parametrize("content, line, message", [
    ("2 3 1\na 1 2 3\nb 1 2 3\n", 1, "header"),
    ("2\na 1 2 3\nb 1 2 3\n", 1, "header"),
    ("2 3\na 1 2 3\nb 1 2\n", 3, "expected a word and 3 values"),
    ("2 3\na 1 2 3\nb 1 x 3\n", 3, "not a number"),
    ("2 3\na 1 2 3\na 1 2 3\n", 3, "already has a vector"),
    ("2 3\na 1 2 3\nb 1 2 3\nc 1 2 3\n", 4, "more rows"),
])
def test_bad_embedding_files_name_the_line(tmp_path, content, line, message):
    path = tmp_path / "e.txt"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(XltError, match=message) as error:
        read_word2vec(path)
    assert error.value.path == str(path) and error.value.line == line


def test_short_and_non_utf8_embedding_files(tmp_path):
    (tmp_path / "short.txt").write_text("3 2\na 1 2\n", encoding="utf-8")
    with pytest.raises(XltError, match="announces 3 rows, the file has 1"):
        read_word2vec(tmp_path / "short.txt")
    (tmp_path / "latin1.txt").write_bytes("1 2\nd\xe9j\xe0 1 2\n".encode("latin-1"))
    with pytest.raises(XltError, match="UTF-8") as error:
        read_word2vec(tmp_path / "latin1.txt")
    assert error.value.line == 2


# ---- the joint corpus ------------------------------------------------------------------------------

def test_joint_corpus_interleaves_languages_and_skips_blank_lines(tmp_path):
    (tmp_path / "en").write_text("a b\n\nc\nd\n", encoding="utf-8")
    (tmp_path / "fr").write_text("x\ny z\n", encoding="utf-8")
    corpus = JointCorpus([("en", str(tmp_path / "en")), ("fr", str(tmp_path / "fr"))])
    assert list(corpus) == [["a", "b"], ["x"], ["y", "z"], ["c"], ["d"]]
    assert list(corpus) == list(corpus)  # restartable: one pass per epoch
    assert [d["sentences"] for d in corpus.describe()] == [3, 2]


# ---- Word2Vec ------------------------------------------------------------------------------------

def test_word2vec_puts_co_occurring_words_nearer(tmp_path):
    texts = [(lang, str(topic_corpus(tmp_path / f"{lang}.txt", lang, seed=i))) for i, lang in enumerate(TOPICS)]
    config = EmbedConfig(method="word2vec", dim=16, window=3, epochs=10, min_count=1, workers=1,
                         architecture="skipgram")
    description = train_embeddings(texts, str(tmp_path / "w2v.txt"), config)
    emb = read_word2vec(tmp_path / "w2v.txt")
    assert description["vocabulary"] == len(emb.words) == 20 and emb.dim == 16
    for lang, (fruit, road) in TOPICS.items():
        same = np.mean([cosine(emb.vectors[emb.row[a]], emb.vectors[emb.row[b]])
                        for a in fruit for b in fruit if a != b])
        across = np.mean([cosine(emb.vectors[emb.row[a]], emb.vectors[emb.row[b]]) for a in fruit for b in road])
        assert same > across + 0.3, (lang, same, across)
    saved = json.loads((tmp_path / "w2v.txt.json").read_text())
    assert saved["format"] == "xlt-embeddings" and saved["versions"]["gensim"]
    assert [i["lang"] for i in saved["inputs"]] == ["en", "fr"] and len(saved["inputs"][0]["sha256"]) == 64
    assert "x_max" not in saved["config"] and saved["config"]["architecture"] == "skipgram"


def test_word2vec_progress_follows_gensims_epochs(tmp_path, monkeypatch):
    import contextlib

    import xlt.embed.word2vec as w2v

    bars = {}

    class Recorder:
        def __init__(self):
            self.completed, self.advanced = [], 0

        def advance(self, n=1):
            self.advanced += n

        def update(self, completed=None, **fields):
            if completed is not None:
                self.completed.append(completed)

    @contextlib.contextmanager
    def progress(description, total=None, unit=""):
        bars[description] = Recorder()
        yield bars[description]

    monkeypatch.setattr(w2v.log, "progress", progress)
    corpus = JointCorpus([("en", str(topic_corpus(tmp_path / "en.txt", "en", n=2500)))])
    w2v.train_word2vec(corpus, EmbedConfig(dim=8, epochs=3, min_count=1, workers=1), str(tmp_path))
    assert bars["joint corpus"].advanced == 2500
    # gensim's own end-of-epoch records move the bar: one full epoch each.
    assert bars["word2vec epochs"].completed[-1] == 3 and bars["word2vec epochs"].completed == sorted(
        bars["word2vec epochs"].completed)
    assert not list(tmp_path.glob(".xlt-embed-*"))  # the temporary joint corpus is gone


# ---- GloVe -------------------------------------------------------------------------------------

def test_cooccurrence_counts_by_hand():
    index = {"a": 0, "b": 1, "c": 2}
    # "a b c a" with window 2, and "b b": pairs never cross the line; rare word "z" is skipped
    # before windowing (so "c z a" makes c and a neighbours at distance 1).
    X = cooccurrence([["a", "b", "c", "a"], ["b", "b"], ["c", "z", "a"]], index, window=2).toarray()
    expected = np.zeros((3, 3))
    for i, j, w in [(0, 1, 1), (1, 2, 1), (2, 0, 1), (0, 2, 0.5), (1, 0, 0.5), (1, 1, 1), (2, 0, 1)]:
        expected[i, j] += w
        expected[j, i] += w
    assert np.allclose(X, expected)


def test_glove_objective_by_hand():
    X = sp.csr_matrix(np.array([[0.0, 2.0, 150.0], [2.0, 1.0, 0.0], [150.0, 0.0, 0.5]]))
    rng = np.random.default_rng(0)
    W, C, bw, bc = rng.normal(size=(3, 2)), rng.normal(size=(3, 2)), rng.normal(size=3), rng.normal(size=3)
    by_hand = 0.0
    for i in range(3):
        for j in range(3):
            x = X[i, j]
            if x > 0:
                f = 1.0 if x >= 100 else (x / 100) ** 0.75
                by_hand += f * (W[i] @ C[j] + bw[i] + bc[j] - np.log(x)) ** 2
    assert glove_objective(X, W, C, bw, bc) == pytest.approx(by_hand, rel=1e-12)
    assert weighting(np.array([50.0, 100.0, 300.0])).tolist() == pytest.approx([0.5 ** 0.75, 1.0, 1.0])


def topic_cooccurrences(tmp_path) -> sp.spmatrix:
    """Window-5 co-occurrences of the topic corpora of every language, words in sorted order."""
    texts = [(lang, str(topic_corpus(tmp_path / f"{lang}.txt", lang, seed=i))) for i, lang in enumerate(TOPICS)]
    corpus = JointCorpus(texts)
    words = sorted({w for tokens in corpus for w in tokens})
    return cooccurrence(corpus, {w: r for r, w in enumerate(words)}, window=5)


def test_glove_loss_falls_and_is_the_objective(tmp_path):
    X = topic_cooccurrences(tmp_path)
    config = EmbedConfig(method="glove", dim=8, epochs=15, batch_size=64, min_count=1, workers=1)
    params = fit_glove(X, config)
    assert len(params.loss) == 15 and params.loss[-1] < 0.5 * params.loss[0]
    assert all(b <= a * 1.05 for a, b in zip(params.loss, params.loss[1:]))
    assert params.loss[-1] == pytest.approx(glove_objective(X, params.W, params.C, params.bw, params.bc), rel=1e-9)
    # Same seed, same parameters.
    assert np.array_equal(fit_glove(X, config).W, params.W)


def glove_c(X, config: EmbedConfig) -> np.ndarray:
    """glove.c's update, entry by entry, transcribed (float64; the same initial values and order as
    fit_glove): u = clip(eta * fdiff * other vector), step u / sqrt(G), G += u² (G starts at 1)."""
    coo = sp.coo_matrix(X)
    V, D = X.shape[0], config.dim
    generator = torch.Generator().manual_seed(config.seed)
    W, C, bw, bc = (((torch.rand(*shape, generator=generator) - 0.5) / D).double().numpy()
                    for shape in ((V, D), (V, D), (V,), (V,)))
    GW, GC, Gbw, Gbc = np.ones((V, D)), np.ones((V, D)), np.ones(V), np.ones(V)
    for _ in range(config.epochs):
        for e in torch.randperm(coo.nnz, generator=generator).tolist():
            i, j, x = coo.row[e], coo.col[e], coo.data[e]
            fdiff = min(1.0, (x / config.x_max) ** config.alpha) * (W[i] @ C[j] + bw[i] + bc[j] - np.log(x))
            fdiff *= config.learning_rate
            u1, u2 = np.clip(fdiff * C[j], -100, 100), np.clip(fdiff * W[i], -100, 100)
            W[i] -= u1 / np.sqrt(GW[i])
            C[j] -= u2 / np.sqrt(GC[j])
            GW[i] += u1 * u1
            GC[j] += u2 * u2
            bw[i] -= fdiff / np.sqrt(Gbw[i])
            bc[j] -= fdiff / np.sqrt(Gbc[j])
            Gbw[i] += fdiff * fdiff
            Gbc[j] += fdiff * fdiff
    return W


def test_glove_steps_are_glove_c_s(tmp_path):
    # the squared-gradient sums held plain gradients, not glove.c's learning rate times gradient:
    # steps up to 1/lr = 20 times smaller (J 594 against glove.c's 376 after an epoch)
    X = topic_cooccurrences(tmp_path)
    config = EmbedConfig(method="glove", dim=6, epochs=3, batch_size=1, min_count=1, workers=1)
    assert np.allclose(fit_glove(X, config).W, glove_c(X, config), rtol=1e-4, atol=1e-6)


def test_glove_through_the_cli_separates_topics(tmp_path):
    en, fr = topic_corpus(tmp_path / "en.txt", "en", seed=0), topic_corpus(tmp_path / "fr.txt", "fr", seed=1)
    res = run_xlt("embed", "train", "--method", "glove", "--text", "en", en, "--text", "fr", fr, "--dim", "8",
                  "--window", "5", "--epochs", "20", "--min-count", "1", "--workers", "1", "-o", tmp_path / "g.txt")
    assert res.returncode == 0, res.stderr
    emb = read_word2vec(tmp_path / "g.txt")
    fruit, road = TOPICS["en"]
    near = cosine(emb.vectors[emb.row["apple"]], emb.vectors[emb.row["banana"]])
    far = cosine(emb.vectors[emb.row["apple"]], emb.vectors[emb.row["truck"]])
    assert near > far
    loss = json.loads((tmp_path / "g.txt.json").read_text())["training"]["loss"]
    assert len(loss) == 20 and loss[-1] < loss[0]


def test_embed_train_errors_are_one_line(tmp_path):
    en = topic_corpus(tmp_path / "en.txt", "en")
    assert_one_line_error(run_xlt("embed", "train", "--method", "fasttext", "--text", "en", en, "-o", tmp_path / "o"),
                          "--method must be one of word2vec, glove")
    # found in the pass that describes the corpus, before the start line: the error is the only line
    assert_one_line_error(run_xlt("embed", "train", "--text", "en", en, "--min-count", "100000", "-o",
                                  tmp_path / "o"), "no word occurs at least --min-count 100000 times")
    assert not list(tmp_path.glob("o*"))
    assert_one_line_error(run_xlt("embed", "train", "--text", "en", tmp_path / "missing.txt", "-o", tmp_path / "o"),
                          "missing.txt", "no such text file")
    assert_one_line_error(run_xlt("embed", "train", "--method", "glove", "--device", "gpu", "--text", "en", en, "-o",
                                  tmp_path / "o"), "unknown device 'gpu'")
    assert_one_line_error(run_xlt("embed", "train", "--text", "en", en, "--text", "en", en, "-o", tmp_path / "o"),
                          "a language is given twice")
    # a setting of the other method would be ignored without a word
    assert_one_line_error(run_xlt("embed", "train", "--text", "en", en, "--x-max", "10", "-o", tmp_path / "o"),
                          "--x-max is a glove setting and --method is word2vec")
    assert_one_line_error(run_xlt("embed", "train", "--method", "glove", "--sample", "0", "--text", "en", en, "-o",
                                  tmp_path / "o"), "--sample is a word2vec setting and --method is glove")
    # the corpus is read once per epoch, and the description has nowhere to go beside standard output
    assert_one_line_error(run_xlt("embed", "train", "--text", "en", "-", "-o", tmp_path / "o", input="a b\n"),
                          "--text needs a file, not standard input")
    res = run_xlt("embed", "train", "--text", "en", en, "-o", "-", cwd=tmp_path)
    assert_one_line_error(res, "needs -o FILE")
    assert not (tmp_path / "-.json").exists()
    assert not (tmp_path / "o").exists() and not (tmp_path / "o.json").exists()
