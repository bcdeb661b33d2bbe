"""Checks a /metrics exposition with a real Prometheus text parser (prometheus_client's), then
the rules of docs/OBSERVABILITY.md: every family is documented there, and every histogram's
buckets are cumulative, end with +Inf equal to _count, and have a _sum.

Usage: check_metrics.py METRICS_FILE OBSERVABILITY_MD [FAMILY_THAT_MUST_HAVE_OBSERVATIONS ...]
Prints "ok" and exits 0, or prints each problem and exits 1.
"""

import sys

from prometheus_client.parser import text_string_to_metric_families


def main() -> int:
    text = open(sys.argv[1], encoding="utf-8").read()
    docs = open(sys.argv[2], encoding="utf-8").read()
    observed_required = set(sys.argv[3:])
    problems = []
    families = list(text_string_to_metric_families(text))  # raises on a malformed exposition
    seen = set()
    for family in families:
        seen.add(family.name)
        # prometheus_client drops a counter's _total from the family name.
        exposed = family.name + "_total" if family.type == "counter" else family.name
        if f"`{exposed}`" not in docs and f"`{exposed}{{" not in docs:
            problems.append(f"{exposed} is not documented in OBSERVABILITY.md")
        if family.type != "histogram":
            continue
        series = {}
        for sample in family.samples:
            labels = {k: v for k, v in sample.labels.items() if k != "le"}
            key = tuple(sorted(labels.items()))
            entry = series.setdefault(key, {"buckets": [], "sum": None, "count": None})
            if sample.name.endswith("_bucket"):
                entry["buckets"].append((float(sample.labels["le"]), sample.value))
            elif sample.name.endswith("_sum"):
                entry["sum"] = sample.value
            elif sample.name.endswith("_count"):
                entry["count"] = sample.value
        total = 0
        for key, entry in series.items():
            bounds = [b for b, _ in entry["buckets"]]
            counts = [c for _, c in entry["buckets"]]
            if bounds != sorted(bounds) or not bounds or bounds[-1] != float("inf"):
                problems.append(f"{family.name}{key}: bounds not increasing to +Inf: {bounds}")
            if counts != sorted(counts):
                problems.append(f"{family.name}{key}: buckets not cumulative: {counts}")
            if entry["count"] is None or entry["sum"] is None or (counts and counts[-1] != entry["count"]):
                problems.append(f"{family.name}{key}: +Inf {counts[-1:]} != _count {entry['count']} (or no _sum)")
            if entry["sum"] is not None and entry["sum"] < 0:
                problems.append(f"{family.name}{key}: negative _sum")
            total += entry["count"] or 0
        if family.name in observed_required and total == 0:
            problems.append(f"{family.name}: no observation")
    for name in observed_required - seen:
        problems.append(f"{name}: not exposed")
    if problems:
        print("\n".join(problems))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
