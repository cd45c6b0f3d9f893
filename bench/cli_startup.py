"""Wall time of `xlt --help` and `xlt tokenize --help`: what a user waits for before anything runs.

Runs each command ``--repeats`` times in a fresh process (the installed ``xlt`` script beside this
interpreter, else ``python -m xlt``) and prints the fastest and the median run, beside the bare
interpreter's start-up (``python -c pass``) as the floor. Target (issue 13): `xlt --help` under 1 s.
Other jobs on the cores change the figures, so the load average is printed too; the tests check
what is imported (tests/test_cli_help.py), never the time.

Example:
    .venv/bin/python bench/cli_startup.py
    .venv/bin/python bench/cli_startup.py --repeats 20
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def xlt_command() -> list[str]:
    script = Path(sys.executable).parent / "xlt"
    return [str(script)] if script.exists() else [sys.executable, "-m", "xlt"]


def wall_times(argv: list[str], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=10, help="runs per command (default 10)")
    args = parser.parse_args()

    xlt = xlt_command()
    cases = [("python -c pass (floor)", [sys.executable, "-c", "pass"]),
             ("xlt --help", [*xlt, "--help"]),
             ("xlt tokenize --help", [*xlt, "tokenize", "--help"])]
    wall_times(cases[1][1], 1)  # the first run after an install compiles bytecode: not what users wait for
    print(f"{'command':<24} {'min':>8} {'median':>8}   ({args.repeats} runs each)")
    for name, argv in cases:
        times = wall_times(argv, args.repeats)
        print(f"{name:<24} {min(times):>7.3f}s {statistics.median(times):>7.3f}s")
    print("load average: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
