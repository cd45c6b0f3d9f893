"""K et al.'s word-order control in the make plan (``make -n``, nothing is run): the pair en-fakeperm
is fake's tokenized text permuted, Default alone, with fake's settings, read beside fake."""

from __future__ import annotations

import subprocess

from conftest import REPO
from test_makefile import dry_run, english_corpus, make_env, make_words, xlt_commands


def test_the_word_order_control_is_default_on_fakes_text_permuted_with_fakes_settings(tmp_path):
    work = tmp_path / "w"
    english = english_corpus(tmp_path / "english.txt.xz", 200_000)
    lines = "\n".join(dry_run(work, "SCALE=smoke", "LANGS=fake fakeperm", f"CORPUS_en={english}",
                              "reproduce-table1")).replace("\\\n", " ").splitlines()
    # fake's tokenized text, permuted: no text of its own, no second tokenization
    assert not [line for line in lines if "-v lo=" in line and "fakeperm" in line]
    for split in ("train", "dev"):
        assert f".venv/bin/xlt -q permute-words {work}/text/fake.{split} -o {work}/text/fakeperm.{split}" in lines
    # Default alone is pretrained on the permuted pair; every other row is a gap with the reason
    pretrain = [line for line in xlt_commands(lines, "pretrain") if "--train fakeperm " in line]
    assert [line.split("--run-dir ")[1].split(" ")[0] for line in pretrain] == [f"{work}/models/default/en-fakeperm"]
    missing = [line for line in lines if "/en-fakeperm/missing.json.tmp" in line]
    assert len(missing) == 9 and all("the word-order control is Default's alone" in line for line in missing)
    # the test sets: English's, mapped, then permuted
    t = f"{work}/tasks"
    permuted = {line.split(" -o ")[1]: line for line in xlt_commands(lines, "-q permute-words") if "/tasks/" in line}
    sources = {f"{t}/xnli/{s}-fakeperm.tsv": ("xnli", f"{t}/xnli/{s}-en.tsv") for s in ("dev", "test")}
    sources.update({f"{t}/ner/wikiann/fakeperm/{s}": ("wikiann", f"{t}/ner/wikiann/en/{s}") for s in ("dev", "test")})
    sources.update({f"{t}/ud/fakeperm_ewt/fakeperm_ewt-ud-{s}.conllu": ("conllu", f"{t}/ud/en_ewt/en_ewt-ud-{s}.conllu")
                    for s in ("dev", "test")})
    assert set(permuted) == set(sources)
    for out, (fmt, source) in sources.items():
        assert f"fake-english --format {fmt} {source} | .venv/bin/xlt -q permute-words --format {fmt} -o" in permuted[out]
    assert len([line for line in xlt_commands(lines, "finetune") if "--eval fakeperm " in line]) == 2 * 3
    assert "--langs fake,fakeperm" in xlt_commands(lines, "report")[0]
    # where the scale sets fake's pair settings, the permuted pair takes them (one comparison, one recipe)
    for name in ("STEPS", "SHORT_STEPS", "LANG_EMBEDDINGS"):
        both = make_words(work, f"$(call setting_of,{name},fake) $(call setting_of,{name},fakeperm)", "SCALE=demo")
        assert both[0] == both[1] != make_words(work, f"$({name})", "SCALE=demo")[0]
    models = make_words(work, "$(TABLE1_MODELS)", "SCALE=demo", "LANGS=fake fakeperm")
    assert [m for m in models if "fakeperm" in m] == [f"{work}/models/default/en-fakeperm/finished",
                                                      f"{work}/models/default/en-fakeperm-seed1/finished"]
    # the control alone, with nothing to compare it with, is refused before any work
    env = make_env()
    alone = subprocess.run(["make", "-n", f"W={work}", "LANGS=fakeperm", "reproduce-table1"], cwd=REPO,
                           capture_output=True, text=True, env=env)
    assert alone.returncode != 0 and 'set LANGS="fake fakeperm"' in alone.stderr
