#!/usr/bin/env python3
"""Fails when the modules of the server's library or of the score engine's use each other in
a circle.

Reads the `uses` edges between modules that `cargo modules dependencies` prints (items
filtered out, so an edge means "some item of A names an item of B") and lifts each edge to
the two sibling modules under the pair's nearest common parent: `app::explain → config`
becomes `app → config`. An edge from a module to one of its ancestors (a child using its
parent's items) says nothing about layering and is left out. Every parent's siblings must
form an acyclic graph; a cycle is printed with one edge that makes it.
"""
import re
import subprocess
import sys
from collections import defaultdict

PACKAGES = ["ranking-server", "ranking-domain"]


def edges(dot):
    pat = re.compile(r'^\s*"([^"]+)" -> "([^"]+)" \[label="uses"', re.M)
    return pat.findall(dot)


def lift(a, b):
    pa, pb = a.split("::"), b.split("::")
    i = 0
    while i < min(len(pa), len(pb)) and pa[i] == pb[i]:
        i += 1
    if i == len(pa) or i == len(pb):
        return None  # one is the other's ancestor
    return "::".join(pa[:i]), pa[i], pb[i]


def main():
    failed = False
    for package in PACKAGES:
        failed |= check(package)
    sys.exit(1 if failed else 0)


def check(package):
    dot = subprocess.run(
        ["cargo", "modules", "dependencies", "--package", package, "--lib",
         "--no-fns", "--no-traits", "--no-types", "--no-externs", "--no-sysroot",
         "--no-owns", "--layout", "dot"],
        check=True, capture_output=True, text=True).stdout
    graphs = defaultdict(lambda: defaultdict(set))
    witness = {}
    found = edges(dot)
    if not found:
        sys.exit(f"module-cycles: cargo modules printed no edges for {package}")
    for a, b in found:
        lifted = lift(a, b)
        if lifted is None:
            continue
        parent, x, y = lifted
        graphs[parent][x].add(y)
        witness.setdefault((parent, x, y), (a, b))
    cycles = []
    for parent, g in sorted(graphs.items()):
        state = {}

        def visit(node, path):
            state[node] = 1
            for nxt in sorted(g.get(node, ())):
                if state.get(nxt) == 1:
                    cycle = path[path.index(nxt):] + [nxt]
                    cycles.append((parent, cycle))
                elif nxt not in state:
                    visit(nxt, path + [nxt])
            state[node] = 2

        for node in sorted(g):
            if node not in state:
                visit(node, [node])
    for parent, cycle in cycles:
        print(f"cycle under {parent}: {' -> '.join(cycle)}")
        for x, y in zip(cycle, cycle[1:]):
            a, b = witness[(parent, x, y)]
            print(f"    {x} -> {y}: {a} uses {b}")
    print(f"module-cycles: {package}: {len(found)} module edges, {len(cycles)} cycles")
    return bool(cycles)


if __name__ == "__main__":
    main()
