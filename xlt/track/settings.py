"""The settings a tracking directory's records were made with, kept in ``TRACKDIR/settings.json``.

A record is found again by (run, snapshot, measure) only, so a later ``xlt track`` into the same
directory with another ``--ner-lr`` or another parallel file would skip every snapshot already
measured and measure the new ones its own way: one curve of two settings, with nothing in the
records to tell. So the settings that decide a measure's values are written down the first time they
are given, and a call that gives one of them otherwise is refused before anything is measured.

A setting given for the first time is added (a measure whose data was missing can start later, as
``--measures`` can grow); one left out of a later call is not a change (its measures are not
chosen then). Data files are compared by content (sha256), so a moved or re-linked file is the same
file; NER's data directory by its real path, since its files are copied into the tracking directory
on first use and never read again. Batch size and device are left out: they move a value by
floating-point rounding, not by what is measured.
"""

from __future__ import annotations

import os
from typing import Any

from xlt.track.config import TrackConfig
from xlt.utils.errors import XltError
from xlt.utils.outputs import write_json
from xlt.utils.textio import file_sha256, read_json

SETTINGS = "settings.json"
DATA_FILES = ("parallel", "dictionary", "word_corpus", "tatoeba")
VALUES = ("source_lang", "target_lang", "word_sentences", "max_sentences", "max_words", "ner_train_sentences",
          "ner_epochs", "ner_lr", "ner_batch_size", "ner_max_len")
# Settings of one measure's data: without that data they decide nothing, so they are not written down
# (a first call without NER would otherwise fix --ner-lr at its default for a later call that adds NER).
DATA_SETTINGS = {"ner_data_dir": ("ner_train_sentences", "ner_epochs", "ner_lr", "ner_batch_size", "ner_max_len"),
                 "word_corpus": ("word_sentences",)}


def deciding_settings(cfg: TrackConfig) -> dict[str, Any]:
    """Every setting that decides a measure's values, as it compares (None: not given)."""
    settings: dict[str, Any] = {name: getattr(cfg, name) for name in VALUES}
    for name in DATA_FILES:
        value = getattr(cfg, name)
        paths = [value] if isinstance(value, str) else list(value or ())
        settings[name] = [file_sha256(path) for path in paths] or None
    settings["ner_data_dir"] = None if cfg.ner_data_dir is None else os.path.realpath(cfg.ner_data_dir)
    for data, names in DATA_SETTINGS.items():
        if getattr(cfg, data) is None:
            settings.update(dict.fromkeys(names))
    return settings


def check_and_record(cfg: TrackConfig) -> None:
    """XltError naming the first setting given otherwise than the directory's records were made with;
    else the settings given for the first time are added to ``settings.json``."""
    path = os.path.join(cfg.output, SETTINGS)
    recorded = read_json(path, "tracking settings") if os.path.exists(path) else {}
    if not isinstance(recorded, dict):
        raise XltError("not a JSON object of settings", path)
    now = deciding_settings(cfg)
    for name, value in now.items():
        before = recorded.get(name)
        if value is None or before is None or value == before:
            continue
        option = "--" + name.replace("_", "-")
        made = "files of other content" if name in DATA_FILES else before
        raise XltError(f"{option}{'' if name in DATA_FILES else f' {value}'}: this tracking directory's records were "
                       f"made with {made}; track into another -o, or give it as before", path)
    merged = {**recorded, **{name: value for name, value in now.items() if recorded.get(name) is None}}
    if merged != recorded:
        write_json(path, merged)
