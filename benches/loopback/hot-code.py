#!/usr/bin/env python3
"""The code a thread runs on every call, from a callgrind profile (BENCHMARKS.md, "Item 8, fourth
session of 2026-11-23": the round trip follows the code touched per call more than its instruction count).

Build with debug info (the `profiling` profile: release plus `debug = 1`), then record the profile
with instruction addresses, one file per thread:

    cargo build --profile profiling -p claude-ide-bridge-bench-loopback
    valgrind --tool=callgrind --dump-instr=yes --separate-threads=yes \\
        target/profiling/claude-ide-bridge-bench-loopback --runtime threads \\
        --notifications 0 --pipelined 0 --calls 20000

then pass the server thread's file and the number of calls:

    benches/loopback/hot-code.py callgrind.out.PID-06 20000 [--functions N]

An instruction is hot when it ran at least 0.9 times per call. Printed: instructions per call, hot
instructions, the 64-byte cache lines and 4 KiB pages they lie in, and with --functions the N
functions with the most hot lines.
"""

import argparse
import collections
import re


def read_profile(path):
    """(cost per instruction address, function name per address, total instructions) of a callgrind
    file written with --dump-instr=yes. Costs of calls (the line after `calls=`) are inclusive
    costs of the callee and are left out, so each address carries only what it ran itself."""
    cost = collections.Counter()
    function = {}
    names = {}
    positions = ["line"]
    current = {}
    current_fn = None
    after_calls = False
    total = 0
    name_ref = re.compile(r"\((\d+)\)(?: (.*))?")
    for raw in open(path, errors="replace"):
        line = raw.rstrip("\n")
        if line.startswith("positions:"):
            positions = line.split()[1:]
            current = {p: 0 for p in positions}
            continue
        if line.startswith("summary:"):
            total = int(line.split()[1])
            continue
        if line.startswith(("fn=", "cfn=")):
            key, _, rest = line.partition("=")
            m = name_ref.match(rest)
            if m:
                if m.group(2):
                    names[m.group(1)] = m.group(2)
                name = names.get(m.group(1), rest)
            else:
                name = rest
            if key == "fn":
                current_fn = name
            continue
        if line.startswith("calls="):
            after_calls = True
            continue
        if not line or not (line[0].isdigit() or line[0] in "+-*"):
            continue
        fields = line.split()
        for pos, text in zip(positions, fields):
            if text == "*":
                continue
            if text[0] in "+-":
                current[pos] += int(text, 0)
            else:
                current[pos] = int(text, 0)
        if after_calls:
            after_calls = False
            continue
        if len(fields) > len(positions):
            address = current["instr"]
            cost[address] += int(fields[len(positions)])
            function[address] = current_fn
    return cost, function, total


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profile", help="callgrind.out file of one thread, recorded with --dump-instr=yes")
    parser.add_argument("calls", type=int, help="the calls the run made (--calls)")
    parser.add_argument("--functions", type=int, default=0, metavar="N")
    args = parser.parse_args()
    cost, function, total = read_profile(args.profile)
    if not cost:
        raise SystemExit("no instruction addresses: record with --dump-instr=yes")
    hot = [a for a, c in cost.items() if c >= 0.9 * args.calls]
    lines = {a >> 6 for a in hot}
    pages = {a >> 12 for a in hot}
    print(
        f"{total / args.calls:.0f} instructions per call; hot: {len(hot)} instructions in "
        f"{len(lines)} cache lines ({len(lines) * 64 / 1024:.1f} KiB) on {len(pages)} pages"
    )
    if args.functions:
        per_function = collections.defaultdict(set)
        for a in hot:
            per_function[function.get(a)].add(a >> 6)
        ranked = sorted(per_function.items(), key=lambda item: -len(item[1]))
        for name, its_lines in ranked[: args.functions]:
            print(f"{len(its_lines):5} {name}")


if __name__ == "__main__":
    main()
