"""xlt align word on embedding files: the joint space (--map none), Procrustes, BPE'd words, POS, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import assert_one_line_error, run_xlt

from xlt.analysis.align import AlignSettings, WordSettings
from xlt.embed.formats import read_word2vec, write_word2vec
from xlt.analysis.static_words import align_static_word
from xlt.utils.errors import XltError

N, D = 40, 12


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A joint file where fr_i is en_i plus noise; a second fr file rotated by a random orthogonal Q;
    dictionaries (train: pairs 0-19, test: pairs 20-39, extra: a BPE'd word); a CoNLL-U file; codes."""
    root = tmp_path_factory.mktemp("static")
    rng = np.random.default_rng(0)
    en = rng.normal(size=(N, D))
    fr = en + 0.01 * rng.normal(size=(N, D))
    en_words, fr_words = [f"w{i}" for i in range(N)], [f"m{i}" for i in range(N)]
    # "chats" exists only as the BPE pieces "chat@@ s", whose mean is exactly the vector of "cats".
    cats, piece = rng.normal(size=D), rng.normal(size=D)
    write_word2vec(root / "joint.txt", en_words + fr_words + ["cats", "chat@@", "s"],
                   np.vstack([en, fr, cats, cats + piece, cats - piece]))
    Q, _ = np.linalg.qr(rng.normal(size=(D, D)))
    write_word2vec(root / "en.txt", en_words, en)
    write_word2vec(root / "fr-rotated.txt", fr_words, fr @ Q)
    (root / "train.txt").write_text("".join(f"w{i} m{i}\n" for i in range(20)), encoding="utf-8")
    (root / "test.txt").write_text("".join(f"w{i} m{i}\n" for i in range(20, N)), encoding="utf-8")
    (root / "bpe.txt").write_text("cats chats\nw1 m1\n", encoding="utf-8")
    (root / "nowhere.txt").write_text("zzz yyy\nqqq www\n", encoding="utf-8")
    (root / "codes").write_text("c h 10\nch a 10\ncha t</w> 10\ncha t 10\n", encoding="utf-8")
    tags = {20: "NOUN", 21: "NOUN", 22: "VERB", 23: "ADP"}
    (root / "ud.conllu").write_text("".join(f"1\tW{i}\tw\t{t}\t_\t_\t0\troot\t_\t_\n\n" for i, t in tags.items()),
                                    encoding="utf-8")
    return root


def word(files, *args):
    return run_xlt("align", "word", "--source-lang", "en", "--target-lang", "fr", *args)


def test_joint_space_without_a_map_is_perfect_here(files):
    res = word(files, "--emb-a", files / "joint.txt", "--map", "none", "--test-dict", files / "test.txt",
               "--pos-from", files / "ud.conllu")
    assert res.returncode == 0, res.stderr
    result = json.loads(res.stdout)
    scores = result["results"][0]
    assert result["map"] == "none" and result["train"] is None and result["test"]["usable"] == 20
    assert scores["mrr"] == 1.0 and scores["ranked"]["p@1"] == 1.0 and scores["mrr_candidates"] == 20
    # NN searches the whole joint space but w_i's own row: its nearest other row is m_i (noise 0.01).
    assert scores["nn"] == {"p@1": 1.0, "p@5": 1.0, "p@10": 1.0} and scores["own_rows_left_out"] == 20
    # By part of speech: W20, W21 NOUN; W22 VERB; W23 ADP (closed); the other 16 untagged.
    pos = scores["by_pos"]
    assert {k: v["queries"] for k, v in pos.items()} == {"NOUN": 2, "VERB": 1, "ADP": 1, "none": 16, "open": 3,
                                                        "closed": 1}
    assert "MRR by UPOS" in res.stderr


def test_nn_and_csls_in_a_joint_space_leave_the_query_itself_out(tmp_path):
    """Against a brute-force search of the whole joint space without the query's own row (kept for a
    pair of one string, whose translation that row is: rank 1, as the MRR ranks it); a neighbourhood
    term of CSLS leaves each row itself out too. The MRR ranks the dictionary's targets by cosine, leaving
    the query's own row out the same way (w3 is w8's gold translation: it ranked itself first)."""
    rng = np.random.default_rng(3)
    en = rng.normal(size=(30, D))
    vectors = np.vstack([en, en + 0.9 * rng.normal(size=en.shape)])  # m_i: w_i plus much noise
    words = [f"w{i}" for i in range(30)] + [f"m{i}" for i in range(30)]
    write_word2vec(tmp_path / "joint.vec", words, vectors)
    pairs = [(f"w{i}", f"m{i}") for i in range(30)] + [("w0", "m1"), ("w5", "w5"), ("w8", "w3")]
    (tmp_path / "dict.txt").write_text("".join(f"{s} {t}\n" for s, t in pairs), encoding="utf-8")
    res = word(None, "--emb-a", tmp_path / "joint.vec", "--map", "none", "--test-dict", tmp_path / "dict.txt")
    assert res.returncode == 0, res.stderr
    scores = json.loads(res.stdout)["results"][0]

    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cos = unit @ unit.T
    others = cos - np.diag(np.full(len(cos), np.inf))
    r = np.sort(others, axis=1)[:, ::-1][:, :10].mean(1)  # r_T = r_S: one space
    row = {w: i for i, w in enumerate(words)}
    gold = {}
    for s, t in pairs:
        gold.setdefault(row[s], set()).add(row[t])
    for method, sim in (("nn", cos), ("csls", 2 * cos - r[:, None] - r[None, :])):
        found = []
        for q, g in gold.items():
            s = sim[q].copy()
            if q not in g:
                s[q] = -np.inf
            found.append([bool(set(np.argsort(-s)[:k]) & g) for k in (1, 5, 10)])
        expected = dict(zip(("p@1", "p@5", "p@10"), np.mean(found, axis=0)))
        assert scores[method] == pytest.approx(expected), method
    assert 0.3 < scores["nn"]["p@1"] < 1  # neither every query itself nor every query right
    candidates = sorted({row[t] for _, t in pairs})
    ranks = [1 + sum(cos[q, c] > max(cos[q, t] for t in g) for c in candidates if c != q or q in g)
             for q, g in gold.items()]
    assert scores["mrr"] == pytest.approx(np.mean(1 / np.array(ranks)))
    assert row["w3"] in candidates  # and w3's own row is one of them, left out of its ranking


def test_rotated_spaces_need_procrustes_and_save_the_map(files, tmp_path):
    args = ["--emb-a", files / "en.txt", "--emb-b", files / "fr-rotated.txt", "--test-dict", files / "test.txt"]
    none = json.loads(word(files, *args, "--map", "none", "--no-csls").stdout)["results"][0]
    assert none["mrr"] < 0.5 and "csls" not in none
    assert_one_line_error(word(files, *args, "--map", "none", "--train-dict", files / "train.txt"),
                          "--map none learns no map: --train-dict would go unused")
    res = word(files, *args, "--train-dict", files / "train.txt", "--save-map", tmp_path / "W.npy",
               "--candidates", "vocabulary", "-o", tmp_path / "r.json")
    assert res.returncode == 0, res.stderr
    result = json.loads((tmp_path / "r.json").read_text())
    scores = result["results"][0]
    assert scores["mrr"] == 1.0 and scores["nn"]["p@1"] == 1.0 and scores["csls"]["p@1"] == 1.0
    assert scores["mrr_candidates"] == N  # --candidates vocabulary: the whole target file
    W = np.load(tmp_path / "W.npy")
    assert W.shape == (D, D) and np.allclose(W @ W.T, np.eye(D), atol=1e-5)
    assert result["saved_map"]["shape"] == [D, D]


def test_bpe_split_words_are_the_mean_of_their_pieces(files):
    common = dict(source_lang="en", target_lang="fr", train_dictionary=None, test_dictionary=str(files / "bpe.txt"),
                  settings=AlignSettings(), word=WordSettings(map="none", csls=False))
    mean = align_static_word(str(files / "joint.txt"), str(files / "joint.txt"), subwords="mean",
                             codes=str(files / "codes"), **common)
    assert mean["test"]["usable"] == 2 and mean["results"][0]["mrr"] == 1.0
    single = align_static_word(str(files / "joint.txt"), str(files / "joint.txt"), subwords="single",
                               codes=str(files / "codes"), **common)
    assert single["test"]["usable"] == 1  # "chats" has no whole-word row
    assert mean["space"]["source_words"] == 2 * N + 2  # "chat@@" is a piece, not a word; + the mean row


def test_errors_are_one_line(files, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("3 12 7\nw0 " + " ".join(["0.1"] * 12) + "\n", encoding="utf-8")
    assert_one_line_error(word(files, "--emb-a", bad, "--map", "none", "--test-dict", files / "test.txt"),
                          f"{bad}:1:", "header")
    assert_one_line_error(word(files, "--emb-a", files / "joint.txt", "--map", "none", "--test-dict",
                               files / "nowhere.txt"), "nowhere.txt", "none of the 2 dictionary pairs")
    assert_one_line_error(word(files, "--emb-a", files / "joint.txt", "--test-dict", files / "test.txt"),
                          "--map procrustes learns W on --train-dict")
    assert_one_line_error(word(files, "--emb-a", files / "joint.txt", "--map", "none", "--save-map",
                               tmp_path / "W.npy", "--test-dict", files / "test.txt"), "--save-map needs --map procrustes")
    assert_one_line_error(word(files, "--map", "none", "--test-dict", files / "test.txt"),
                          "either --model (a run) or --emb-a")
    conllu = tmp_path / "bad.conllu"   # read before the spaces: no progress line comes before the error
    conllu.write_text("1\tw1\tw1\tNOUN\t_\t_\t0\troot\t_\n")
    assert_one_line_error(word(files, "--emb-a", files / "joint.txt", "--map", "none", "--test-dict",
                               files / "test.txt", "--pos-from", conllu), f"{conllu}:1:", "10 tab-separated")
    with pytest.raises(XltError, match="12 dimensions"):
        other = tmp_path / "d3.txt"
        write_word2vec(other, ["m0"] * 1, np.zeros((1, 3)))
        align_static_word(str(files / "joint.txt"), str(other), "en", "fr", None, str(files / "test.txt"),
                          word=WordSettings(map="none"))


def test_drop_identical_removes_pairs_of_one_string(files, tmp_path):
    (tmp_path / "dict.txt").write_text("w1 m1\nw2 w2\nw3 m3\n", encoding="utf-8")
    common = dict(source_lang="en", target_lang="fr", train_dictionary=None, test_dictionary=str(tmp_path / "dict.txt"))
    kept = align_static_word(str(files / "joint.txt"), str(files / "joint.txt"),
                             word=WordSettings(map="none", csls=False), **common)
    assert kept["test"]["usable"] == 3 and "identical_dropped" not in kept["test"]
    dropped = align_static_word(str(files / "joint.txt"), str(files / "joint.txt"),
                                word=WordSettings(map="none", csls=False, drop_identical=True), **common)
    assert dropped["test"]["usable"] == 2 and dropped["test"]["identical_dropped"] == 1
    assert dropped["results"][0]["queries"] == 2


def test_mrr_by_spelling_splits_the_free_pairs_of_a_joint_space_from_the_rest(files, tmp_path):
    """A pair of one string is one row of a joint space: rank 1 whatever the vectors. The breakdown
    scores those queries apart, from the same ranks as the overall MRR (checked by brute force)."""
    pairs = [("w0", "w0"), ("w1", "w1"), ("w20", "m21"), ("w21", "m22"), ("w22", "m20"), ("w23", "m23")]
    (tmp_path / "dict.txt").write_text("".join(f"{s} {t}\n" for s, t in pairs), encoding="utf-8")
    result = align_static_word(str(files / "joint.txt"), str(files / "joint.txt"), "en", "fr", None,
                               str(tmp_path / "dict.txt"), word=WordSettings(map="none", csls=False))
    scores = result["results"][0]
    emb = read_word2vec(files / "joint.txt")
    row = {w: i for i, w in enumerate(emb.words)}
    unit = emb.vectors / np.linalg.norm(emb.vectors, axis=1, keepdims=True)
    candidates = sorted({t for _, t in pairs})
    ranks = {}
    for s, t in pairs:
        cos = {c: float(unit[row[s]] @ unit[row[c]]) for c in candidates}
        ranks[s] = 1 + sum(v > cos[t] for v in cos.values())
    by_hand = {group: [1 / ranks[s] for s, t in pairs if (s == t) == (group == "identical")]
               for group in ("identical", "different")}
    spelling = scores["by_spelling"]
    assert spelling["identical"]["queries"] == 2 and spelling["identical"]["mrr"] == 1.0
    assert spelling["different"]["queries"] == 4
    assert spelling["different"]["mrr"] == pytest.approx(np.mean(by_hand["different"]))
    assert spelling["different"]["mrr"] < 1.0  # w20 -> m21 is a wrong gold: m20 is nearer
    assert scores["mrr"] == pytest.approx(np.mean(by_hand["identical"] + by_hand["different"]))
