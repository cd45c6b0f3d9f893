"""Where a make run's time goes: the log of bench/timed_shell.sh added up by stage and by row.

    make reproduce-table1 SHELL=$PWD/bench/timed_shell.sh TIMED_LOG=$PWD/work/timed.log
    .venv/bin/python bench/stage_times.py work/timed.log

A stage is the command a recipe line runs: an xlt subcommand with its task or format (``finetune
ner``, ``bpe apply``, ``report table1``), or the first program of any other line (``xz``, ``mkdir``).
A row is the Table 1 row a line's paths name (``models/ROW/`` or ``table1/ROW/``), for the second
table. CPU time is user + system, the line's children included; the figures never fail a run, they
say where to look.
"""

from __future__ import annotations

import argparse
import re
import shlex
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable, Optional

# subcommands whose next word says what they do (``finetune ner``); the rest stand alone
TWO_WORD = {"finetune", "bpe", "report", "data", "baselines", "align", "cka", "store", "embed", "track", "export"}
ROW = re.compile(r"(?:models|table1|runs)/([A-Za-z0-9_.+-]+)/")


@dataclass
class Line:
    wall: float
    cpu: float
    max_rss_kb: int
    status: int
    command: str


def read_log(lines: Iterable[str]) -> list[Line]:
    """Parse ``wall user sys rss status<TAB>command`` lines; a line /usr/bin/time wrote otherwise
    (a command killed by a signal puts its own line first) is skipped."""
    parsed = []
    for text in lines:
        figures, sep, command = text.rstrip("\n").partition("\t")
        fields = figures.split()
        if not sep or len(fields) != 5:
            continue
        try:
            wall, user, system = (float(x) for x in fields[:3])
            parsed.append(Line(wall, user + system, int(fields[3]), int(fields[4]), command))
        except ValueError:
            continue
    return parsed


def stage(command: str) -> str:
    """The stage a command line belongs to: its first xlt subcommand, else its first program."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    programs = [w for w in words if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", w)]  # no VAR=value
    for i, word in enumerate(programs):
        if word.rsplit("/", 1)[-1] == "xlt":
            rest = [w for w in programs[i + 1:] if not w.startswith("-")]
            if not rest:
                return "xlt"
            if rest[0] in TWO_WORD and len(rest) > 1:
                return f"{rest[0]} {rest[1]}"
            return rest[0]
    for word in programs:
        if word not in ("&&", "||", ";", "|", "(", ")", "cd", "set", "test", "[") and not word.startswith("-"):
            return word.rsplit("/", 1)[-1]
    return "(empty)"


def row(command: str) -> Optional[str]:
    found = ROW.search(command)
    return found.group(1) if found else None


def totals(lines: Iterable[Line], key) -> dict[str, list[float]]:
    """``key(line)`` -> [lines, wall s, CPU s, peak RSS MB], the line with the most CPU time first."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for line in lines:
        name = key(line)
        if name is None:
            continue
        entry = sums[name]
        entry[0] += 1
        entry[1] += line.wall
        entry[2] += line.cpu
        entry[3] = max(entry[3], line.max_rss_kb / 1024)
    return dict(sorted(sums.items(), key=lambda item: -item[1][2]))


def table(title: str, sums: dict[str, list[float]], total_cpu: float) -> str:
    rows = [f"| {title} | lines | wall s | CPU s | share of CPU | peak RSS MB |", "|---|---|---|---|---|---|"]
    for name, (n, wall, cpu, rss) in sums.items():
        share = cpu / total_cpu if total_cpu else 0.0
        rows.append(f"| {name} | {n:.0f} | {wall:,.0f} | {cpu:,.0f} | {share:.1%} | {rss:,.0f} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log", help="the TIMED_LOG that bench/timed_shell.sh appended to")
    args = parser.parse_args()
    with open(args.log, encoding="utf-8", errors="replace") as f:
        lines = read_log(f)
    total_cpu = sum(line.cpu for line in lines)
    failed = [line for line in lines if line.status != 0]
    print(f"{len(lines)} command lines, {total_cpu:,.0f} CPU-s in all, {len(failed)} failed\n")
    print(table("stage", totals(lines, lambda line: stage(line.command)), total_cpu))
    print()
    print(table("row", totals(lines, lambda line: row(line.command)), total_cpu))


if __name__ == "__main__":
    main()
