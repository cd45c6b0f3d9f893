"""Child processes that die with xlt: a parent killed outright (SIGKILL, the OOM killer) cannot stop
its children, which lived on, re-parented to init, working for an output nobody would rename."""

from __future__ import annotations

import ctypes
import functools
import os
import signal
from typing import Callable, Optional

PR_SET_PDEATHSIG = 1


def _prctl() -> Optional[Callable[..., int]]:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):   # not Linux: children stop at the closed pipe, if they read one
        return None


def die_with(parent: int, prctl: Optional[Callable[..., int]] = None) -> None:
    """Called in a child: get SIGKILL when ``parent`` dies (Linux's PR_SET_PDEATHSIG)."""
    prctl = prctl or _prctl()
    if prctl is None:
        return
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:   # the parent died before the call: no signal will come
        os._exit(1)


def dying_with_this_process() -> Optional[Callable[[], None]]:
    """A ``preexec_fn`` for :class:`subprocess.Popen`: the program gets SIGKILL when this process dies.
    prctl is looked up here, before the fork, so the child only makes the call."""
    prctl = _prctl()
    return None if prctl is None else functools.partial(die_with, os.getpid(), prctl)
