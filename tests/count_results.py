#!/usr/bin/env python3
"""Sums test cases over every test target under a bazel-testlogs directory.

Usage: count_results.py TESTLOGS [//pkg:target ...]; with targets, only
their results count (the targets of this run, not logs an earlier run left).
Prints "PASSED FAILED". A test target without test cases (a script test) counts
as one case, passed or failed by its own result. A target that left a test.log
but no readable test.xml (killed on timeout, crashed before writing it) counts
as one failed case and is named on stderr, so nothing disappears from the sum.
"""
import pathlib
import sys
import xml.etree.ElementTree as ET


def count_xml(xml: pathlib.Path) -> tuple:
    passed = failed = 0
    tree = ET.parse(xml)
    cases = list(tree.iter("testcase"))
    for case in cases:
        if case.get("status") == "notrun":
            continue
        bad = case.find("failure") is not None or case.find("error") is not None
        failed += bad
        passed += not bad
    if not cases:
        suites = list(tree.iter("testsuite"))
        bad = any(int(s.get("failures", 0)) or int(s.get("errors", 0)) for s in suites)
        failed += bad
        passed += not bad
    return passed, failed


def main(root: str, targets: list) -> None:
    # "//pkg/sub:name" -> "pkg/sub/name", the target's directory under root.
    only = {t.lstrip("/").replace(":", "/") for t in targets}
    passed = failed = 0
    for log in pathlib.Path(root).rglob("test.log"):
        if only and str(log.parent.relative_to(root)) not in only:
            continue  # not in this run (e.g. left by a target since deleted)
        # run_N_of_M/ are left by an earlier `--runs_per_test` run (tests/run.sh
        # never asks for one); the target's own test.log is the latest result.
        if log.parent.name.startswith("run_") and "_of_" in log.parent.name:
            continue
        xml = log.with_name("test.xml")
        target = str(log.parent.relative_to(root))
        try:
            p, f = count_xml(xml)
        except (OSError, ET.ParseError) as e:
            print(f"no test results from {target}: {e}", file=sys.stderr)
            p, f = 0, 1
        if f:
            print(f"failed: {target}", file=sys.stderr)
        passed += p
        failed += f
    print(passed, failed)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
