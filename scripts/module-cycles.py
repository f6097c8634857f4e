#!/usr/bin/env python3
"""Fails when the modules of a library (the server's, the score engine's, the client's) use
each other in a circle.

A module uses another when any of its items names one of the other's, wherever it does so:
1. the `uses` edges that `cargo modules dependencies` prints between items (modules, types,
   functions, traits: a `use` declaration, a field's type, a signature), each end taken to
   the module that holds it;
2. the paths written out in the source (`crate::a::b::f(…)`, `super::changes::read_epoch`),
   which cargo modules does not see inside function bodies, each taken to the longest module
   it names.
Each edge is lifted to the two sibling modules under the pair's nearest common parent:
`app::explain → config` becomes `app → config`. An edge from a module to one of its
ancestors (a child using its parent's items) says nothing about layering and is left out.
Every parent's children must form an acyclic graph; a cycle is printed with the items that
make each of its edges.

The server's top-level modules must also use each other only in the documented direction
(docs/ARCHITECTURE.md, "Imports flow one way"): [`DIRECTION`] lists what each may use, and an
edge outside it is printed with the item that makes it. `--self-test` plants a wrong import in
a copy of the sources (an application module naming an adapter) and fails unless it is caught.
"""
import os
import re
import subprocess
import sys
from collections import defaultdict

PACKAGES = [("ranking-server", "server/src"), ("ranking-domain", "domain/src"), ("ranking-client", "client/src")]

NODE = re.compile(r'^\s*"([^"]+)" \[label="([^"|]*)\|', re.M)
EDGE = re.compile(r'^\s*"([^"]+)" -> "([^"]+)" \[label="uses"', re.M)
PATH = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")

# What each top-level module of the server may use (the engine, `domain`, is another crate:
# anything may use it, and it uses nothing of the server). `metrics` is a leaf every layer may
# count into; `test_support` and `startup` wire everything.
ANY = None
DIRECTION = {
    "ports": set(),
    "app": {"ports", "metrics"},
    "adapters": {"ports", "metrics"},
    "wire": {"app", "ports"},
    "grpc": {"app", "wire", "ports", "config", "metrics"},
    "bus": {"app", "wire", "ports", "metrics"},
    "feed": {"wire", "ports", "metrics"},
    "web": {"grpc", "config", "metrics"},
    "config": {"app", "bus", "adapters", "ports"},
    "metrics": set(),
    "metrics_endpoint": {"metrics"},
    "telemetry": set(),
    "startup": ANY,
    "test_support": ANY,
}


def main():
    if sys.argv[1:] == ["--self-test"]:
        sys.exit(self_test())
    failed = False
    for package, src in PACKAGES:
        failed |= check(package, src)
    sys.exit(1 if failed else 0)


def against_direction(root, edges):
    """The server's top-level edges the documented direction does not allow, each with why."""
    wrong = {}
    for a, b, why in edges:
        if a is None or b is None:
            continue
        pa, pb = a.split("::"), b.split("::")
        if len(pa) < 2 or len(pb) < 2 or pa[0] != root or pb[0] != root or pa[1] == pb[1]:
            continue
        x, y = pa[1], pb[1]
        if x not in DIRECTION:
            wrong.setdefault((x, y), f"{why} (`{x}` has no place in the documented direction)")
        elif DIRECTION[x] is not ANY and y not in DIRECTION[x]:
            wrong.setdefault((x, y), why)
    return wrong


def self_test():
    """A wrong import planted in a copy of the server's sources must be caught."""
    import shutil
    import tempfile
    package, src = PACKAGES[0]
    root = package.replace("-", "_")
    modules, item_edges = module_graph(package)
    edges = [(holder(a, modules), holder(b, modules), why) for a, b, why in item_edges]
    if against_direction(root, edges + written_paths(src, root, modules)):
        print("module-cycles --self-test: the sources themselves go against the direction; run the check first")
        return 1
    with tempfile.TemporaryDirectory() as copy:
        planted = os.path.join(copy, "src")
        shutil.copytree(src, planted)
        # Before the module's own tests, which may use anything (the scan stops at them).
        path = os.path.join(planted, "app", "feed.rs")
        with open(path, encoding="utf-8") as f:
            text = f.read()
        with open(path, "w", encoding="utf-8") as f:
            f.write("fn planted() { let _ = crate::adapters::memory::MemoryRankingStore::new(); }\n" + text)
        wrong = against_direction(root, edges + written_paths(planted, root, modules))
    if ("app", "adapters") not in wrong:
        print("module-cycles --self-test: a planted `app -> adapters` import was not caught")
        return 1
    print(f"module-cycles --self-test: caught {wrong[('app', 'adapters')]}")
    return 0


def module_graph(package):
    """The crate's modules, and the module-to-module uses edges cargo modules sees."""
    dot = subprocess.run(
        ["cargo", "modules", "dependencies", "--package", package, "--lib",
         "--no-externs", "--no-sysroot", "--no-owns", "--layout", "dot"],
        check=True, capture_output=True, text=True).stdout
    kinds = dict(NODE.findall(dot))
    modules = {n for n, k in kinds.items() if k.split()[-1] in ("mod", "crate")}
    found = EDGE.findall(dot)
    if not modules or not found:
        sys.exit(f"module-cycles: cargo modules printed no modules or no edges for {package}")
    return modules, [(a, b, f"{a} uses {b}") for a, b in found]


def holder(path, modules):
    """The longest module `path` names (itself when it is one)."""
    parts = path.split("::")
    while parts and "::".join(parts) not in modules:
        parts.pop()
    return "::".join(parts) if parts else None


def source_files(src, root):
    """Each module file under `src` with its module path (`a/b.rs`, `a/b/mod.rs` → a::b)."""
    for directory, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(directory, f), src)[:-3].split(os.sep)
            if rel[0] == "bin" or rel == ["main"]:
                continue
            if rel[-1] in ("mod", "lib"):
                rel.pop()
            yield os.path.join(directory, f), "::".join([root] + rel)


def written_paths(src, root, modules):
    """Edges from the paths written out in each module's source."""
    edges = []
    for file, module in source_files(src, root):
        if module not in modules:
            continue  # a test module, or one not compiled into the library
        with open(file, encoding="utf-8") as f:
            text = f.read()
        cut = re.search(r"^#\[cfg\(test\)\]", text, re.M)
        if cut:
            text = text[:cut.start()]  # the module's own tests may use anything
        text = re.sub(r"//[^\n]*", "", text)
        for m in PATH.finditer(text):
            head, tail = m.group(1), m.group(2)[2:].split("::")
            base = module.split("::")
            if head == "crate":
                base = [root]
            elif head == "super":
                base = base[:-1]
                while tail and tail[0] == "super":
                    tail, base = tail[1:], base[:-1]
            target = holder("::".join(base + tail), modules)
            if target:
                edges.append((module, target, f"{module} writes {m.group(0)}"))
    return edges


def lift(a, b):
    pa, pb = a.split("::"), b.split("::")
    i = 0
    while i < min(len(pa), len(pb)) and pa[i] == pb[i]:
        i += 1
    if i == len(pa) or i == len(pb):
        return None  # one is the other's ancestor
    return "::".join(pa[:i]), pa[i], pb[i]


def check(package, src):
    root = package.replace("-", "_")
    modules, item_edges = module_graph(package)
    graphs = defaultdict(lambda: defaultdict(set))
    witness = {}
    edges = [(holder(a, modules), holder(b, modules), why) for a, b, why in item_edges]
    edges += written_paths(src, root, modules)
    for a, b, why in edges:
        if a is None or b is None:
            continue
        lifted = lift(a, b)
        if lifted is None:
            continue
        parent, x, y = lifted
        graphs[parent][x].add(y)
        witness.setdefault((parent, x, y), why)
    cycles = []
    for parent, g in sorted(graphs.items()):
        state = {}

        def visit(node, path):
            state[node] = 1
            for nxt in sorted(g.get(node, ())):
                if state.get(nxt) == 1:
                    cycles.append((parent, path[path.index(nxt):] + [nxt]))
                elif nxt not in state:
                    visit(nxt, path + [nxt])
            state[node] = 2

        for node in sorted(g):
            if node not in state:
                visit(node, [node])
    for parent, cycle in cycles:
        print(f"cycle under {parent}: {' -> '.join(cycle)}")
        for x, y in zip(cycle, cycle[1:]):
            print(f"    {x} -> {y}: {witness[(parent, x, y)]}")
    wrong = against_direction(root, edges) if package == "ranking-server" else {}
    for (x, y), why in sorted(wrong.items()):
        print(f"against the documented direction: {x} -> {y}: {why}")
    print(
        f"module-cycles: {package}: {len(modules)} modules, {len(edges)} edges, {len(cycles)} cycles, "
        f"{len(wrong)} edges against the direction"
    )
    return bool(cycles) or bool(wrong)


if __name__ == "__main__":
    main()
