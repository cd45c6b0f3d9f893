import pytest

from xlt.utils.checkpoint_names import check_checkpoint_name, snapshot_name, snapshot_step
from xlt.utils.errors import XltError


def test_snapshot_names_round_trip_and_only_plain_steps_are_snapshots():
    assert [snapshot_step(snapshot_name(n)) for n in (0, 7, 500, 120000)] == [0, 7, 500, 120000]
    for name in ("best", "last", "step-", "step-01", "step--1", "step-1.5", "step-1 ", "Step-1", "checkpoint-1"):
        assert snapshot_step(name) is None, name


def test_a_checkpoint_name_is_best_last_a_snapshot_or_an_extra_choice():
    assert [check_checkpoint_name(n) for n in ("best", "last", "step-500")] == ["best", "last", "step-500"]
    assert check_checkpoint_name("untrained", also=("untrained",)) == "untrained"
    with pytest.raises(XltError, match=r"one of best, last, step-N .*'untrained'"):
        check_checkpoint_name("untrained")
    with pytest.raises(XltError, match="best, last, untrained, step-N"):
        check_checkpoint_name("step-x", also=("untrained",))
