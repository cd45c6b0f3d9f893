"""The reproduction's make plan, read with ``make -n`` (nothing is run).

The pipeline's resumability and its scales live in the Makefile, not in Python: these tests check
that every scale plans every stage, and that make's bookkeeping redoes exactly what is missing.
"""

import os
import re
import shutil
import subprocess
import time

import pytest

from conftest import REPO

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")


# Settings a caller's environment could pass to the Makefile (`?=`), and an outer make's flags (the
# suite itself runs under `make test`: its -j and --output-sync would reach this make too).
LEAKING = {"MAKEFLAGS", "MFLAGS", "MAKELEVEL", "SCALE", "W", "LANGS", "ANALYSIS_LANGS", "XLT_DATA", "GPUS", "NNODES", "MASTER", "BATCH",
           "LIU_LANGS", "LIU_SIZES"}


def make_env() -> dict[str, str]:
    """This process's environment without what would leak into the Makefile under test."""
    return {k: v for k, v in os.environ.items() if k not in LEAKING}


def dry_run(work, *args: str) -> list[str]:
    env = make_env()
    proc = subprocess.run(["make", "-n", f"W={work}", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def make_words(work, expression: str, *args: str) -> list[str]:
    """The words of a make ``expression`` (e.g. ``$(TABLE1_RESULTS)``) as the Makefile expands it."""
    env = make_env()
    proc = subprocess.run(["make", "-s", f"W={work}", *args, "--eval", f"words: ; @echo {expression}", "words"],
                          cwd=REPO, capture_output=True, text=True, timeout=120, env=env, check=True)
    return proc.stdout.split()


def xlt_commands(lines: list[str], subcommand: str) -> list[str]:
    return [line for line in lines if re.search(rf"\bxlt {subcommand}\b", line)]


def any_xlt_command(lines: list[str]) -> list[str]:
    return [line for line in lines if re.search(r"(/bin/xlt|-m xlt) ", line)]


@pytest.mark.parametrize("scale", ["smoke", "demo", "cpu", "gpu", "paper"])
def test_every_scale_plans_the_whole_reproduction(tmp_path, scale):
    lines = dry_run(tmp_path / "w", f"SCALE={scale}", "LANGS=fr ru zh", "reproduce-all")
    pretrain = xlt_commands(lines, "pretrain")
    # Table 1: 10 rows x 3 pairs, less Wiki-CC en-ru (no Russian web corpus); the en-de Default model
    # of Figure 7; monolingual en, fr, de, ru, zh for Figure 7 and the alignment; Liu et al.'s joint
    # BERTs (2 sizes x 2 windows).
    assert len(pretrain) == 10 * 3 - 1 + 1 + 5 + 2 * 2
    assert not any("wiki-cc/en-ru" in line for line in pretrain)
    # 10 rows x 3 tasks x 3 pairs less the 3 Wiki-CC en-ru cells, the no-pretraining control's 3 tasks
    # per pair (Default's run, untrained), plus Liu et al.'s XNLI with shift per pair, plus the XNLI of
    # Liu et al.'s Figures 2-3 (2 sizes x 6 models).
    finetunes = xlt_commands(lines, "finetune")
    assert len(finetunes) == 10 * 3 * 3 - 3 + 3 * 3 + 3 + 2 * 6
    control = [line for line in finetunes if "--checkpoint untrained" in line]
    assert len(control) == 3 * 3 and all("/models/default/en-" in line for line in control)
    assert len([line for line in lines if re.search(r"\bxlt -q baselines\b", line)]) == 3 * 3
    reports = {line.split("report ")[1].split()[0]: line for line in xlt_commands(lines, "report")}
    assert set(reports) == {"table1", "figure7", "alignment", "liu-table2", "liu-table4", "liu-figures", "liu-pos"}
    for name, line in reports.items():  # each table shows the languages the run made
        langs = {"figure7": "fr,de,ru,zh", "alignment": "fr,de,ru,zh", "liu-figures": ",".join(LIU_TARGETS[scale]),
                 "liu-pos": ",".join(LIU_TARGETS[scale])}.get(name, "fr,ru,zh")
        assert f"--langs {langs} " in line or line.endswith(f"--langs {langs}"), line
    if scale == "paper":
        assert all("torchrun" in line for line in pretrain)


@pytest.mark.parametrize("scale", ["demo", "cpu"])
def test_the_cpu_scales_reproduce_en_fr_with_the_short_window_curriculum(tmp_path, scale):
    # a recipe's continued lines joined: each command is one line
    lines = "\n".join(dry_run(tmp_path / "w", f"SCALE={scale}", "reproduce-table1")).replace("\\\n", " ").splitlines()
    pretrain = xlt_commands(lines, "pretrain")
    assert len(pretrain) == 10 and all("/en-fr" in line for line in pretrain)
    assert all("--short-stream-len 8 " in line and "--dropout 0" in line for line in pretrain)
    assert all("--equal-copies-init" in line for line in pretrain)
    assert len(xlt_commands(lines, "finetune")) == 10 * 3 + 3
    assert "--langs fr " in xlt_commands(lines, "report")[0] + " "
    smoke = xlt_commands(dry_run(tmp_path / "s", "SCALE=smoke", "reproduce-table1"), "pretrain")
    assert len(smoke) == 29 and not any("--short-stream-len" in line or "--dropout" in line for line in smoke)
    assert not any("--equal-copies-init" in line for line in smoke)


def touch_in_order(paths: list, seconds_ago: float) -> None:
    """Give ``paths`` increasing modification times from ``seconds_ago`` on (as a finished run leaves them)."""
    start = time.time() - seconds_ago
    for i, path in enumerate(paths):
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.write_text("{}")
        os.utime(path, (start + i, start + i))


def test_a_language_added_to_a_finished_run_is_made_and_nothing_else(tmp_path):
    work = tmp_path / "w"
    columns = [work / "figure7" / f"en-{lang}.{column}.json"
               for lang in ("fr", "ru", "zh") for column in ("bilingual", "monolingual", "random")]
    table, report = work / "figure7" / "fig7.json", work / "report" / "figure7.md"
    touch_in_order([*columns, table, report], seconds_ago=1000)

    # The first run that sees no settings record writes one and re-collects the table (cheap), no more.
    assert xlt_commands(dry_run(work, "reproduce-figure7", "ANALYSIS_LANGS=fr ru zh"), "cka compare") == []
    touch_in_order([work / "settings" / "analysis-langs", table, report], seconds_ago=500)  # as that run leaves them
    assert any_xlt_command(dry_run(work, "reproduce-figure7", "ANALYSIS_LANGS=fr ru zh")) == []

    lines = dry_run(work, "reproduce-figure7", "ANALYSIS_LANGS=fr ru zh de")
    compared = xlt_commands(lines, "cka compare")
    assert len(compared) == 3 and all("--lang-b de" in line for line in compared)
    assert any("report figure7" in line and "--langs fr,ru,zh,de" in line for line in xlt_commands(lines, "report"))


def test_several_nodes_prepare_once_then_pretrain_together(tmp_path):
    work = tmp_path / "w"
    prepare = dry_run(work, "SCALE=paper", "prepare-table1")
    # every token store of Table 1 (Wiki-CC only where a web corpus exists), and no training
    assert len(xlt_commands(prepare, "-q binarize")) == 3 + 2 + 3 + 3 + 3
    assert xlt_commands(prepare, "pretrain") == [] and xlt_commands(prepare, "finetune") == []
    plan = "\n".join(dry_run(work, "SCALE=paper", "NNODES=2", "MASTER=node0:29500", "pretrain-table1"))
    pretrain = xlt_commands(plan.replace("\\\n", " ").splitlines(), "pretrain")  # whole commands
    assert len(pretrain) == 10 * 3 - 1
    for line in pretrain:
        assert "--nnodes 2 " in line and "--rdzv_endpoint node0:29500 " in line and "--node_rank" not in line
        # checkpoints far more often than evaluations: a crash loses 5k steps, not an epoch of 200k
        assert "--save-every 5000 " in line and "--eval-every 200000 " in line
    env = make_env()
    proc = subprocess.run(["make", "-n", f"W={work}", "SCALE=paper", "NNODES=2", "pretrain-table1"], cwd=REPO,
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode != 0 and "NNODES=2 needs MASTER=" in proc.stderr


LIU_SIZES = {"smoke": (500, 2500), "demo": (4000, 20000), "cpu": (4000, 20000), "gpu": (20000, 100000),
             "paper": (200000, 1000000)}
# the targets: the paper's four, en-fr at the demo scale (for time: five languages need twice the BERT steps)
BATCH = {"smoke": 16, "demo": 16, "cpu": 16, "gpu": 64, "paper": 96}
LIU_TARGETS = {"smoke": ("fr", "de", "ru", "zh"), "demo": ("fr",), "cpu": ("fr", "de", "ru", "zh"), "gpu": ("fr", "de", "ru", "zh"),
               "paper": ("fr", "de", "ru", "zh")}


@pytest.mark.parametrize("scale", list(LIU_SIZES))
def test_every_scale_plans_the_liu_figures(tmp_path, scale):
    work = tmp_path / "w"
    lines = "\n".join(dry_run(work, f"SCALE={scale}", "reproduce-liu-figures")).replace("\\\n", " ").splitlines()
    small, big = LIU_SIZES[scale]
    langs = ("en", *LIU_TARGETS[scale])
    # the first N lines of each language at both sizes, then one joint BPE per size over all of them
    cuts = [line for line in lines if line.startswith("head -n ")]
    assert sorted(line.split()[2] for line in cuts) == sorted([str(small)] * len(langs) + [str(big)] * len(langs))
    learned = xlt_commands(lines, "bpe learn")
    assert len(learned) == 2 and all(f"/{l}.train" in line for line in learned for l in langs)
    # one joint BERT of en + the targets per size and window: the scale's windows, and 20-token ones with
    # batches grown to the same tokens per step
    pretrain = xlt_commands(lines, "pretrain")
    assert len(pretrain) == 4 and all(all(f"--train {l} " in line for l in langs) for line in pretrain)
    assert not any(f"--train {l} " in line for l in ("de", "ru", "zh") if l not in langs for line in pretrain)
    short = [line for line in pretrain if "/models/bert-w20 " in line]
    assert len(short) == 2 and all("--stream-len 20 " in line for line in short)
    default = [line for line in pretrain if "/models/bert " in line]
    assert len(default) == 2 and not any("--stream-len 20 " in line for line in default)
    # every step mixes one batch per language, the scale's windows shared among them
    assert all(f"--langs-per-step {len(langs)} " in line for line in pretrain)
    tokens = {line.split("--stream-len ")[1].split()[0]: int(line.split("--batch-size ")[1].split()[0])
              for line in pretrain}
    assert tokens[[k for k in tokens if k != "20"][0]] == -(-BATCH[scale] // len(langs))
    assert tokens["20"] == tokens[[k for k in tokens if k != "20"][0]] * int([k for k in tokens if k != "20"][0]) // 20
    # Word2Vec at windows 5, 128 and 256 and GloVe, on the same BPE'd text, per size
    embed = xlt_commands(lines, "embed train")
    assert sorted(line.split("--window ")[1].split()[0] for line in embed if "word2vec" in line) == \
        ["128", "128", "256", "256", "5", "5"]
    assert len([line for line in embed if "--method glove" in line]) == 2
    # MRR in the joint space for every model and language, with the part of speech of the English word;
    # twice: on the pairs each model covers (own/, writing them), then on the pairs every model of the
    # size covers (mrr/, what the report reads)
    static = xlt_commands(lines, "align word")
    bert = xlt_commands(lines, "align contextual-word")
    targets = len(langs) - 1
    assert len(static) == 2 * 2 * 4 * targets and len(bert) == 2 * 2 * 2 * targets
    assert all("--map none " in line and "--pos-from " in line and "en_ewt-ud-train.conllu" in line
               for line in static + bert)
    assert all("--subwords mean" in line and "--codes " in line for line in static)
    # BERT's word vectors average its states over every line of the size (the paper: "all contexts")
    for n in (small, big):
        sized = [line for line in bert if f"/liu-fig/n{n}/" in line.split(" -o ")[1]]
        assert len(sized) == 2 * 2 * targets and all(f"--n-sentences {n} " in line for line in sized)
    models = ("bert", "bert-w20", "w2v-w5", "w2v-w128", "w2v-w256", "glove")
    for n in (small, big):
        for lang in langs[1:]:
            def written(pass_dir: str) -> list[str]:
                return [line for line in static + bert if f"-o {work}/liu-fig/n{n}/{pass_dir}/" in line
                        and f"en-{lang}.json" in line]
            own = written("own")
            assert sorted(line.split("--pairs-out ")[1].split()[0] for line in own) == \
                sorted(f"{work}/liu-fig/n{n}/own/{m}/en-{lang}.pairs" for m in models)
            common = written("mrr")
            assert len(common) == 6 and not any("--pairs-out" in line for line in common)
            assert all(sorted(p.split()[0] for p in line.split("--pairs-from ")[1:]) == sorted(
                f"{work}/liu-fig/n{n}/own/{m}/en-{lang}.pairs" for m in models) for line in common)
            # the common pass runs after every model's own pass
            assert min(map(lines.index, common)) > max(map(lines.index, own))
    # XNLI zero-shot for every model, every target in one command; static files through the same runner
    finetune = xlt_commands(lines, "finetune")
    assert len(finetune) == 2 * 6 and all(all(f"--eval {l} " in line for l in langs[1:]) for line in finetune)
    assert len([line for line in finetune if "--model static:" in line and "--codes " in line]) == 2 * 4
    reports = {line.split("report ")[1].split()[0]: line for line in xlt_commands(lines, "report")}
    assert f"--sizes {small},{big} " in reports["liu-figures"]
    assert f"--langs {','.join(langs[1:])} " in reports["liu-figures"]
    assert f"/n{big}/mrr/bert " in reports["liu-pos"]


def test_liu_figures_follow_liu_langs(tmp_path):
    lines = dry_run(tmp_path / "w", "SCALE=smoke", "LIU_LANGS=fr", "reproduce-liu-figures")
    assert len(xlt_commands(lines, "align word")) == 2 * 2 * 4
    assert all("--target-lang fr " in line for line in xlt_commands(lines, "align"))
    assert not any("/de." in line or "-de." in line for line in any_xlt_command(lines))


def test_liu_contexts_can_be_capped(tmp_path):
    lines = dry_run(tmp_path / "w", "SCALE=smoke", "LIU_LANGS=fr", "LIU_CWORD_SENTENCES=300", "reproduce-liu-figures")
    bert = xlt_commands(lines, "align contextual-word")
    assert len(bert) == 2 * 2 * 2 and all("--n-sentences 300 " in line for line in bert)
    assert (tmp_path / "w" / "settings" / "liu-align").read_text().strip().endswith("contexts=300")


# ---- Fake-English (make/text.mk, make/table1.mk) ---------------------------------------------------
def slice_bounds(line: str) -> tuple[int, int]:
    """(lo, hi) of a `make -n` slice command: awk -v lo=N -v hi=$((N + M))."""
    lo = int(re.search(r"-v lo=(\d+)", line).group(1))
    hi = sum(map(int, re.search(r"-v hi=\$\(\(([\d +]+)\)\)", line).group(1).split("+")))
    return lo, hi


def english_corpus(path, lines: int):
    """An xz corpus of ``lines`` English lines (25 bytes each): the Fake-English checks read its size,
    so the tests need no fetched data and do not depend on the size of the mirror's corpus."""
    with path.open("wb") as f:
        subprocess.run(["xz", "-c"], input=b"one line of English text\n" * lines, stdout=f, check=True)
    return path


def test_an_extra_row_is_pretrained_with_its_options_on_its_pair_only(tmp_path):
    """EXTRA_ROWS_fake=sep-l1: Sep L1 (layer 1 language-specific; not a row of the paper) on Fake-English,
    with the separated rows' data and every pretraining seed; the word-order pair records it as missing."""
    work = tmp_path / "w"
    english = english_corpus(tmp_path / "english.txt.xz", 1_100_000)
    lines = dry_run(work, "LANGS=fake fakeperm", "EXTRA_ROWS_fake=sep-l1", f"CORPUS_en={english}", "reproduce-table1")
    plan = "\n".join(lines).replace("\\\n", " ")
    pretrain = [line for line in xlt_commands(plan.splitlines(), "pretrain") if "/models/sep-l1/" in line]
    assert sorted(re.search(r"--run-dir (\S+)", line).group(1) for line in pretrain) == [
        f"{work}/models/sep-l1/en-fake", f"{work}/models/sep-l1/en-fake-seed1"]
    assert all(f"--vocab {work}/data/union/en-fake/vocab " in line and
               re.search(r"--sharing default +--separate-layers 1 1 +--seed \d", line) for line in pretrain)
    cells = [line for line in xlt_commands(plan.splitlines(), "finetune") if f"{work}/table1/sep-l1/" in line]
    assert sorted(line.split(" -o ")[1].split()[0] for line in cells) == [
        f"{work}/table1/sep-l1/en-fake-seed1/ner", *(f"{work}/table1/sep-l1/en-fake/{t}" for t in ("ner", "parse", "xnli"))]
    assert any(f"{work}/table1/sep-l1/en-fakeperm/missing.json.tmp" in line for line in lines)
    # without it, the table is the paper's rows; a row make does not define stops make
    assert not any("/sep-l1/" in line for line in dry_run(work, "LANGS=fake", f"CORPUS_en={english}", "reproduce-table1"))
    proc = subprocess.run(["make", "-n", f"W={work}", "LANGS=fake", "EXTRA_ROWS_fake=sep-l2", "reproduce-table1"],
                          cwd=REPO, capture_output=True, text=True, timeout=120, env=make_env())
    assert proc.returncode != 0 and "EXTRA_ROWS_fake: sep-l2 is not a row (no ROW_sep-l2 in make/table1.mk)" in proc.stderr


def test_the_fake_english_table_reuses_every_rule_with_its_own_text_and_task_files(tmp_path):
    work = tmp_path / "w"
    english = english_corpus(tmp_path / "english.txt.xz", 200_000)   # 5 MB: past SCALE=smoke's 4.2 MB
    plan = "\n".join(dry_run(work, "SCALE=smoke", "LANGS=fake", f"CORPUS_en={english}",
                             "reproduce-table1")).replace("\\\n", " ")
    lines = plan.splitlines()
    # English's and Fake-English's text: adjacent, disjoint stretches of the same corpus; the fake ones mapped
    slices = {re.findall(r"/raw/(\w+\.\w+)", line)[-1]: line for line in lines if "-v lo=" in line}   # by output
    assert {name: slice_bounds(line) for name, line in slices.items()} == {
        "en.dev": (0, 100000), "en.train": (100000, 2100000), "fake.train": (2100000, 4100000),
        "fake.dev": (4100000, 4200000)}
    assert all(line.startswith(f"xz -dc {english} ") for line in slices.values())
    for split in ("train", "dev"):   # without the lines English's slices have too (Wikipedia repeats some)
        assert re.search(rf"awk .* {work}/raw/en.dev {work}/raw/en.train - \| .venv/bin/xlt -q fake-english "
                         rf"--format text -o {work}/raw/fake.{split}.tmp$", slices[f"fake.{split}"])
    assert len([line for line in xlt_commands(lines, "-q tokenize") if "--lang fake " in line]) == 2
    # Default: one joint BPE over both texts
    learned = xlt_commands(lines, "bpe learn")
    assert any(line.endswith(f"{work}/text/en.train {work}/text/fake.train") for line in learned)
    # every row that exists here, and the control; the rows that cannot, as missing cells with the reason
    pretrain = xlt_commands(lines, "pretrain")
    rows = sorted(line.split("/models/")[1].split("/")[0] for line in pretrain)
    assert rows == sorted(["default", "extra-anchors", "sep-emb", "sep-emb+l1-3", "sep-emb+l1-6", "sep-l1-3",
                           "sep-l1-6"])
    assert all("--train fake " in line and "/en-fake " in line for line in pretrain)
    finetune = xlt_commands(lines, "finetune")
    assert len(finetune) == 7 * 3 + 3 and all("--eval fake " in line for line in finetune)
    assert len([line for line in finetune if "--checkpoint untrained" in line]) == 3
    missing = [line for line in lines if "missing.json.tmp" in line]
    assert sorted(line.split("/table1/")[1].split("/")[0] for line in missing) == \
        ["default-anchors", "no-anchors", "wiki-cc"]
    assert all('"not applicable to Fake-English: ' in line for line in missing)
    # task files: English's test and dev sets (the same samples the English scores use), mapped
    tasks = {line.split(" -o ")[1]: line for line in xlt_commands(lines, "-q fake-english")
             if "--format text" not in line}
    t = f"{work}/tasks"
    expected = {f"{t}/xnli/test-fake.tsv": f"--format xnli {t}/xnli/test-en.tsv",
                f"{t}/ner/wikiann/fake/test": f"--format wikiann {t}/ner/wikiann/en/test",
                f"{t}/ud/fake_ewt/fake_ewt-ud-test.conllu": f"--format conllu {t}/ud/en_ewt/en_ewt-ud-test.conllu",
                f"{work}/dict/en-fake.txt": "--format dictionary"}
    # Extra anchors: the identity dictionary both ways, over the English words of the en-fr MUSE training split
    assert tasks[f"{work}/dict/en-fake.txt"].startswith("cut -f1 data/muse/splits_reconstructed/en-fr.0-5000.txt |")
    for output, source in expected.items():
        assert source in tasks[output], tasks[output]
    assert len(tasks) == 2 * 3 + 1
    for test in (f"{t}/xnli/test-en.tsv", f"{t}/ner/wikiann/en/test", f"{t}/ud/en_ewt/en_ewt-ud-test.conllu"):
        assert any(f"--eval en {test} " in line for line in xlt_commands(lines, "-q baselines"))
    switched = xlt_commands(lines, "codeswitch")
    assert [line.split("--dict ")[1].split()[0] for line in switched] == [f"{work}/dict/en-fake.txt",
                                                                            f"{work}/dict/fake-en.txt"]
    assert "--langs fake" in xlt_commands(lines, "report")[0]


def test_fake_english_refuses_a_scale_whose_english_slice_takes_the_whole_corpus(tmp_path):
    # A small English corpus of our own: the check reads its size, so it needs no fetched data.
    english = english_corpus(tmp_path / "english.txt.xz", 1000)
    env = make_env()
    for scale in ("cpu", "gpu"):
        proc = subprocess.run(["make", "-n", f"W={tmp_path}", f"SCALE={scale}", "LANGS=fake", f"CORPUS_en={english}",
                               "reproduce-table1"], cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
        assert proc.returncode != 0 and proc.stdout == ""
        assert "Fake-English needs English text beyond en's training slice" in proc.stderr
        assert "set CORPUS_fake to other English text" in proc.stderr and "SCALE=smoke or SCALE=demo" in proc.stderr
    # a corpus not fetched yet: the plan is made (its slicing stops on the missing file, as every language's)
    assert dry_run(tmp_path / "w", "SCALE=smoke", "LANGS=fake", f"XLT_DATA={tmp_path / 'not-fetched'}",
                   "reproduce-table1")
    # other English text: Fake-English's slices start at its beginning
    other = english_corpus(tmp_path / "other.txt.xz", 90_000)   # SCALE=smoke's TRAIN_BYTES + DEV_BYTES: 2.1 MB
    lines = dry_run(tmp_path / "w", "SCALE=smoke", "LANGS=fake", f"CORPUS_fake={other}", "reproduce-table1")
    fake = [line for line in lines if str(other) in line and "-v lo=" in line]
    assert sorted(slice_bounds(line) for line in fake) == [(0, 2000000), (2000000, 2100000)]


def test_the_demo_pretrains_fake_english_pairs_with_their_own_longer_recipe_and_other_pairs_with_the_scales(tmp_path):
    english = english_corpus(tmp_path / "english.txt.xz", 1_100_000)   # 27.5 MB: past the demo's fake slices
    lines = dry_run(tmp_path / "w", "LANGS=fr fake", f"CORPUS_en={english}", "pretrain-table1")
    plan = "\n".join(lines).replace("\\\n", " ")
    recipes = {re.search(r"--run-dir \S+/models/(\S+) ", line).group(1):
               (re.search(r"--max-steps (\d+)", line).group(1), re.search(r"--short-stream-steps (\d+)", line).group(1))
               for line in plan.splitlines() if re.search(r"xlt pretrain ", line)}
    assert recipes["default/en-fake"] == recipes["sep-emb+l1-6/en-fake"] == ("15000", "5000")
    assert recipes["default/en-fr"] == recipes["sep-emb+l1-6/en-fr"] == ("7500", "2500")
    # a caller's own STEPS_fake wins, as any scale setting
    plan = "\n".join(dry_run(tmp_path / "w", "LANGS=fake", f"CORPUS_en={english}", "STEPS_fake=9000",
                             "pretrain-table1")).replace("\\\n", " ")
    pretrain = [line for line in plan.splitlines() if "xlt pretrain " in line]
    assert pretrain and all("--max-steps 9000 " in line for line in pretrain)


def test_a_pair_fine_tunes_with_its_own_arguments_and_their_change_reruns_only_its_cells(tmp_path):
    work = tmp_path / "w"
    english = english_corpus(tmp_path / "english.txt.xz", 1_100_000)   # past the demo's fake slices
    plan = " ".join(dry_run(work, "LANGS=fr fake", f"CORPUS_en={english}", "XNLI_ARGS_fake=--epochs 8",
                            "reproduce-table1")).replace("\\ ", " ")
    epochs = dict(re.findall(r"xlt finetune xnli --model \S+ (?:--checkpoint untrained )?-o \S+/table1/(\S+)/xnli .*?"
                             r"--epochs (\d+)", plan))
    rows = {"default", "control", "extra-anchors", "sep-emb", "sep-emb+l1-3", "sep-emb+l1-6", "sep-l1-3", "sep-l1-6"}
    assert epochs == {**{f"{row}/en-fake": "8" for row in rows},
                      **{f"{row}/en-fr": "3" for row in rows | {"wiki-cc", "default-anchors", "no-anchors"}}}

    # finished cells of both pairs: only the pair whose arguments change is fine-tuned again
    results = {lang: work / "table1" / "default" / f"en-{lang}" / "xnli" / "results.json" for lang in ("fr", "fake")}
    old = [flag for lang in ("fr", "fake") for name in (f"models/default/en-{lang}/finished", "tasks/nli/mnli/mnli_20k.tsv",
                                                        "tasks/xnli/dev-en.tsv", f"tasks/xnli/dev-{lang}.tsv",
                                                        f"tasks/xnli/test-{lang}.tsv") for flag in ("-o", str(work / name))]
    dry_run(work, "LANGS=fr fake", *map(str, results.values()), *old)   # records the settings (the plan's were --epochs 8)
    settings = [work / "settings" / name for name in ("seeds-xnli", "args-xnli-fr", "args-xnli-fake",
                                                              "train-xnli")]
    touch_in_order([*settings, *results.values()], seconds_ago=500)    # as a finished run leaves them
    assert xlt_commands(dry_run(work, "LANGS=fr fake", *map(str, results.values()), *old), "finetune") == []
    rerun = xlt_commands(dry_run(work, "LANGS=fr fake", "XNLI_ARGS_fake=--epochs 5", *map(str, results.values()), *old),
                         "finetune")
    assert len(rerun) == 1 and "-o " + str(results["fake"].parent) in rerun[0] and "--epochs 5" in rerun[0]


def test_the_demo_pretrains_each_fake_english_row_twice_and_fine_tunes_the_second_seed_on_ner(tmp_path):
    english = english_corpus(tmp_path / "english.txt.xz", 1_100_000)   # past the demo's fake slices
    plan = "\n".join(dry_run(tmp_path / "w", "LANGS=fr fake", f"CORPUS_en={english}",
                             "reproduce-table1")).replace("\\\n", " ")
    pretrain = {re.search(r"--run-dir \S+/models/(\S+) ", line).group(1): line
                for line in plan.splitlines() if re.search(r"xlt pretrain ", line)}
    rows = ["default", "extra-anchors", "sep-emb", "sep-emb+l1-3", "sep-emb+l1-6", "sep-l1-3", "sep-l1-6"]
    assert sorted(m for m in pretrain if "fake" in m) == sorted(f"{r}/en-fake{s}" for r in rows for s in ("", "-seed1"))
    assert not any("en-fr-seed" in m for m in pretrain)   # en-fr keeps one pretraining seed
    # Fake-English's models drop XLM's language embeddings (LANG_EMBEDDINGS_fake); en-fr's keep them
    assert all((" --no-lang-embeddings" in line) == ("/en-fake" in m) for m, line in pretrain.items())
    for row in rows:
        first, second = pretrain[f"{row}/en-fake"], pretrain[f"{row}/en-fake-seed1"]
        assert " --seed 0 " in first and " --seed 1 " in second
        # the same data and arguments, only the seed and the run directory differ
        assert first.replace(" --seed 0 ", " ").replace("/en-fake ", "/en-fake-seed1 ", 1) == \
            second.replace(" --seed 1 ", " ")
    tuned = [re.search(r"-o \S+/table1/(\S+)", line).group(1) for line in xlt_commands(plan.splitlines(), "finetune")]
    assert sorted(c for c in tuned if "-seed1/" in c) == sorted(f"{r}/en-fake-seed1/ner" for r in rows)
    assert len([c for c in tuned if "/en-fake/" in c]) == 8 * 3   # seven rows and the control, three tasks
    # a third seed is a setting away, and fine-tunes the tasks asked for
    plan = "\n".join(dry_run(tmp_path / "w", "LANGS=fake", f"CORPUS_en={english}", "PRETRAIN_SEEDS_fake=0 1 2",
                             "PRETRAIN_SEED_TASKS=ner parse", "reproduce-table1")).replace("\\\n", " ")
    tuned = [re.search(r"-o \S+/table1/(\S+)", line).group(1) for line in xlt_commands(plan.splitlines(), "finetune")]
    assert sorted(c for c in tuned if "-seed" in c) == sorted(f"{r}/en-fake-seed{s}/{t}" for r in rows for s in (1, 2)
                                                              for t in ("ner", "parse"))
    assert any(re.search(r"--run-dir \S+/models/default/en-fake-seed2 .* --seed 2 ", line) for line in plan.splitlines())
