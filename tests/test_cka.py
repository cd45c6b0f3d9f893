"""Linear CKA: its invariances, two implementations that agree, the debiased estimator, and ``xlt cka``."""

from __future__ import annotations

import json

import numpy as np
import pytest
import synthetic
from conftest import assert_one_line_error, run_in_process, run_xlt

from xlt.analysis.cka import cka, cka_from_grams, cka_gram_form, per_layer_cka, pearson
from xlt.utils.errors import XltError


def random_pair(n=60, d=20, seed=0):
    """Two related representations: Y is a noisy linear function of X."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    Y = X @ rng.normal(size=(d, d + 5)) + 0.5 * rng.normal(size=(n, d + 5))
    return X, Y


def textbook_linear_cka(X, Y):
    """tr(KHLH) / sqrt(tr(KHKH) tr(LHLH)) with the explicit centring matrix H."""
    n = X.shape[0]
    H = np.eye(n) - np.ones((n, n)) / n
    K, L = X @ X.T, Y @ Y.T
    hsic = lambda A, B: np.trace(A @ H @ B @ H)  # noqa: E731
    return hsic(K, L) / np.sqrt(hsic(K, K) * hsic(L, L))


def unbiased_hsic(K, L):
    """Song et al. (2012), eq. 5, written out term by term on uncentred kernels."""
    n = K.shape[0]
    Kt, Lt = K - np.diag(np.diag(K)), L - np.diag(np.diag(L))
    one = np.ones(n)
    return (np.trace(Kt @ Lt) + (one @ Kt @ one) * (one @ Lt @ one) / ((n - 1) * (n - 2))
            - 2.0 / (n - 2) * one @ Kt @ Lt @ one) / (n * (n - 3))


def test_identical_inputs_give_one():
    X, _ = random_pair()
    for debiased in (False, True):
        assert cka(X, X, debiased) == pytest.approx(1.0, abs=1e-12)
        assert cka_gram_form(X, X, debiased) == pytest.approx(1.0, abs=1e-12)


def test_feature_and_gram_forms_agree_with_the_textbook():
    X, Y = random_pair()
    assert cka(X, Y) == pytest.approx(textbook_linear_cka(X, Y), rel=1e-10)
    assert cka_gram_form(X, Y) == pytest.approx(cka(X, Y), rel=1e-10)
    assert 0.0 < cka(X, Y) < 1.0


def test_debiased_estimator_against_the_direct_formula():
    X, Y = random_pair(n=12, d=30, seed=3)  # d > n: where the biased estimator is most off
    K, L = X @ X.T, Y @ Y.T
    direct = unbiased_hsic(K, L) / np.sqrt(unbiased_hsic(K, K) * unbiased_hsic(L, L))
    assert cka(X, Y, debiased=True) == pytest.approx(direct, rel=1e-9)
    assert cka_gram_form(X, Y, debiased=True) == pytest.approx(direct, rel=1e-9)
    assert abs(direct - cka(X, Y)) > 1e-3  # the two estimators really differ here


def test_invariances():
    X, Y = random_pair(seed=1)
    rng = np.random.default_rng(7)
    Q, _ = np.linalg.qr(rng.normal(size=(Y.shape[1], Y.shape[1])))
    base = cka(X, Y)
    assert cka(X, Y @ Q) == pytest.approx(base, rel=1e-10)          # orthogonal transform
    assert cka(X, 3.7 * Y) == pytest.approx(base, rel=1e-10)        # isotropic scaling
    assert cka(X, Y + 5.0) == pytest.approx(base, rel=1e-10)        # translation (centring)
    assert cka(X, Y, True) == pytest.approx(cka(X, Y @ Q * 2.0, True), rel=1e-10)
    stretch = np.diag(np.linspace(0.1, 10.0, Y.shape[1]))
    assert abs(cka(X, Y @ stretch) - base) > 1e-3                   # not invariant to anisotropic scaling


def test_gram_form_takes_any_kernel_and_per_layer_stacks():
    X, Y = random_pair(seed=2)
    Y = Y[:, :X.shape[1]]  # stacks need one width
    assert cka_from_grams(X @ X.T, Y @ Y.T) == pytest.approx(cka(X, Y), rel=1e-10)
    A = np.stack([X, X * 2, Y])
    B = np.stack([Y, X, Y])
    per_layer = per_layer_cka(A, B)
    assert per_layer == pytest.approx([cka(X, Y), 1.0, 1.0], rel=1e-10)
    matrix = per_layer_cka(A, B, matrix=True)
    assert matrix.shape == (3, 3) and np.diag(matrix) == pytest.approx(per_layer, rel=1e-12)
    assert matrix[0, 1] == pytest.approx(1.0)


def test_bad_shapes_and_correlation():
    X, Y = random_pair()
    with pytest.raises(XltError, match="same number of rows"):
        cka(X, Y[:-1])
    # one that varies little next to its mean is not constant, in either form (the Gram form's test is
    # quadratic in the spread)
    small = (1 + 1e-5 * np.random.default_rng(1).normal(size=X.shape)).astype(np.float32)
    for debiased in (False, True):
        assert cka_gram_form(small, Y, debiased) == pytest.approx(cka(small, Y, debiased), rel=1e-6)
    # a constant whose mean is not exact in floating point (0.1 in 7 rows) too, in both forms
    for constant in (np.ones_like(Y), np.full((7, 4), 0.1), np.full((9, 3), 1 / 3, np.float32)):
        other = np.random.default_rng(0).normal(size=(len(constant), 5))
        for debiased in (False, True):
            for form in (cka, cka_gram_form):
                with pytest.raises(XltError, match="constant"):
                    form(other, constant, debiased=debiased)
    # a NaN (a diverged layer) is refused, not returned as a CKA of NaN that an ordering would read
    for bad in (np.nan, np.inf):
        broken = X.copy()
        broken[3, 1] = bad
        for debiased in (False, True):
            with pytest.raises(XltError, match="NaN or infinite"):
                cka(broken, Y, debiased=debiased)
            with pytest.raises(XltError, match="NaN or infinite"):
                cka(Y, broken, debiased=debiased)
    assert pearson([1, 2, 3, 4], [2, 4, 6, 8.5]) == pytest.approx(np.corrcoef([1, 2, 3, 4], [2, 4, 6, 8.5])[0, 1])
    with pytest.raises(XltError, match="at least 3"):
        pearson([1, 2], [1, 2])


# ---- the command -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def run_dir(tiny_run):
    return tiny_run


@pytest.fixture(scope="module")
def parallel(tmp_path_factory):
    return synthetic.write_corpus(tmp_path_factory.mktemp("parallel"), n=50, seed=5)


def test_compare_and_table(run_dir, parallel, tmp_path):
    en, fr = parallel
    retrieval = tmp_path / "retrieval.json"
    retrieval.write_text(json.dumps({"layers": [0, 1, 2], "p_at_1": [0.5, 0.4, 0.2]}))
    res = run_xlt("cka", "compare", "--model-a", run_dir, "--lang-a", "en", "--text-a", en,
                  "--lang-b", "fr", "--text-b", fr, "--label", "en-fr", "--column", "Bilingual", "--matrix",
                  "--retrieval", retrieval, "-o", tmp_path / "bi")
    assert res.returncode == 0, res.stderr
    column = json.loads((tmp_path / "bi.json").read_text())
    assert column["layers"] == [0, 1, 2] and len(column["cka"]) == 3 and column["n"] == 50
    assert column["average"] == pytest.approx(np.mean(column["cka"]))
    assert np.diag(column["matrix"]) == pytest.approx(column["cka"])
    assert column["retrieval"]["pearson"] == pytest.approx(pearson(column["cka"], [0.5, 0.4, 0.2]))
    assert (tmp_path / "bi.png").stat().st_size > 0 and "L0" in res.stdout

    res = run_xlt("cka", "compare", "--model-a", run_dir, "--lang-a", "en", "--text-a", en, "--lang-b", "fr",
                  "--text-b", fr, "--random-b", "0", "--debiased", "--label", "en-fr", "--column", "Random",
                  "-o", tmp_path / "rand")
    assert res.returncode == 0, res.stderr
    rand = json.loads((tmp_path / "rand.json").read_text())
    assert rand["estimator"] == "debiased" and rand["b"]["model"] == "random:0"

    # a debiased column beside a linear one: two measures read as one (said only in the JSON)
    res = run_xlt("cka", "table", tmp_path / "bi.json", tmp_path / "rand.json", "-o", tmp_path / "fig7")
    assert_one_line_error(res, f"{tmp_path / 'rand.json'}: estimator 'debiased' differs from the first column's 'linear'")
    assert not list(tmp_path.glob("fig7*"))
    pooled_in = {**column, "column": "Pooled in", "pooling": column["pooling"].replace("specials excluded", "</s> included")}
    (tmp_path / "pooled.json").write_text(json.dumps(pooled_in))
    res = run_xlt("cka", "table", tmp_path / "bi.json", tmp_path / "pooled.json", "-o", tmp_path / "fig7")
    assert_one_line_error(res, "pooled.json: pooling 'mean over subwords, </s> included' differs")
    (tmp_path / "mono.json").write_text(json.dumps({**column, "column": "Monolingual"}))
    res = run_xlt("cka", "table", tmp_path / "bi.json", tmp_path / "mono.json", "-o", tmp_path / "fig7")
    assert res.returncode == 0, res.stderr
    table = json.loads((tmp_path / "fig7.json").read_text())
    assert [c["column"] for c in table["columns"]] == ["Bilingual", "Monolingual"]
    assert table["columns"][0]["pooling"] == "mean over subwords, specials excluded"
    assert table["rows"] == ["L0", "L1", "L2", "AVER"]
    assert (tmp_path / "fig7.png").exists() and "AVER" in res.stdout
    # one file twice (by another name too) would be one result shown as two columns
    res = run_xlt("cka", "table", tmp_path / "bi.json", tmp_path / "." / "bi.json", "-o", tmp_path / "twice")
    assert_one_line_error(res, "bi.json: the same CKA column file is given twice")
    assert not list(tmp_path.glob("twice*"))


def test_bad_inputs_give_one_line(run_dir, parallel, tmp_path, capsys):
    """The first refusal in a real process, the rest in this one (one torch import, not five)."""
    def here(*args):
        return run_in_process(capsys, *args)

    en, fr = parallel
    short = tmp_path / "short.fr"
    short.write_text("".join(fr.read_text().splitlines(keepends=True)[:10]))
    common = ["cka", "compare", "--model-a", run_dir, "--lang-a", "en", "--text-a", en, "--lang-b", "fr"]
    assert_one_line_error(run_xlt(*common, "--text-b", short, "-o", tmp_path / "x"), str(en), str(short), "50", "10")
    assert_one_line_error(here(*common, "--text-b", fr, "--layers", "0,7", "-o", tmp_path / "x"), "layer 7")
    res = here("cka", "compare", "--model-a", run_dir, "--lang-a", "de", "--text-a", en, "--lang-b", "fr",
               "--text-b", fr, "-o", tmp_path / "x")
    assert_one_line_error(res, "'de'")
    one = tmp_path / "one.en"
    one.write_text(en.read_text().splitlines(keepends=True)[0])
    res = here("cka", "compare", "--model-a", run_dir, "--lang-a", "en", "--text-a", one, "--lang-b", "en",
               "--text-b", one, "-o", tmp_path / "x")
    assert_one_line_error(res, f"xlt cka compare: error: {one}: 1 sentence: CKA needs at least 2 parallel sentences")
    res = here(*common, "--text-b", fr, "--n-sentences", "1", "-o", tmp_path / "x")   # the files are fine
    assert_one_line_error(res, "error: --n-sentences 1: CKA needs at least 2 parallel sentences")
    assert not list(tmp_path.glob("x*"))


def test_a_side_from_an_extraction_gives_the_same_column(run_dir, parallel, tmp_path):
    from xlt.analysis.cka_compare import CompareSettings, Side, compare
    from xlt.analysis.extract import extract_to_files

    en, fr = parallel
    extract_to_files(str(run_dir), "en", str(en), str(tmp_path / "en"), layers=[0, 2])
    settings = CompareSettings(layers=[0, 2])
    from_text = compare(Side(str(run_dir), "en", str(en)), Side(str(run_dir), "fr", str(fr)), settings, "", "")
    from_reps = compare(Side(reps=str(tmp_path / "en")), Side(str(run_dir), "fr", str(fr)), settings, "", "")
    assert from_reps["cka"] == pytest.approx(from_text["cka"], rel=1e-6) and from_reps["layers"] == [0, 2]
    with pytest.raises(XltError, match="not in this extraction"):
        compare(Side(reps=str(tmp_path / "en")), Side(str(run_dir), "fr", str(fr)), CompareSettings(layers=[1]),
                "", "")
    short = tmp_path / "short.fr"
    short.write_text("".join(fr.read_text().splitlines(keepends=True)[:10]))
    with pytest.raises(XltError, match=f"{tmp_path / 'en'} has 50 sentences, {short} has 10"):
        compare(Side(reps=str(tmp_path / "en")), Side(str(run_dir), "fr", str(short)), settings, "", "")


def test_reps_sides_bring_their_pooling_and_must_agree(run_dir, parallel, tmp_path):
    """--reps-a/--reps-b: the column says how the extractions were pooled (their headers, not the flag),
    and two extractions pooled differently are one error line naming both."""
    from xlt.analysis.extract import extract_to_files

    en, fr = parallel
    for name, path, specials in (("en", en, True), ("fr", fr, True), ("fr-bare", fr, False)):
        extract_to_files(str(run_dir), name[:2], str(path), str(tmp_path / name), layers=[0, 2],
                         include_specials=specials)
    res = run_xlt("cka", "compare", "--reps-a", tmp_path / "en", "--reps-b", tmp_path / "fr", "-o", tmp_path / "col")
    assert res.returncode == 0, res.stderr
    column = json.loads((tmp_path / "col.json").read_text())
    assert column["pooling"] == "mean over subwords, </s> included" and column["layers"] == [0, 2]
    res = run_xlt("cka", "compare", "--reps-a", tmp_path / "en", "--reps-b", tmp_path / "fr-bare",
                  "-o", tmp_path / "mixed")
    assert_one_line_error(res, "pooled differently", str(tmp_path / "en.json"), str(tmp_path / "fr-bare.json"))
    assert not list(tmp_path.glob("mixed*"))
