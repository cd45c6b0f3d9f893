"""``xlt track``'s settings.json keeps a measure's settings only where its data was given, and the CLI
refuses a measure's setting given without that measure's data (it would decide nothing).

The records-level behaviour (a changed setting refused before anything is measured) is in
tests/test_track.py; these need no model.
"""

from __future__ import annotations

import json

import pytest
from conftest import assert_one_line_error, run_in_process

from xlt.track.config import TrackConfig
from xlt.track.settings import check_and_record
from xlt.utils.errors import XltError


def config(tmp_path, **settings) -> TrackConfig:
    return TrackConfig(runs=["run"], output=str(tmp_path / "track"), **settings)


def test_ner_settings_are_recorded_only_with_ner_data(tmp_path):
    (tmp_path / "track").mkdir()
    ner = tmp_path / "tasks"
    ner.mkdir()
    # a first call without NER must not fix --ner-lr at its default for the call that adds NER
    check_and_record(config(tmp_path))
    recorded = json.loads((tmp_path / "track" / "settings.json").read_text())
    assert recorded["ner_lr"] is None and recorded["ner_epochs"] is None and recorded["word_sentences"] is None
    check_and_record(config(tmp_path, ner_data_dir=str(ner), ner_lr=1e-3))
    assert json.loads((tmp_path / "track" / "settings.json").read_text())["ner_lr"] == 1e-3
    # once NER was measured one way, another way is refused; a call without NER again changes nothing
    with pytest.raises(XltError, match="--ner-lr 0.003: this tracking directory's records were made with 0.001"):
        check_and_record(config(tmp_path, ner_data_dir=str(ner)))
    check_and_record(config(tmp_path))
    assert json.loads((tmp_path / "track" / "settings.json").read_text())["ner_lr"] == 1e-3


@pytest.mark.parametrize("option, value, data", [("--ner-lr", "1e-3", "--ner-data-dir"),
                                                  ("--ner-epochs", "5", "--ner-data-dir"),
                                                  ("--word-sentences", "100", "--word-corpus")])
def test_a_measures_setting_without_its_data_is_one_error_line(tmp_path, capsys, option, value, data):
    out = tmp_path / "track"
    res = run_in_process(capsys, "track", "--run", tmp_path / "run", "-o", out, option, value)
    assert_one_line_error(res, f"{option} sets a measure read from {data}, which is not given: leave it out")
    assert not out.exists()


@pytest.mark.parametrize("option, value, says", [("--source-lang", "xx", "--source-lang 'xx' is not one of the run's"),
                                                  ("--target-lang", "de", "--target-lang 'de' is not one of the run's")])
def test_a_language_the_run_lacks_is_refused_before_the_tracking_directory_exists(tiny_run, tmp_path, capsys,
                                                                                  option, value, says):
    # a settings.json written first would record the wrong language and refuse the right call after it
    out = tmp_path / "track"
    res = run_in_process(capsys, "-q", "track", "--run", tiny_run, "-o", out, "--device", "cpu", option, value)
    assert_one_line_error(res, str(tiny_run), says)
    assert not out.exists()
    res = run_in_process(capsys, "track", "--run", tiny_run, "-o", out, "--device", "cpu")
    assert res.returncode == 0, res.stderr
    assert json.loads((out / "settings.json").read_text())["source_lang"] == "en"
