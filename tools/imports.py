#!/usr/bin/env python3
"""The drawing of the imports between the files of src/: which file uses which (`use crate::`,
`crate::x::y` paths, `super::`), the circles among them (strongly connected components), the
floors (longest path down), and the loose files beside main.rs and lib.rs.

    python3 tools/imports.py            # the circles, floors and loose files
    python3 tools/imports.py --dot      # the graph for graphviz: | dot -Tsvg > imports.svg
    python3 tools/imports.py --check    # exit 1 on a circle or on more than six loose files

A module is a file: `src/net/mod.rs` is `net`, `src/net/wire.rs` is `net::wire`. A path names
the longest module that exists (`crate::net::wire::Frame` is `net::wire`); a module's own
children are not counted as its imports (a folder's mod.rs declares them).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(SRC.rglob("*.rs")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "mod":
            parts.pop()
        if parts in (["lib"], ["main"]):
            found[parts[0]] = path
            continue
        if parts and parts[-1] == "tests" and len(parts) > 1:
            continue  # unit tests of a module, in a file of their own
        found["::".join(parts)] = path
    return found


def strip_tests(text: str) -> str:
    """The text before `#[cfg(test)]` blocks at the file's end (unit tests import freely)."""
    at = text.find("#[cfg(test)]\nmod tests {")
    return text if at < 0 else text[:at]


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    text = strip_tests(path.read_text())
    text = re.sub(r"//.*", "", text)
    here = [] if name in ("lib", "main") else name.split("::")
    paths = []
    # use crate::{a, b::{c, d}}; crate::x::y in expressions; super::x
    for m in re.finditer(r"\b(crate|super)((?:::\w+)+|::\{)", text):
        start = m.start()
        head = m.group(1)
        rest = text[m.end(1):]
        if rest.startswith("::{"):
            depth, i = 0, 2
            while i < len(rest):
                depth += rest[i] == "{"
                depth -= rest[i] == "}"
                i += 1
                if depth == 0:
                    break
            for item in re.findall(r"\w+(?:::\w+)*", rest[2:i]):
                paths.append((head, item.split("::")))
        else:
            paths.append((head, m.group(2).strip(":").split("::")))
    used = set()
    for head, parts in paths:
        if head == "super":
            # From a.rs or a/mod.rs alike, super is a's parent.
            parts = here[:-1] + parts
        for n in range(len(parts), 0, -1):
            candidate = "::".join(parts[:n])
            if candidate in known:
                if candidate != name and not candidate.startswith(name + "::"):
                    used.add(candidate)
                break
    if name == "main" and "accel::" in text:
        used.add("lib")
    return used


def sccs(graph: dict[str, set[str]]) -> list[list[str]]:
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main() -> int:
    found = modules()
    known = set(found)
    graph = {name: imports(name, path, known) for name, path in found.items()}
    if "--dot" in sys.argv:
        print("digraph imports {\n  rankdir=TB; node [shape=box, fontname=monospace];")
        for a in sorted(graph):
            for b in sorted(graph[a]):
                print(f'  "{a}" -> "{b}";')
        print("}")
        return 0
    circles = [c for c in sccs(graph) if len(c) > 1]
    # Floors: the longest chain of imports below each file, circles taken as one.
    comp_of = {}
    for i, comp in enumerate(sccs(graph)):
        for v in comp:
            comp_of[v] = i
    depth: dict[int, int] = {}

    def floor(c: int) -> int:
        if c in depth:
            return depth[c]
        depth[c] = 0
        below = {comp_of[w] for v in comp_of if comp_of[v] == c for w in graph[v]} - {c}
        depth[c] = 1 + max((floor(b) for b in below), default=0)
        return depth[c]

    floors = max(floor(c) for c in set(comp_of.values()))
    loose = sorted(n for n, p in found.items()
                   if p.parent == SRC and n not in ("lib", "main"))
    print(f"{len(found)} files, {sum(len(v) for v in graph.values())} imports, {floors} floors")
    for comp in circles:
        print(f"circle of {len(comp)}: {', '.join(comp)}")
    print(f"{len(loose)} loose files beside main.rs and lib.rs: {', '.join(loose)}")
    if "--check" in sys.argv:
        return 1 if circles or len(loose) > 6 else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
