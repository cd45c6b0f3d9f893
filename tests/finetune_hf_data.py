"""Tiny learnable NER, XNLI and parsing files in the synthetic grammar's two languages (tests/synthetic.py),
for fine-tuning the tiny transformers models of tests/hf_fixtures.py.

* NER: the nouns are entities, ``ANI`` (animals) or ``OBJ`` (everything else); every other word is ``O``.
* XNLI: premise and hypothesis are sentences of the grammar; the label is the hypothesis's verb
  (sees: entailment, likes: neutral, finds: contradiction) -- a pair whose answer lies in its second segment.
* Parsing: every sentence has the grammar's one tree (``det adj noun verb det noun .`` in en, the
  adjective after its noun in fr).
"""

from __future__ import annotations

import random
from pathlib import Path

import synthetic

ANIMALS = {"cat", "dog", "bird", "child", "chat", "chien", "oiseau", "enfant"}
NOUNS = {en for en, _ in synthetic.LEXICON["noun"]} | {fr for _, fr in synthetic.LEXICON["noun"]}
VERB_LABEL = {"sees": "entailment", "likes": "neutral", "finds": "contradiction",
              "voit": "entailment", "aime": "neutral", "trouve": "contradiction"}
# (head, relation, UPOS) of each position of a sentence, per language
TREES = {"en": [(3, "det", "DET"), (3, "amod", "ADJ"), (4, "nsubj", "NOUN"), (0, "root", "VERB"),
                (6, "det", "DET"), (4, "obj", "NOUN"), (4, "punct", "PUNCT")],
         "fr": [(2, "det", "DET"), (4, "nsubj", "NOUN"), (2, "amod", "ADJ"), (0, "root", "VERB"),
                (6, "det", "DET"), (4, "obj", "NOUN"), (4, "punct", "PUNCT")]}


def sentences(lang: str, n: int, seed: int) -> list[list[str]]:
    en, fr = synthetic.corpus(n, seed)
    return [line.split() for line in (en if lang == "en" else fr)]


def tag(word: str) -> str:
    return ("B-ANI" if word in ANIMALS else "B-OBJ") if word in NOUNS else "O"


def write_ner(path: Path, lang: str, n: int, seed: int) -> Path:
    blocks = ["\n".join(f"{w} {tag(w)}" for w in words) for words in sentences(lang, n, seed)]
    path.write_text("\n\n".join(blocks) + "\n", encoding="utf-8")
    return path


def write_nli(path: Path, lang: str, n: int, seed: int) -> Path:
    rng = random.Random(seed)
    premises, hypotheses = sentences(lang, n, seed), sentences(lang, 4 * n, seed + 1000)
    kept = [h for h in hypotheses if h[3] in VERB_LABEL]
    lines = []
    for premise in premises:
        hypothesis = rng.choice(kept)
        lines.append(f"{' '.join(premise)}\t{' '.join(hypothesis)}\t{VERB_LABEL[hypothesis[3]]}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_conllu(path: Path, lang: str, n: int, seed: int) -> Path:
    blocks = []
    for words in sentences(lang, n, seed):
        rows = [f"{i}\t{w}\t_\t{upos}\t_\t_\t{head}\t{rel}\t_\t_"
                for i, (w, (head, rel, upos)) in enumerate(zip(words, TREES[lang]), start=1)]
        blocks.append("\n".join(rows))
    path.write_text("\n\n".join(blocks) + "\n\n", encoding="utf-8")
    return path


WRITERS = {"ner": (write_ner, ""), "xnli": (write_nli, ".tsv"), "parse": (write_conllu, ".conllu")}


def write_task(root: Path, task: str, n_train: int = 160, n_eval: int = 40) -> dict[str, Path]:
    """root/TASK/{train,dev,test}.{en,fr}: en trains, both languages evaluate (distinct seeds per split)."""
    write, suffix = WRITERS[task]
    folder = root / task
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for split, n, seed in (("train", n_train, 11), ("dev", n_eval, 12), ("test", n_eval, 13)):
        for lang in ("en", "fr"):
            files[f"{split}.{lang}"] = write(folder / f"{split}.{lang}{suffix}", lang, n, seed)
    return files


def task_args(files: dict[str, Path]) -> list[str]:
    """``xlt finetune`` data options for :func:`write_task`'s files: en source, fr target."""
    return ["--train", "en", str(files["train.en"]), "--dev", "en", str(files["dev.en"]),
            "--eval", "en", str(files["dev.en"]), str(files["test.en"]),
            "--eval", "fr", str(files["dev.fr"]), str(files["test.fr"])]
