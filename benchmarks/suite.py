"""The test suite's cost from a JUnit XML report: per-directory share of the test time and the slowest tests.

    python -m pytest -p no:cacheprovider --junitxml=suite.xml      # the README's test command, plus a report
    python benchmarks/suite.py suite.xml --wall 741                # the wall time the run printed, if known

With pytest-xdist the per-test times add up to more than the wall time (two workers run at once); shares are of
the summed test time. The time of session fixtures (the shared all-studies smoke run) is charged to whichever
test asked for them first. Prints markdown tables for benchmarks/README.md.
"""
from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path


def read_report(path: Path) -> list[tuple[str, float]]:
    """``[(test id "dir/file.py::name", seconds)]`` from a JUnit XML file written by pytest."""
    out = []
    for case in ET.parse(path).getroot().iter("testcase"):
        classname, name = case.get("classname", ""), case.get("name", "")
        if not classname:  # a collection-level entry (no test file): not a test
            continue
        parts = classname.split(".")
        # pytest writes classname as the dotted path of the file (plus a class, if any)
        module = "/".join(p for p in parts if not p[:1].isupper())
        out.append((f"{module}.py::{name}", float(case.get("time", 0.0))))
    return out


def directory_of(test_id: str) -> str:
    """``tests/studies/test_x.py::t`` -> ``tests/studies``; ``tests/test_x.py::t`` -> ``tests``."""
    return test_id.split("::", 1)[0].rsplit("/", 1)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("report", type=Path, help="JUnit XML written by pytest --junitxml")
    parser.add_argument("--wall", type=float, default=None, help="the run's wall time (s), for the header")
    parser.add_argument("--top", type=int, default=25, help="slowest tests listed")
    args = parser.parse_args()
    tests = read_report(args.report)
    total = sum(t for _, t in tests)
    by_dir: dict[str, list[float]] = defaultdict(list)
    for test_id, t in tests:
        by_dir[directory_of(test_id)].append(t)
    wall = f", wall {args.wall:.0f} s" if args.wall else ""
    print(f"{len(tests)} tests, {total:.0f} s of test time{wall}\n")
    print("| directory | tests | test time s | share |")
    print("|---|---:|---:|---:|")
    for d, ts in sorted(by_dir.items(), key=lambda kv: -sum(kv[1])):
        print(f"| `{d}` | {len(ts)} | {sum(ts):.0f} | {100 * sum(ts) / total:.0f}% |")
    print(f"\n| slowest tests | s |\n|---|---:|")
    for test_id, t in sorted(tests, key=lambda x: -x[1])[:args.top]:
        print(f"| `{test_id}` | {t:.1f} |")


if __name__ == "__main__":
    main()
