"""Data recipes: the real recipes against the mirror's checksums, and fetching from a fake mirror,
a file:// URL and a tiny HTTP server on 127.0.0.1, with every failure mode."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import threading
import unicodedata
from pathlib import Path

import pytest
from conftest import assert_one_line_error, run_xlt

from xlt.data.recipes import fetch, load_recipes
from xlt.utils.errors import XltError


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_recipe(directory: Path, name: str, files: list[dict], prepare: list[dict] = (), in_all: bool = True) -> None:
    directory.mkdir(exist_ok=True)
    recipe = {"name": name, "title": f"test set {name}", "licence": "CC0", "official_url": f"https://example.org/{name}",
              "in_all": in_all, "files": files, "prepare": list(prepare)}
    (directory / f"{name}.json").write_text(json.dumps(recipe), encoding="utf-8")


@pytest.fixture
def fake(tmp_path):
    """A fake mirror with two small files, their recipe, and an empty data directory."""
    mirror, recipes, data = tmp_path / "mirror", tmp_path / "recipes", tmp_path / "data"
    (mirror / "toy").mkdir(parents=True)
    contents = {"toy/a.txt": b"alpha\n", "toy/b.txt": "b\xe9ta\n".encode("utf-8")}
    for path, content in contents.items():
        (mirror / path).write_bytes(content)
    write_recipe(recipes, "toy", [{"path": p, "sha256": sha(c), "size": len(c)} for p, c in contents.items()])
    return mirror, recipes, data, contents


# ---- the real recipes ------------------------------------------------------------------------
def read_sums(mirror: Path) -> dict[str, str]:
    return {line.split()[1]: line.split()[0] for line in (mirror / "SHA256SUMS").read_text().splitlines()}


def test_real_recipes_match_the_mirror_manifest(mirror):
    recipes = load_recipes()
    sums = read_sums(mirror)
    laid_out: dict[str, str] = {}
    for recipe in recipes.values():
        assert recipe.licence and recipe.official_url.startswith("http"), recipe.name
        for item in recipe.files:
            assert item.path not in laid_out, f"{item.path} in {recipe.name} and {laid_out[item.path]}"
            laid_out[item.path] = recipe.name
            if item.path in sums:
                assert item.sha256 == sums[item.path], item.path
                assert item.size == (mirror / item.path).stat().st_size, item.path
            else:  # official-only files are fetched by name, never by `all`
                assert not recipe.in_all and item.url, item.path
            assert item.url is None or item.url.startswith("https://"), item.path
    # Every mirrored file has a recipe, except the Tatoeba languages xlt does not evaluate.
    missing = [p for p in sums if p not in laid_out and not p.startswith("tatoeba/v1/tatoeba.")]
    assert missing == []
    wanted = {"ud_en_ewt", "ud_fr_gsd", "ud_ru_gsd", "ud_zh_gsd", "ud_de_gsd", "ud_zh_gsdsimp", "xnli", "mnli_20k",
              "mnli_full", "wikiann", "msra", "uner_zh", "muse", "muse_official", "tatoeba", "mono_en", "mono_fr",
              "mono_ru", "mono_zh", "mono_de", "mono_cc", "parallel_wmt"}
    assert wanted <= set(recipes)


def test_fetch_a_real_treebank_from_the_mirror_then_skip_it(mirror, tmp_path):
    data = tmp_path / "data"
    report = fetch(["ud_zh_gsd"], data=data, mirror=mirror)
    recipe = load_recipes()["ud_zh_gsd"]
    assert sorted(report.from_mirror) == sorted(f.path for f in recipe.files)
    dev = "ud/zh_gsd/zh_gsd-ud-dev.conllu"
    assert (data / dev).read_bytes() == (mirror / dev).read_bytes()
    again = fetch(["ud_zh_gsd"], data=data, mirror=mirror)
    assert again.from_mirror == [] and sorted(again.present) == sorted(report.from_mirror)


def test_a_file_path_fetches_the_recipe_that_lays_it_out(mirror, tmp_path):
    # make asks for the files it reads; its mapping from path to recipe name missed nli/snli/*, so
    # XNLI_TRAIN=nli/mnli_snli.tsv failed on a fresh data directory ("unknown data set 'nli'")
    recipes = load_recipes()
    owners: dict[str, list[str]] = {}
    for recipe in recipes.values():
        for path, _, _ in recipe.outputs():
            owners.setdefault(path, []).append(recipe.name)
    assert not {p: names for p, names in owners.items() if len(names) > 1}  # a path names one recipe
    report = fetch(["nli/snli/snli_dev.tsv"], data=tmp_path / "data", mirror=mirror)
    assert sorted(report.from_mirror) == sorted(f.path for f in recipes["snli"].files)
    with pytest.raises(XltError, match="no recipe lays out 'nli/snli/other.tsv'"):
        fetch(["nli/snli/other.tsv"], data=tmp_path / "data", mirror=mirror)


def test_msra_gold_conversion_agrees_with_the_char_bio_copy(mirror, tmp_path):
    """The prepared gold file has the same characters and tags as the independently converted copy
    (which normalised full-width digits and letters, hence NFKC) over all 172k characters."""
    data = tmp_path / "data"
    report = fetch(["msra"], data=data, mirror=mirror)
    assert report.prepared == ["ner/msra/msra_test_gold_char_bio.txt"]

    def pairs(path: Path) -> list[tuple[str, str]]:
        rows = [line.replace(" ", "\t").split("\t") for line in path.read_text(encoding="utf-8").splitlines() if line]
        return [(unicodedata.normalize("NFKC", c), t) for c, t in rows]

    ours = pairs(data / "ner/msra/msra_test_gold_char_bio.txt")
    assert len(ours) > 170_000
    assert ours == pairs(data / "ner/msra/msra_test_char_bio.txt")
    assert fetch(["msra"], data=data, mirror=mirror).prepared == []  # up to date: skipped


# ---- fake mirror, URLs and failures ----------------------------------------------------------
def test_fake_mirror_copy_is_checked_and_idempotent(fake):
    mirror, recipes, data, contents = fake
    report = fetch(["toy"], data=data, mirror=mirror, recipes=load_recipes(recipes))
    assert sorted(report.from_mirror) == sorted(contents)
    for path, content in contents.items():
        assert (data / path).read_bytes() == content
    mtime = (data / "toy/a.txt").stat().st_mtime_ns
    again = fetch(["toy"], data=data, mirror=mirror, recipes=load_recipes(recipes))
    assert sorted(again.present) == sorted(contents) and again.from_mirror == []
    assert (data / "toy/a.txt").stat().st_mtime_ns == mtime

    (data / "toy/a.txt").write_bytes(b"edited by hand\n")  # a wrong local copy is replaced
    assert fetch(["toy"], data=data, mirror=mirror, recipes=load_recipes(recipes)).from_mirror == ["toy/a.txt"]
    assert (data / "toy/a.txt").read_bytes() == contents["toy/a.txt"]


def test_checksum_mismatch_in_the_mirror_is_an_error_naming_the_file(fake):
    mirror, recipes, data, _ = fake
    (mirror / "toy/b.txt").write_bytes(b"corrupted\n")
    with pytest.raises(XltError, match="sha256 mismatch") as err:
        fetch(["toy"], data=data, mirror=mirror, recipes=load_recipes(recipes))
    assert err.value.path == str(mirror / "toy/b.txt")
    assert not (data / "toy/b.txt").exists()
    assert [p.name for p in (data / "toy").iterdir()] == ["a.txt"]  # no temporary file left


def test_file_url_when_the_mirror_lacks_the_file(tmp_path):
    official = tmp_path / "official"
    official.mkdir()
    (official / "c.txt").write_bytes(b"gamma\n")
    write_recipe(tmp_path / "recipes", "toy", [{"path": "toy/c.txt", "sha256": sha(b"gamma\n"),
                                                "url": (official / "c.txt").as_uri()}])
    report = fetch(["toy"], data=tmp_path / "data", mirror=tmp_path / "empty_mirror",
                   recipes=load_recipes(tmp_path / "recipes"))
    assert report.downloaded == ["toy/c.txt"]
    assert (tmp_path / "data/toy/c.txt").read_bytes() == b"gamma\n"


def test_http_download_checked_and_mismatch_names_the_url(tmp_path, http_root):
    root, base = http_root
    (root / "d.txt").write_bytes(b"delta\n")
    (root / "e.txt").write_bytes(b"not what the recipe says\n")
    write_recipe(tmp_path / "recipes", "good", [{"path": "toy/d.txt", "sha256": sha(b"delta\n"), "url": f"{base}/d.txt"}])
    write_recipe(tmp_path / "recipes", "bad", [{"path": "toy/e.txt", "sha256": sha(b"epsilon\n"), "url": f"{base}/e.txt"}])
    recipes, data = load_recipes(tmp_path / "recipes"), tmp_path / "data"
    assert fetch(["good"], data=data, mirror=None, recipes=recipes).downloaded == ["toy/d.txt"]
    assert (data / "toy/d.txt").read_bytes() == b"delta\n"
    with pytest.raises(XltError, match="sha256 mismatch") as err:
        fetch(["bad"], data=data, mirror=None, recipes=recipes)
    assert err.value.path == f"{base}/e.txt"
    assert not (data / "toy/e.txt").exists()


def test_unreachable_url_and_no_source_say_where_to_get_the_file(tmp_path, http_root):
    _, base = http_root
    write_recipe(tmp_path / "recipes", "gone", [{"path": "toy/f.txt", "sha256": sha(b"f"), "url": f"{base}/f.txt"}])
    write_recipe(tmp_path / "recipes", "nowhere", [{"path": "toy/g.txt", "sha256": sha(b"g")}])
    recipes = load_recipes(tmp_path / "recipes")
    with pytest.raises(XltError, match=r"not in the mirror .* failed \(HTTP 404 ") as err:
        fetch(["gone"], data=tmp_path / "data", mirror=tmp_path, recipes=recipes)
    assert err.value.path == "toy/f.txt" and "https://example.org/gone" in err.value.message
    with pytest.raises(XltError, match="no byte-identical download") as err:
        fetch(["nowhere"], data=tmp_path / "data", mirror=None, recipes=recipes)
    assert err.value.path == "toy/g.txt" and "XLT_DATA_MIRROR" in err.value.message
    assert not (tmp_path / "data").exists()   # no empty recipe folder that looks half-fetched


def test_a_failed_fetch_keeps_the_files_that_landed_and_no_empty_folder(tmp_path):
    write_recipe(tmp_path / "recipes", "half", [{"path": "toy/a.txt", "sha256": sha(b"alpha\n"),
                                                 "url": (tmp_path / "a.txt").as_uri()},
                                                {"path": "toy/deeper/b.txt", "sha256": sha(b"b")}])
    (tmp_path / "a.txt").write_bytes(b"alpha\n")
    (tmp_path / "data").mkdir()
    with pytest.raises(XltError, match="no byte-identical download"):
        fetch(["half"], data=tmp_path / "data", mirror=None, recipes=load_recipes(tmp_path / "recipes"))
    assert sorted(p.relative_to(tmp_path / "data").as_posix() for p in (tmp_path / "data").rglob("*")) == \
        ["toy", "toy/a.txt"]   # toy/deeper, made for b.txt, is gone


def test_cli_fetch_and_list_with_environment_variables(fake, monkeypatch):
    mirror, recipes, data, contents = fake
    write_recipe(recipes, "elsewhere", [{"path": "toy/h.txt", "sha256": sha(b"h")}], in_all=False)
    monkeypatch.setenv("XLT_RECIPES", str(recipes))
    monkeypatch.setenv("XLT_DATA", str(data))
    monkeypatch.setenv("XLT_DATA_MIRROR", str(mirror))

    res = run_xlt("data", "list")
    assert res.returncode == 0, res.stderr
    rows = {line.split()[0]: line.split() for line in res.stdout.splitlines()[2:]}
    assert rows["toy"][1:3] == ["yes", "0/2"] and rows["toy"][-1] == "CC0"
    assert rows["elsewhere"][1:3] == ["no", "0/1"]

    res = run_xlt("data", "fetch", "all")  # `elsewhere` is not in `all`, so this succeeds
    assert res.returncode == 0, res.stderr
    assert "2 copied from the mirror" in res.stderr
    rows = {line.split()[0]: line.split() for line in run_xlt("data", "list").stdout.splitlines()[2:]}
    assert rows["toy"][2] == "2/2" and rows["elsewhere"][2] == "0/1"
    assert "2 already present" in run_xlt("data", "fetch", "all").stderr

    assert_one_line_error(run_xlt("data", "fetch", "elsewhere"), "toy/h.txt", "not in the mirror",
                          "https://example.org/elsewhere")
    assert_one_line_error(run_xlt("data", "fetch", "nonesuch"), "unknown data set 'nonesuch'")
    monkeypatch.setenv("XLT_DATA_MIRROR", "")  # no mirror: the official route only
    (data / "toy/a.txt").unlink()
    assert_one_line_error(run_xlt("data", "fetch", "toy"), "toy/a.txt", "none: set XLT_DATA_MIRROR")


@pytest.mark.parametrize("entry, fragment", [
    ({"path": "../outside.txt", "sha256": None}, "must be relative"),
    ({"path": "toy/x.txt", "sha256": "ABC"}, "64 lower-case hex"),
    ({"path": "toy/x.txt"}, "has no sha256"),
])
def test_invalid_recipes_are_refused_naming_the_recipe(tmp_path, entry, fragment):
    write_recipe(tmp_path / "recipes", "broken", [entry])
    with pytest.raises(XltError, match=fragment) as err:
        load_recipes(tmp_path / "recipes")
    assert err.value.path == str(tmp_path / "recipes" / "broken.json")


@pytest.mark.parametrize("step, fragment", [
    ({"function": "os.system", "inputs": [], "output": "x"}, "unknown preparation function 'os.system'"),
    ({"function": "mnli_train_tsv", "inputs": ["elsewhere.zip"], "output": "x"}, "does not fetch or prepare"),
])
def test_invalid_preparation_steps_are_refused(tmp_path, step, fragment):
    write_recipe(tmp_path / "recipes", "broken", [], [step])
    with pytest.raises(XltError, match=fragment):
        load_recipes(tmp_path / "recipes")


def test_unverified_official_file_is_fetched_and_reported(tmp_path, http_root):
    root, base = http_root
    (root / "dict.txt").write_bytes(b"cat chat\n")
    write_recipe(tmp_path / "recipes", "dicts", [{"path": "muse/official/en-fr.txt", "sha256": None,
                                                  "url": f"{base}/dict.txt"}], in_all=False)
    recipes, data = load_recipes(tmp_path / "recipes"), tmp_path / "data"
    report = fetch(["dicts"], data=data, mirror=None, recipes=recipes)
    assert report.unverified == ["muse/official/en-fr.txt"] == report.downloaded
    assert fetch(["dicts"], data=data, mirror=None, recipes=recipes).present == ["muse/official/en-fr.txt"]
    assert os.path.getsize(data / "muse/official/en-fr.txt") == 9


def test_a_download_cut_short_is_an_error_and_leaves_nothing(tmp_path):
    """urllib reads a connection closed before Content-Length as a short file, not an error: a file
    without a checksum (the official MUSE splits, MNLI) would be kept cut and counted present after."""
    class CutShort(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "100000")
            self.end_headers()
            self.wfile.write(b"x" * 1000)
            self.close_connection = True

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), CutShort)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/big.txt"
        write_recipe(tmp_path / "recipes", "big", [{"path": "toy/big.txt", "sha256": None, "url": url}], in_all=False)
        with pytest.raises(XltError, match="download cut short: 1,000 of 100,000 bytes") as err:
            fetch(["big"], data=tmp_path / "data", mirror=None, recipes=load_recipes(tmp_path / "recipes"))
        assert err.value.path == url
        assert not (tmp_path / "data").exists()
    finally:
        server.shutdown()
        server.server_close()


def test_a_mirror_named_that_does_not_exist_is_an_error_not_an_empty_mirror(fake, monkeypatch):
    _, recipes, data, _ = fake
    monkeypatch.setenv("XLT_RECIPES", str(recipes))
    monkeypatch.setenv("XLT_DATA", str(data))
    monkeypatch.setenv("XLT_DATA_MIRROR", str(data.parent / "nowhere"))
    assert_one_line_error(run_xlt("data", "fetch", "toy"), "nowhere: no such mirror directory")
    assert_one_line_error(run_xlt("data", "list"), "nowhere: no such mirror directory")
    monkeypatch.delenv("XLT_DATA_MIRROR")
    assert_one_line_error(run_xlt("data", "fetch", "--mirror", data.parent / "elsewhere", "toy"),
                          "elsewhere: no such mirror directory")
    assert not data.exists()


# ---- default locations: nothing depends on the checkout but the mirror default ---------------
def test_data_directory_defaults_to_xlt_data_then_the_user_cache(tmp_path, monkeypatch):
    from xlt.data import recipes as module

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XLT_DATA", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert module.data_dir() == tmp_path / "home" / ".cache" / "xlt"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # not absolute: ignored, as the XDG spec says
    assert module.data_dir() == tmp_path / "home" / ".cache" / "xlt"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert module.data_dir() == tmp_path / "cache" / "xlt"
    monkeypatch.setenv("XLT_DATA", str(tmp_path / "mine"))
    assert module.data_dir() == tmp_path / "mine"


def test_recipes_ship_inside_the_package_and_the_mirror_default_needs_a_checkout(tmp_path, monkeypatch):
    from xlt.data import recipes as module

    monkeypatch.delenv("XLT_RECIPES", raising=False)
    assert module.recipes_dir().parent == Path(module.__file__).resolve().parent  # package data, not the repo
    assert "ud_en_ewt" in load_recipes()
    monkeypatch.delenv("XLT_DATA_MIRROR", raising=False)
    monkeypatch.setattr(module, "checkout_root", lambda: None)  # an installed wheel
    assert module.mirror_dir() is None
    monkeypatch.setattr(module, "checkout_root", lambda: tmp_path / "repo")
    (tmp_path / "shared" / "data").mkdir(parents=True)
    assert module.mirror_dir() == tmp_path / "shared" / "data"
    monkeypatch.setenv("XLT_DATA_MIRROR", "")
    assert module.mirror_dir() is None


def test_data_list_fetches_into_the_user_cache_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("XLT_DATA", raising=False)
    res = run_xlt("data", "list", cwd=tmp_path, check=True)
    assert res.stdout.splitlines()[0].startswith(f"data directory: {tmp_path / 'cache' / 'xlt'} ")
    assert not (tmp_path / "cache").exists()  # listing creates nothing
