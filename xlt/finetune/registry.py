"""The fine-tuning tasks by name (``get_task("ner", window_owner="first")``), or ``module:Class`` from a
user's own module (a plugin task)."""

from __future__ import annotations

import importlib
from typing import Any, Callable

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


def task_factory(name: str) -> Callable[..., Task]:
    """What makes the task ``name`` names: a built-in task's class, or ``module:Class``'s attribute."""
    if ":" not in name:
        if name not in TASKS:
            raise XltError(f"unknown task {name!r}; known: {', '.join(TASKS)}")
        return TASKS[name]
    module_name, attr = name.split(":", 1)
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise XltError(f"cannot load task {name!r} ({e})") from None


def resolve_task(name: str, settings: dict[str, Any]) -> Task:
    """A built-in task by name, or ``module:Class`` from your own module, built with ``settings``."""
    task = task_factory(name)(**settings)
    if not isinstance(task, Task):
        raise XltError(f"{name!r} does not make an xlt.finetune.task.Task")
    return task
