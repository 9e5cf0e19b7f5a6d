#!/usr/bin/env python3
"""Summarises an Autobahn|Testsuite index.json: a table per case group,
the compact results file that is committed, and the exit status.

    summary.py INDEX.json OUT.json

Passing: behaviour OK (or INFORMATIONAL, which those cases always are) and
behaviour on close OK or INFORMATIONAL. Anything else (FAILED, NON-STRICT,
UNIMPLEMENTED, WRONG CODE, ...) fails the run.
"""
import collections
import json
import sys


def case_key(case):
    return tuple(int(part) for part in case.split("."))


def main(index_path, out_path):
    with open(index_path) as f:
        index = json.load(f)
    (agent, cases), = index.items()
    compact = {}
    groups = collections.OrderedDict()
    bad = []
    for case in sorted(cases, key=case_key):
        result = cases[case]
        behaviour, on_close = result["behavior"], result["behaviorClose"]
        compact[case] = [behaviour, on_close]
        group = groups.setdefault(case.split(".")[0], collections.Counter())
        group[behaviour] += 1
        if behaviour not in ("OK", "INFORMATIONAL") or on_close not in ("OK", "INFORMATIONAL"):
            bad.append((case, behaviour, on_close))
    with open(out_path, "w") as f:
        json.dump({"agent": agent, "cases": compact}, f, indent=0, sort_keys=False)
        f.write("\n")
    print("| group | cases | " + " | ".join(["OK", "INFORMATIONAL", "NON-STRICT", "FAILED", "other"]) + " |")
    print("|---|---|---|---|---|---|---|")
    for group, counts in groups.items():
        other = sum(n for b, n in counts.items() if b not in ("OK", "INFORMATIONAL", "NON-STRICT", "FAILED"))
        print("| %s | %d | %d | %d | %d | %d | %d |" % (
            group, sum(counts.values()), counts["OK"], counts["INFORMATIONAL"],
            counts["NON-STRICT"], counts["FAILED"], other))
    for case, behaviour, on_close in bad:
        print("case %s: %s (on close: %s)" % (case, behaviour, on_close))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
