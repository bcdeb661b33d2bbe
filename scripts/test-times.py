#!/usr/bin/env python3
"""Prints each test target's time from the xUnit reports of one `swift test` run (scripts/test.sh).

A test case's `classname` starts with its target (`EndToEndTests.ForwardingTests`). swift-testing
runs every target's tests at once, and the time it reports for a test runs from the start of the
run to the test's end, so a target's time is that of its last test to finish: how long the run
would have waited for it. The test count and the slowest suite say where that time went.
"""
import sys
import xml.etree.ElementTree as ElementTree
from collections import defaultdict


def main(paths):
    finished = defaultdict(float)
    cases = defaultdict(int)
    slowest = {}
    for path in paths:
        try:
            tree = ElementTree.parse(path)
        except (OSError, ElementTree.ParseError):
            continue  # no report: the run stopped before writing it
        for case in tree.iter("testcase"):
            classname = case.get("classname", "")
            target = classname.split(".")[0] or "(unnamed)"
            seconds = float(case.get("time") or 0)
            cases[target] += 1
            if seconds >= finished[target]:
                finished[target] = seconds
                slowest[target] = classname.split(".", 1)[-1]
    if not finished:
        return
    print("==> time per test target (until its last test ended; the targets run in parallel)")
    for target in sorted(finished, key=finished.get, reverse=True):
        print(f"{finished[target]:9.1f} s  {cases[target]:5d} tests  {target} (last: {slowest[target]})")


if __name__ == "__main__":
    main(sys.argv[1:])
