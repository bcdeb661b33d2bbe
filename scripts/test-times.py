#!/usr/bin/env python3
"""Prints each test target's time from the xUnit reports of one `swift test` run (scripts/test.sh).

A test case's `classname` starts with its target (`EndToEndTests.ForwardingTests`); a target's
time is the sum of its test cases' times. The tests of a run overlap (swift-testing runs them in
parallel), so the sums say where the time goes, and add up to more than the run's wall time.
"""
import sys
import xml.etree.ElementTree as ElementTree
from collections import defaultdict


def main(paths):
    seconds = defaultdict(float)
    cases = defaultdict(int)
    for path in paths:
        try:
            tree = ElementTree.parse(path)
        except (OSError, ElementTree.ParseError):
            continue  # no report: the run stopped before writing it
        for case in tree.iter("testcase"):
            target = case.get("classname", "").split(".")[0] or "(unnamed)"
            seconds[target] += float(case.get("time") or 0)
            cases[target] += 1
    if not seconds:
        return
    print("==> time per test target (sum of its tests' times; tests run in parallel)")
    for target in sorted(seconds, key=seconds.get, reverse=True):
        print(f"{seconds[target]:10.1f} s  {cases[target]:5d} tests  {target}")


if __name__ == "__main__":
    main(sys.argv[1:])
