"""Import layering, read from the source with ``ast``: every ``import`` counts, at module level, inside
a function or under ``TYPE_CHECKING`` alike (a check of what is loaded would only see a function's
imports once it runs, and a reader sees them all).

:data:`LAYERS` is the one declared order, lowest first. A module may import its own package and the
packages of lower layers; packages that share a layer never import each other; and no chain of
imports between xlt's modules comes back to where it started.
"""

from __future__ import annotations

import ast
from pathlib import Path


PACKAGE = Path(__file__).resolve().parent.parent / "xlt"

# Lowest first. Each entry is a package (or a module at the package's top); ``xlt`` is the package's
# face (xlt/__init__.py, which imports nothing) and ``xlt.__main__`` only starts the CLI.
LAYERS: list[list[str]] = [
    ["xlt"],
    ["xlt.utils"],                    # errors, files, logging: used by everything
    ["xlt.text"],                     # tokenize, BPE, vocabularies
    ["xlt.data", "xlt.model"],        # token stores, recipes; the network, TextModel, xlt runs and transformers models
    ["xlt.pretrain", "xlt.embed"],    # what makes representations: MLM pretraining, static embeddings
    ["xlt.loader"],                   # the model-kind registry: an xlt run, a transformers model, static vectors
    ["xlt.analysis", "xlt.finetune"],  # what uses representations; neither imports the other
    ["xlt.track"],                    # every snapshot of a run through the analyses and fine-tuning
    ["xlt.report"],                   # the papers' tables and figures from the results
    ["xlt.cli"],
    ["xlt.__main__"],
]


def module_name(path: Path, package_dir: Path = PACKAGE) -> str:
    parts = path.relative_to(package_dir.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, package_dir: Path = PACKAGE) -> set[str]:
    """Every module an ``import`` or ``from ... import`` anywhere in the file names (relative ones
    resolved); ``from a import b`` counts as both ``a`` and ``a.b``, since b may be a submodule."""
    name = module_name(path, package_dir)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
LAYER_OF = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def unit(name: str) -> str:
    """The entry of :data:`LAYERS` a module belongs to: ``xlt.finetune.runner`` -> ``xlt.finetune``."""
    return ".".join(name.split(".")[:2])


def edges(modules: dict[str, Path] = MODULES, package_dir: Path = PACKAGE) -> dict[str, set[str]]:
    """xlt module -> the xlt modules it imports (itself left out)."""
    return {name: {t for t in imported_modules(path, package_dir) if t in modules and t != name}
            for name, path in modules.items()}


def upward(graph: dict[str, set[str]]) -> list[str]:
    """Each import that reaches a higher layer, or a sibling package of its own layer."""
    found = []
    for name, targets in graph.items():
        for target in targets:
            here, there = unit(name), unit(target)
            if here == there:
                continue
            if LAYER_OF[there] >= LAYER_OF[here]:
                found.append(f"{name} imports {target} ({here} is in layer {LAYER_OF[here]}, "
                             f"{there} in layer {LAYER_OF[there]})")
    return sorted(found)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(groups)


def test_every_module_has_a_layer():
    assert not sorted(name for name in MODULES if unit(name) not in LAYER_OF)


def test_the_package_face_imports_nothing():
    assert not edges()["xlt"]


def test_no_import_runs_up_or_sideways():
    assert not upward(edges()), "\n".join(upward(edges()))


def test_no_import_loops():
    assert not cycles(edges()), "\n".join(" <-> ".join(group) for group in cycles(edges()))


def test_interventions_sit_below_analysis_and_finetune():
    """Neither directly nor through what it imports (package __init__ files included)."""
    seen: set[str] = set()
    todo = ["xlt.model.interventions"]
    while todo:
        name = todo.pop()
        if name in seen or name not in MODULES:
            continue
        seen.add(name)
        parents = [".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)]
        todo += [m for m in imported_modules(MODULES[name]) | set(parents) if m in MODULES]
    reached = sorted(m for m in seen if within(m, "xlt.analysis") or within(m, "xlt.finetune"))
    assert not reached, reached


def test_the_check_sees_nested_typing_and_relative_imports(tmp_path):
    sub = tmp_path / "xlt" / "analysis"
    sub.mkdir(parents=True)
    source = sub / "probe.py"
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from xlt.report import plots\n\n"
                      "def f():\n    from ..finetune import runner\n\n"
                      "def g():\n    import xlt.finetune.task\n", encoding="utf-8")
    assert {"xlt.finetune", "xlt.finetune.runner", "xlt.finetune.task", "xlt.report.plots"} \
        <= imported_modules(source, tmp_path / "xlt")


def test_the_checks_catch_a_loop_and_an_arrow_up():
    graph = {"xlt.model.a": {"xlt.pretrain.b"}, "xlt.pretrain.b": {"xlt.model.a"}, "xlt.finetune.c": {"xlt.analysis.d"}}
    assert cycles(graph) == [["xlt.model.a", "xlt.pretrain.b"]]
    assert [line.split(" (")[0] for line in upward(graph)] == ["xlt.finetune.c imports xlt.analysis.d",
                                                               "xlt.model.a imports xlt.pretrain.b"]
