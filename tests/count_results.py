#!/usr/bin/env python3
"""Sums test cases over every test.xml under a bazel-testlogs directory.

Prints "PASSED FAILED". A test target without test cases (a script test) counts
as one case, passed or failed by its own result.
"""
import pathlib
import sys
import xml.etree.ElementTree as ET


def main(root: str) -> None:
    passed = failed = 0
    for xml in pathlib.Path(root).rglob("test.xml"):
        try:
            tree = ET.parse(xml)
        except ET.ParseError:
            failed += 1
            continue
        cases = list(tree.iter("testcase"))
        for case in cases:
            bad = case.find("failure") is not None or case.find("error") is not None
            if case.get("status") == "notrun":
                continue
            failed += bad
            passed += not bad
        if not cases:
            suites = list(tree.iter("testsuite"))
            bad = any(int(s.get("failures", 0)) or int(s.get("errors", 0)) for s in suites)
            failed += bad
            passed += not bad
    print(passed, failed)


if __name__ == "__main__":
    main(sys.argv[1])
