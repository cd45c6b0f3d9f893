"""What a pretraining run writes beside its checkpoints, and how it hears SIGTERM.

A run directory must describe itself: the vocabulary and BPE codes later stages segment new text
with, the tokenizer settings, the resolved config and the checksums of the stores it read.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import threading
from typing import Any, Iterator, Mapping, Optional

from xlt.data.store import TokenStore
from xlt.pretrain.config import ADDED_DEFAULTS, MUTABLE_KEYS
from xlt.text.tokenize import TokenizerConfig
from xlt.utils.errors import XltError
from xlt.pretrain.snapshots import remove_snapshots
from xlt.utils.outputs import TEMPORARY_SUFFIX, atomic_path, make_directory, remove_stale_temporaries, write_json
from xlt.utils.rundir import check_same_config, read_run_description, write_run_description
from xlt.utils.shapes import MapOf, require_fields
from xlt.utils.textio import file_sha256, read_json

STORE_HEADER_KEYS = ("vocab_sha256", "n_sentences", "n_tokens", "source_sha256", "unk_rate")
# The settings that name input files: a run whose inputs moved (a work directory copied to another
# disk) but did not change resumes with the new paths; one whose inputs changed does not resume.
INPUT_PATH_KEYS = ("vocab", "train", "dev", "codes")


def describe_run(run_dir: str, resolved: dict[str, Any], vocab_path: str, vocab_sha256: str,
                 codes: Mapping[str, str], tokenizers: Mapping[str, TokenizerConfig],
                 stores: Mapping[str, Mapping[str, TokenStore]], resumed_at_step: Optional[int] = None,
                 processes: int = 1, device: Optional[Any] = None) -> None:
    """Copy what later stages need to treat new text exactly as in training, and write config.json
    (a resumed run's adds this attempt to its resumes).

    ``stores`` maps a split ("train", "dev") to its stores by language.
    """
    copies = [(vocab_path, "vocab"), (vocab_path + ".langs.json", "vocab.langs.json")]
    copies += [(path, f"codes.{lang}") for lang, path in codes.items()]
    for src, dst in copies:
        if os.path.exists(src):
            copy_if_changed(src, os.path.join(run_dir, dst))
        elif not src.endswith(".langs.json"):
            raise XltError("no such file", src)
    # Per language: the tokenizer settings (with the tokenizer library's version) and the codes file.
    write_json(os.path.join(run_dir, "text.json"), {
        lang: {**tok.to_dict(), "codes": f"codes.{lang}" if lang in codes else None}
        for lang, tok in tokenizers.items()})
    write_run_description(run_dir, resolved, {"vocab_sha256": vocab_sha256, "stores": _described(stores)},
                          None if resumed_at_step is None else {"step": resumed_at_step}, processes, device)


def start_or_resume(run_dir: str, resolved: dict[str, Any], vocab_sha256: str, codes: Mapping[str, str],
                    stores: Mapping[str, Mapping[str, TokenStore]]) -> bool:
    """Create or check ``run_dir`` (rank 0's work) for a run of the ``resolved`` settings on these
    inputs; True when it resumes from its last checkpoint, False when it starts over."""
    checkpoints = os.path.join(run_dir, "checkpoints")
    last, best = os.path.join(checkpoints, "last.pt"), os.path.join(checkpoints, "best.pt")
    make_directory(checkpoints)
    remove_leftovers(run_dir)
    # Without a checkpoint there is nothing to resume: whatever an earlier attempt (failed or
    # killed before its first save, maybe with other settings) left is started over.
    changed = changed_inputs(run_dir, vocab_sha256, codes, stores)
    if os.path.exists(last) and changed:
        # Same paths are not the same data: a store binarized again from other text, or a
        # rebuilt vocabulary, would be trained on silently (or mismatch the embeddings).
        raise XltError(f"run directory holds a run trained on other inputs ({', '.join(changed)} "
                       "changed); use a new directory", os.path.join(run_dir, "config.json"))
    moved = INPUT_PATH_KEYS if changed == [] else ()
    resuming = os.path.exists(last) and check_same_config(run_dir, resolved, MUTABLE_KEYS + moved, ADDED_DEFAULTS)
    if not resuming:  # what an attempt that is started over left is not this run's
        if os.path.exists(best):
            os.unlink(best)
        remove_snapshots(checkpoints)
    return resuming


def _described(stores: Mapping[str, Mapping[str, TokenStore]]) -> dict[str, dict]:
    return {f"{split}/{lang}": {"prefix": store.prefix,
                                **{k: store.header[k] for k in STORE_HEADER_KEYS if k in store.header}}
            for split, by_lang in stores.items() for lang, store in by_lang.items()}


# keys every pretraining run's resolved config has had: a config.json without them is another
# tool's (a fine-tuning run's, a transformers model's), which starting over would overwrite
PRETRAINING_KEYS = ("max_steps", "stream_len", "batch_size", "vocab", "train")


# What a start writes before config.json (an attempt killed there leaves them), and what make adds
# after it: a folder holding anything else and no config.json is not a run's, and starting would
# overwrite or trip over its files.
BEFORE_DESCRIPTION = ("vocab", "vocab.langs.json", "text.json", "checkpoints", ".lock")


def check_pretraining_run(run_dir: str) -> None:
    """XltError unless ``run_dir`` is absent, holds only what a killed start leaves, or holds a
    pretraining run's config.json."""
    path = os.path.join(run_dir, "config.json")
    if not os.path.exists(path):
        foreign = sorted(name for name in (os.listdir(run_dir) if os.path.isdir(run_dir) else ())
                         if name not in BEFORE_DESCRIPTION and not name.startswith("codes.") and not name.endswith(TEMPORARY_SUFFIX))
        if foreign:
            raise XltError(f"not a pretraining run, and not empty ({', '.join(foreign[:3])}"
                           f"{', ...' if len(foreign) > 3 else ''}): use a new directory", run_dir)
        return
    config = read_json(path, "run description")
    config = config.get("config") if isinstance(config, dict) else None
    if not isinstance(config, dict) or not all(key in config for key in PRETRAINING_KEYS) or "task" in config:
        raise XltError("not a pretraining run's description: the directory holds something else (a fine-tuning "
                       "run, a model); use a new directory", path)


def run_identity(run_dir: str) -> Optional[str]:
    """What tells a pretraining run from another pretrained later in the same folder: a digest of its
    settings (but those a resume may change and the input paths; a setting added to xlt since counts
    as its default), of its inputs' checksums, of its number of processes and of the machine it
    started on, which a resume keeps; None without a config.json. Two starts with equal digests
    compute the same weights (a run reproduces bit for bit on one CPU kind)."""
    path = os.path.join(run_dir, "config.json")
    if not os.path.exists(path):
        return None
    description = read_json(path, "run description")
    description = description if isinstance(description, dict) else {}
    config = description.get("config") if isinstance(description.get("config"), dict) else {}
    settled = {k: v for k, v in {**ADDED_DEFAULTS, **config}.items() if k not in MUTABLE_KEYS + INPUT_PATH_KEYS}
    inputs = description.get("inputs") if isinstance(description.get("inputs"), dict) else {}
    stores = inputs.get("stores") if isinstance(inputs.get("stores"), dict) else {}
    checksums = {"vocab_sha256": inputs.get("vocab_sha256"),
                 "stores": {k: {f: v for f, v in h.items() if f != "prefix"} for k, h in stores.items()
                            if isinstance(h, dict)}}
    text = json.dumps({"config": settled, "inputs": checksums, "processes": description.get("processes", 1),
                       "environment": description.get("environment")}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def changed_inputs(run_dir: str, vocab_sha256: str, codes: Mapping[str, str],
                   stores: Mapping[str, Mapping[str, TokenStore]]) -> Optional[list[str]]:
    """The inputs whose content differs from what the run in ``run_dir`` recorded, wherever they are
    now: "vocab", "<split>/<lang>" for a store whose header (its text's checksum, counts) differs,
    "codes.<lang>" for codes unlike the run's copy; [] when all match; None when there is no run
    description, or one too old to record its inputs (then only the paths can be compared)."""
    path = os.path.join(run_dir, "config.json")
    if not os.path.exists(path):
        return None
    description = read_run_description(path)
    recorded = require_fields(description.get("inputs") or {}, {}, path, "a run description's inputs",
                              optional={"vocab_sha256": (str, None), "stores": (MapOf(dict), None)})
    require_fields(description["config"], {}, path, "a run description's settings", optional={"codes": (MapOf(str), None)})
    if not recorded.get("vocab_sha256") or not recorded.get("stores"):
        return None
    changed = []
    if recorded["vocab_sha256"] != vocab_sha256:
        changed.append("vocab")
    before, now = recorded["stores"], _described(stores)
    for key in sorted(set(before) | set(now)):
        old, new = before.get(key, {}), now.get(key, {})
        if key not in before or key not in now or any(old[k] != new[k] for k in old.keys() & new.keys() - {"prefix"}):
            changed.append(key)
    recorded_codes = set((description.get("config") or {}).get("codes") or {})
    for lang in sorted(recorded_codes | set(codes)):
        copy = os.path.join(run_dir, f"codes.{lang}")
        if lang not in codes or lang not in recorded_codes or (
                os.path.exists(copy) and os.path.exists(codes[lang]) and file_sha256(copy) != file_sha256(codes[lang])):
            changed.append(f"codes.{lang}")
    return changed


# Every file of a run directory that xlt writes through atomic_path (names as glob patterns): what a
# process killed mid-write can have left a temporary of.
WRITTEN = ("vocab", "vocab.langs.json", "codes.*", "text.json", "config.json", "metrics.jsonl", "checkpoints/*")


def remove_leftovers(run_dir: str) -> None:
    """Remove the temporaries of the run's files that a killed process left. Only for the holder of
    the run's lock: every writer of these files holds it, so none of them is being written."""
    remove_stale_temporaries(*(os.path.join(run_dir, name) for name in WRITTEN))


def copy_if_changed(src: str, dst: str) -> None:
    """Copy through a temporary name, so a reader of the run (or a kill) never sees a half-written
    vocabulary; a resume leaves an identical copy alone."""
    if os.path.exists(dst) and file_sha256(dst) == file_sha256(src):
        return
    with atomic_path(dst) as tmp:
        shutil.copyfile(src, tmp)


@contextlib.contextmanager
def sigterm_requested() -> Iterator[threading.Event]:
    """An event set by SIGTERM while the block runs (the default handler would kill the process and
    lose everything since the last checkpoint; a preempted GPU job usually gets a grace period)."""
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield stop
        return
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    try:
        yield stop
    finally:
        signal.signal(signal.SIGTERM, previous)
