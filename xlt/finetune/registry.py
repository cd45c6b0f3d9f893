"""The fine-tuning tasks by name: ``get_task("ner", window_owner="first")``."""

from __future__ import annotations

from typing import Any

from xlt.finetune.ner import NERTask
from xlt.finetune.parse import ParseTask
from xlt.finetune.task import Task
from xlt.finetune.xnli import XNLITask
from xlt.utils.errors import XltError

TASKS: dict[str, type[Task]] = {"xnli": XNLITask, "ner": NERTask, "parse": ParseTask}


def get_task(name: str, **settings: Any) -> Task:
    """A task instance with its settings (each task's ``Settings`` dataclass lists them)."""
    if name not in TASKS:
        raise XltError(f"unknown task {name!r}; known: {', '.join(TASKS)}")
    return TASKS[name](**settings)
