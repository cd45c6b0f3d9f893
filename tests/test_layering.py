"""Import layering: xlt.analysis and xlt.finetune never import each other; what both need (the
test-time intervention files of xlt.model.interventions) sits below them.

Read from the source with ``ast``, so an import inside a function, which a check of what is loaded
would only see once that function runs, counts as well.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "xlt"


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


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


@pytest.mark.parametrize("importer, forbidden", [("xlt.analysis", "xlt.finetune"), ("xlt.finetune", "xlt.analysis")])
def test_analysis_and_finetune_do_not_import_each_other(importer, forbidden):
    offenders = sorted(f"{name} imports {target}" for name, path in MODULES.items() if within(name, importer)
                       for target in imported_modules(path) if within(target, forbidden))
    assert not offenders, "\n".join(offenders)


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


def test_the_check_sees_nested_and_relative_imports(tmp_path):
    sub = tmp_path / "xlt" / "analysis"
    sub.mkdir(parents=True)
    source = sub / "probe.py"
    source.write_text("def f():\n    from ..finetune import runner\n\n"
                      "def g():\n    import xlt.finetune.task\n", encoding="utf-8")
    assert {"xlt.finetune", "xlt.finetune.runner", "xlt.finetune.task"} <= imported_modules(source, tmp_path / "xlt")
