#!/usr/bin/env python3
"""The drawing of the imports between the files of src/: which file uses which (`use` trees,
`crate::x::y` paths in code, `super::`, `self::`, a folder's children by name), the circles
among them (strongly connected components), imports of a room above, the floors (longest path
down), and the loose files beside main.rs and lib.rs.

    python3 tools/imports.py            # the circles, rooms, floors and loose files
    python3 tools/imports.py --dot      # the graph for graphviz: | dot -Tsvg > imports.svg
    python3 tools/imports.py --check    # exit 1 on a circle, an import of a room above, or
                                        # more than six loose files

A module is a file: `src/net/mod.rs` is `net`, `src/net/wire.rs` is `net::wire`. A path names
the file that defines what it names, followed through re-exports: `crate::sys::physical_memory`
is `sys::memory` when `sys/mod.rs` says `pub use memory::physical_memory` (a `pub use` is a
door, not a room: counting the door instead of the room behind it once hid a circle). A
folder's mod.rs is its children's face (it declares, re-exports and calls them; they use its
types): a circle between a mod.rs and its own children is how a folder is made, and is not
reported unless it leaves the folder's room.

The rooms, in order from the top, are read from DEVELOPERS.md: the lines of the map in "The
house" that begin with `src/` (a folder or a loose file). A file uses only files of its own
room or of rooms below it; main.rs and lib.rs stand above all.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
MAP = ROOT / "DEVELOPERS.md"
LOOSE_AT_MOST = 6


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


def rooms_from_map() -> list[str]:
    """The rooms from the top down, as DEVELOPERS.md's map lists them: `src/cli/` is `cli`,
    `src/exit.rs` is `exit`."""
    text = MAP.read_text()
    at = text.find("## The house")
    if at < 0:
        raise SystemExit(f"{MAP}: no section \"## The house\", where the rooms are listed")
    block = re.search(r"```\n(.*?)```", text[at:], re.S)
    if not block:
        raise SystemExit(f"{MAP}: \"The house\" has no map (a ``` block) listing the rooms")
    rooms = []
    for line in block.group(1).splitlines():
        m = re.match(r"src/(\w+)(?:/|\.rs)(?:\s|$)", line)
        if m:
            rooms.append(m.group(1))
    return rooms


def strip_tests(code: str) -> str:
    """The code without its `#[cfg(test)] mod tests { ... }` blocks (unit tests import
    freely). Comments and strings are gone already, so the braces balance."""
    while True:
        m = re.search(r"#\[cfg\((?:all\()?test\b[^\]]*\]\s*mod\s+\w+\s*\{", code)
        if not m:
            return code
        depth, i = 1, m.end()
        while i < len(code) and depth:
            depth += code[i] == "{"
            depth -= code[i] == "}"
            i += 1
        code = code[:m.start()] + code[i:]


def strip_noise(text: str) -> str:
    """The code without comments and string literals, where paths are only words."""
    text = re.sub(r'r#*"', '"', text)  # raw strings read as plain ones (none holds a quote)
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""')
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:i + 4]):
            # a char literal ('"', '{'); a lifetime ('a) is left alone
            i = text.find("'", i + 2) + 1
            out.append("' '")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def use_tree(tree: str) -> list[tuple[list[str], str]]:
    """`a::{b, c::d as e, f::*}` as paths and the names they bring: ([a, b], b), ([a, c, d],
    e), ([a, f, *], *)."""
    # Spaces only where they mean something: between a path and `as`.
    tree = re.sub(r"\s*(::|[{},])\s*", r"\1", re.sub(r"\s+", " ", tree.strip()))
    out = []

    def walk(prefix: list[str], s: str) -> None:
        # s is one tree: path, path::{...}, path as alias, path::*
        m = re.match(r"((?:\w+::)*)\{(.*)\}$", s)
        if m:
            base = prefix + [p for p in m.group(1).split("::") if p]
            for part in split_top(m.group(2)):
                if part:
                    walk(base, part)
            return
        path, _, alias = s.partition(" as ")
        segs = prefix + [p for p in path.split("::") if p]
        if segs and segs[-1] == "self":
            segs.pop()
        if segs:
            out.append((segs, alias or segs[-1]))

    walk([], tree)
    return out


def split_top(s: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, c in enumerate(s):
        depth += c == "{"
        depth -= c == "}"
        if c == "," and depth == 0:
            parts.append(s[start:i])
            start = i + 1
    parts.append(s[start:])
    return parts


class House:
    def __init__(self, found: dict[str, Path]):
        self.found = found
        self.code = {name: strip_tests(strip_noise(path.read_text()))
                     for name, path in found.items()}
        # Each module's use declarations: name brought in -> paths (a cfg may give two).
        self.uses: dict[str, dict[str, list[list[str]]]] = {}
        self.globs: dict[str, list[list[str]]] = {}
        self.use_spans: dict[str, list[tuple[int, int]]] = {}
        for name, code in self.code.items():
            uses: dict[str, list[list[str]]] = {}
            globs = []
            spans = []
            for m in re.finditer(r"(?m)^\s*(?:pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", code):
                spans.append(m.span())
                for segs, brought in use_tree(m.group(1)):
                    if brought == "*":
                        globs.append(segs[:-1])
                    else:
                        uses.setdefault(brought, []).append(segs)
            self.uses[name] = uses
            self.globs[name] = globs
            self.use_spans[name] = spans

    @staticmethod
    def module_of(name: str) -> str:
        return "" if name in ("lib", "main") else name

    def child(self, module: str, part: str) -> str | None:
        candidate = f"{module}::{part}" if module else part
        return candidate if candidate in self.found else None

    def file(self, module: str) -> str:
        return module or "lib"

    def defines(self, module: str, item: str) -> bool:
        return re.search(rf"\b(fn|struct|enum|const|static|type|trait|union|macro_rules!)\s+"
                         rf"{re.escape(item)}\b", self.code[self.file(module)]) is not None

    def resolve(self, here: str, segs: list[str], seen: frozenset = frozenset()) -> set[str]:
        """The files that define what `segs`, written in module `here`, names; empty for
        another crate's."""
        key = (here, tuple(segs))
        if key in seen or not segs:
            return set()
        seen = seen | {key}
        head, rest = segs[0], segs[1:]
        if head == "crate":
            return self.walk("", rest, seen)
        if head == "super":
            module = here.rsplit("::", 1)[0] if "::" in here else ""
            return self.resolve(module, ["self"] + rest, seen) if rest else {self.file(module)}
        if head == "self":
            return self.walk(here, rest, seen)
        if head == "accel" and here == "":
            return self.walk("", rest, seen)  # main.rs names the library
        if self.child(here, head):
            return self.walk(self.child(here, head), rest, seen)
        if head in self.uses.get(self.file(here), {}):
            out = set()
            for path in self.uses[self.file(here)][head]:
                out |= self.resolve(here, path + rest, seen)
            return out
        return set()

    def walk(self, module: str, rest: list[str], seen: frozenset) -> set[str]:
        """What `rest` names inside `module`: a child, a re-exported name, or its own item."""
        if not rest:
            return {self.file(module)}
        head = rest[0]
        if self.child(module, head):
            return self.walk(self.child(module, head), rest[1:], seen)
        uses = self.uses.get(self.file(module), {})
        if head in uses:
            out = set()
            for path in uses[head]:
                out |= self.resolve(module, path + rest[1:], seen)
            if out:
                return out
        if not self.defines(module, head):
            for glob in self.globs.get(self.file(module), []):
                out = self.resolve(module, glob + rest, seen)
                if out:
                    return out
        return {self.file(module)}

    def imports(self, name: str) -> set[str]:
        code = self.code[name]
        here = self.module_of(name)
        paths: list[list[str]] = []
        for start, end in self.use_spans[name]:
            m = re.match(r"\s*(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", code[start:end])
            for segs, _ in use_tree(m.group(2)):
                segs = [s for s in segs if s != "*"]
                # A re-export of a child is a door: its users are counted through it.
                if not (m.group(1) and self.resolve(here, segs[:1]) <= self.descendants(name)):
                    paths.append(segs)
        without_uses = code
        for start, end in reversed(self.use_spans[name]):
            without_uses = without_uses[:start] + " " * (end - start) + without_uses[end:]
        heads = {"crate", "super", "self"} | set(self.uses[name])
        if here:
            heads |= {n.rsplit("::", 1)[1] for n in self.found if n.rsplit("::", 1)[0] == here
                      and "::" in n}
        else:
            heads |= {n for n in self.found if "::" not in n and n not in ("lib", "main")}
            heads.add("accel")
        for m in re.finditer(r"(?<![\w:])(\w+)((?:::\w+)+)", without_uses):
            if m.group(1) in heads:
                paths.append([m.group(1)] + m.group(2).strip(":").split("::"))
        used = set()
        for segs in paths:
            used |= self.resolve(here, segs)
        used.discard(name)
        return used

    def descendants(self, name: str) -> set[str]:
        module = self.module_of(name)
        if not module:
            return set(self.found) - {"lib", "main"}
        return {n for n in self.found if n.startswith(module + "::")}


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


def room(name: str) -> str:
    return name.split("::")[0]


def main() -> int:
    found = modules()
    house = House(found)
    graph = {name: house.imports(name) for name in found}
    if "--dot" in sys.argv:
        print("digraph imports {\n  rankdir=TB; node [shape=box, fontname=monospace];")
        for a in sorted(graph):
            for b in sorted(graph[a]):
                print(f'  "{a}" -> "{b}";')
        print("}")
        return 0
    # A folder's mod.rs is its children's face: it declares them, re-exports them and calls
    # them, and they use its types. Such a circle inside one folder is how a folder is made;
    # any other circle is a knot, and so is one through a mod.rs that leaves its folder.
    inward = {a: {b for b in bs if b not in house.descendants(a) or not house.module_of(a)}
              for a, bs in graph.items()}
    circles = [c for c in sccs(graph) if len({room(v) for v in c}) > 1]
    circles += [c for c in sccs(inward) if len(c) > 1 and len({room(v) for v in c}) == 1]
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

    rooms = rooms_from_map()
    problems = []
    present = {room(n) for n in found}
    for r in sorted(present - set(rooms)):
        problems.append(f"room {r} is not in DEVELOPERS.md's list of rooms")
    for r in rooms:
        if r not in present:
            problems.append(f"DEVELOPERS.md lists a room {r} that src/ does not have")
    rank = {r: i for i, r in enumerate(rooms)}
    upward = []
    for a in sorted(graph):
        for b in sorted(graph[a]):
            ra, rb = room(a), room(b)
            if ra in rank and rb in rank and rank[rb] < rank[ra]:
                upward.append(f"{a} uses {b}: room {rb} is above room {ra}")

    loose = sorted(n for n, p in found.items()
                   if p.parent == SRC and n not in ("lib", "main"))
    print(f"{len(found)} files, {sum(len(v) for v in graph.values())} imports, {floors} floors")
    print(f"rooms from the top: {' > '.join(rooms)}")
    for comp in circles:
        print(f"circle of {len(comp)}: {', '.join(comp)}")
    for line in upward:
        print(f"import of a room above: {line}")
    for line in problems:
        print(line)
    print(f"{len(loose)} loose files beside main.rs and lib.rs: {', '.join(loose)}")
    if "--check" in sys.argv:
        failed = circles or upward or problems or len(loose) > LOOSE_AT_MOST
        if len(loose) > LOOSE_AT_MOST:
            print(f"more than {LOOSE_AT_MOST} loose files")
        return 1 if failed else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
