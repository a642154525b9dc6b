"""Compare an Autobahn report (index.json) with the committed expected results.

Usage: autobahn_compare.py INDEX_JSON EXPECTED_JSON [--write]
Fails (exit 1) on any FAILED case, any NON-STRICT case, or any case whose behaviour differs from
the expected file. --write records the report as the new expectation instead.
"""
import json
import sys


def load_report(path):
    data = json.load(open(path))
    (agent, cases), = data.items()
    return agent, {case: r["behavior"] + ("/" + r["behaviorClose"] if r.get("behaviorClose") not in (None, "OK", "INFORMATIONAL") else "")
                   for case, r in cases.items()}


def main():
    index, expected_path = sys.argv[1], sys.argv[2]
    agent, got = load_report(index)
    if "--write" in sys.argv:
        json.dump(dict(sorted(got.items(), key=lambda kv: [int(x) for x in kv[0].split(".")])),
                  open(expected_path, "w"), indent=1)
        print(f"wrote {len(got)} cases to {expected_path}")
        return 0
    expected = json.load(open(expected_path))
    problems = []
    for case, behaviour in sorted(got.items()):
        if behaviour.startswith(("FAILED", "NON-STRICT", "UNCLEAN")) or "/" in behaviour:
            problems.append(f"{case}: {behaviour}")
        elif expected.get(case) != behaviour:
            problems.append(f"{case}: {behaviour}, expected {expected.get(case)}")
    for case in sorted(set(expected) - set(got)):
        problems.append(f"{case}: missing from the report")
    passed = len(got) - len(problems)
    print(f"autobahn {agent}: {passed} passed, {len(problems)} failed")
    for p in problems:
        print("  " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
