"""Every relative link in README.md and docs/**/*.md points at a file that exists, and every
``#anchor`` into a Markdown file names one of its headings (GitHub's heading ids). No network:
links with a scheme (https:, mailto:) are not followed. Links inside code (fenced blocks, inline
backticks) are text, not links, and are not checked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import REPO

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
SPLIT_TARGET = re.compile(r"\]\(([^)\s]+)\n")
FENCE = re.compile(r"^\s*(```|~~~)")
# a code span may wrap lines, never a blank one
INLINE_CODE = re.compile(r"(`+)(?:(?!\n[ \t]*\n).)*?\1", re.DOTALL)


def markdown_files(root: Path = REPO) -> list[Path]:
    return [root / "README.md"] + sorted((root / "docs").rglob("*.md"))


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) for each line outside fenced code blocks."""
    out, fenced = [], False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            out.append((number, line))
    return out


def heading_ids(path: Path) -> set[str]:
    """GitHub's ids for a page's headings: lower case, punctuation but ``-`` and ``_`` dropped, each
    space a hyphen; a repeated heading gets ``-1``, ``-2``, ..."""
    ids: set[str] = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        match = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match.group(1).strip().lower()).replace(" ", "-")
        candidate, n = slug, 0
        while candidate in ids:
            n += 1
            candidate = f"{slug}-{n}"
        ids.add(candidate)
    return ids


def broken_links(page: Path, root: Path = REPO) -> list[str]:
    """``page:line: target (why)`` for each local link of ``page`` that does not resolve."""
    problems = []
    lines = dict(prose_lines(page.read_text(encoding="utf-8")))
    # code blocks as empty lines, code spans as their line breaks: line numbers stay, links may wrap
    prose = "\n".join(lines.get(n, "") for n in range(1, max(lines, default=0) + 1))
    prose = INLINE_CODE.sub(lambda m: "\n" * m.group(0).count("\n"), prose)
    for match in SPLIT_TARGET.finditer(prose):  # renders as text, not as a link
        problems.append(f"{page.relative_to(root)}:{prose.count(chr(10), 0, match.start()) + 1}: "
                        f"{match.group(1)} (target split across lines)")
    for match in LINK.finditer(prose):
        target = match.group(1)
        if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # https:, mailto:, ...: not local
            continue
        path_part, _, anchor = target.partition("#")
        resolved = page if not path_part else (page.parent / path_part).resolve()
        number = prose.count("\n", 0, match.end()) + 1
        where = f"{page.relative_to(root)}:{number}: {target}"
        if not resolved.exists():
            problems.append(f"{where} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in heading_ids(resolved):
            problems.append(f"{where} (no heading #{anchor})")
    return problems


@pytest.mark.parametrize("page", markdown_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_local_link_resolves(page):
    assert broken_links(page) == []


def test_the_checker_finds_what_is_broken(tmp_path):
    (tmp_path / "docs" / "notes").mkdir(parents=True)
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## Two words\n")
    note = tmp_path / "docs" / "notes" / "n.md"
    note.write_text(
        "# Note\n"
        "[ok](../a.md) [ok anchor](../a.md#two-words) [self](#note) [web](https://example.org/x.md)\n"
        "[gone](../missing.md) [bad anchor](../a.md#three-words)\n"
        "`[in code](nowhere.md)`\n"
        "```\n[in a block](nowhere.md)\n```\n"
        "![figure](../img.png) [a `code` span that\nwraps](../wrapped.md) [cut](../a-\nmd)\n")
    (tmp_path / "README.md").write_text("[notes](docs/notes/n.md) [dir](docs/notes/)\n")
    assert broken_links(note, tmp_path) == [
        "docs/notes/n.md:9: ../a- (target split across lines)",
        "docs/notes/n.md:3: ../missing.md (no such file)",
        "docs/notes/n.md:3: ../a.md#three-words (no heading #three-words)",
        "docs/notes/n.md:8: ../img.png (no such file)",
        "docs/notes/n.md:9: ../wrapped.md (no such file)"]
    assert broken_links(tmp_path / "README.md", tmp_path) == []


def test_heading_ids_follow_github(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# Liu et al.'s tables of a given model (`make ... MODEL=`)\n"
                    "## `xlt finetune --model`: a transformers model\n## Output\n## Output\n"
                    "```\n# a shell comment, not a heading\n```\n")
    assert heading_ids(page) == {"liu-et-als-tables-of-a-given-model-make--model",
                                 "xlt-finetune---model-a-transformers-model", "output", "output-1"}


def test_every_note_is_indexed_and_opens_with_what_a_user_does():
    """The dated notes are kept off a user's path but not lost: each is listed in notes/README.md,
    and its first paragraph after the title says what it means for a run."""
    notes = REPO / "docs" / "notes"
    index = (notes / "README.md").read_text(encoding="utf-8")
    pages = sorted(p for p in notes.glob("*.md") if p.name != "README.md")
    assert pages
    for page in pages:
        assert re.match(r"\d{4}-\d{2}-\d{2}-[a-z0-9-]+\.md$", page.name), page.name
        assert f"]({page.name})" in index, f"{page.name} is not in docs/notes/README.md"
        first_paragraph = page.read_text(encoding="utf-8").split("\n\n")[1]
        assert first_paragraph.startswith("**What you do:**"), page.name


def test_readme_states_the_two_commands_ci_runs():
    """README's set-up block is the two commands, and CI runs its test command as written there."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("## Set-up: two commands", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    assert commands == ["make reproduce-table1", "make test"]
    ci = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.startswith("#")]
    assert ci[-1] == "make test"
