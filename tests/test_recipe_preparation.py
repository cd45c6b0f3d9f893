"""Data recipes' preparation steps: MSRA's word/tag file to character BIO, the official MNLI archive
(downloaded from a tiny HTTP server on 127.0.0.1) to the training TSV, and their bad inputs."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from test_recipes import sha, write_recipe

from xlt.data.recipes import fetch, load_recipes, msra_wordtag_to_char_bio, mnli_train_tsv, status
from xlt.utils.errors import XltError


def test_msra_wordtag_to_char_bio_small(tmp_path):
    src = tmp_path / "wordtag.txt"
    src.write_bytes("中共中央/nt 致/o 邓小平/nr 同志/o \r\n\r\n在/o 北京/ns \r\n".encode("utf-8"))
    out = tmp_path / "bio.txt"
    msra_wordtag_to_char_bio([src], out)
    expected = ["中\tB-ORG", "共\tI-ORG", "中\tI-ORG", "央\tI-ORG", "致\tO", "邓\tB-PER", "小\tI-PER", "平\tI-PER",
                "同\tO", "志\tO", "", "在\tO", "北\tB-LOC", "京\tI-LOC", ""]
    assert out.read_text(encoding="utf-8").split("\n")[:-1] == expected

    src.write_text("好/o\n坏词/xx\n", encoding="utf-8")
    with pytest.raises(XltError, match="expected word/tag") as err:
        msra_wordtag_to_char_bio([src], out)
    assert (err.value.path, err.value.line) == (str(src), 2)


def make_mnli_zip(path: Path) -> bytes:
    header = "gold_label\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\tsentence2_parse\t" \
             "sentence1\tsentence2\tpromptID\tpairID\tgenre\tlabel1"
    rows = ["neutral\t(x)\t(y)\t(X)\t(Y)\tConceptually  cream skimming.\tProduct and geography.\t1\t1n\tgov\tneutral",
            "-\t(x)\t(y)\t(X)\t(Y)\tNo gold label here.\tSkipped.\t2\t2n\tgov\tneutral",
            "entailment\t(x)\t(y)\t(X)\t(Y)\tyou know during the season\tYou lose them.\t3\t3e\ttel\tentailment"]
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("multinli_1.0/multinli_1.0_train.txt", "\r\n".join([header, *rows]) + "\r\n")
    return path.read_bytes()


def test_official_mnli_archive_over_http_is_downloaded_and_prepared(tmp_path, http_root):
    root, base = http_root
    archive = make_mnli_zip(root / "multinli_1.0.zip")
    write_recipe(tmp_path / "recipes", "mnli_full", [
        {"path": "nli/mnli/official/multinli_1.0.zip", "sha256": sha(archive), "url": f"{base}/multinli_1.0.zip"}],
        [{"function": "mnli_train_tsv", "inputs": ["nli/mnli/official/multinli_1.0.zip"],
          "output": "nli/mnli/mnli_train.tsv", "sha256": None}], in_all=False)
    recipes, data = load_recipes(tmp_path / "recipes"), tmp_path / "data"
    report = fetch(["mnli_full"], data=data, mirror=None, recipes=recipes)
    assert report.downloaded == ["nli/mnli/official/multinli_1.0.zip"]
    assert report.prepared == ["nli/mnli/mnli_train.tsv"]
    assert (data / "nli/mnli/mnli_train.tsv").read_text(encoding="utf-8").splitlines() == [
        "Conceptually cream skimming.\tProduct and geography.\tneutral",
        "you know during the season\tYou lose them.\tentailment"]
    assert fetch(["all"], data=data, mirror=None, recipes=recipes).present == []  # not part of `all`
    again = fetch(["mnli_full"], data=data, mirror=None, recipes=recipes)
    assert again.prepared == [] and len(again.present) == 2
    assert [(r.present, r.total) for r in status(recipes, data)] == [(2, 2)]


def test_mnli_archive_errors(tmp_path):
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"not a zip")
    with pytest.raises(XltError, match="cannot read the MNLI archive") as err:
        mnli_train_tsv([bad], tmp_path / "out.tsv")
    assert err.value.path == str(bad)
    with zipfile.ZipFile(tmp_path / "short.zip", "w") as z:
        z.writestr("multinli_1.0/multinli_1.0_train.txt", "gold_label\tsentence1\tsentence2\nneutral\tonly two\n")
    with pytest.raises(XltError, match="expected 3 columns") as err:
        mnli_train_tsv([tmp_path / "short.zip"], tmp_path / "out.tsv")
    assert err.value.line == 2
