#!/usr/bin/env python3
"""The house rules of the workspace's Rust code, checked from its sources.

1. No file under `crates/*/src` is over 700 lines.
2. Within a crate, no circle of imports: at every level of the module tree, the child modules
   of one parent import each other in no circle. A parent module's own file (`lib.rs`,
   `mod.rs`) is its children's table of contents and shared vocabulary: its re-exports are not
   imports, and a path through a re-export counts as an import of the module that defines it.
   Test modules (`#[cfg(test)]`) are left out: a module's tests may reach any module.
3. No type name (`pub struct`, `enum`, `trait`, `type`, `union`) is defined twice in the
   public API of the published crates.
4. The crate graph keeps the invariants docs/ARCHITECTURE.md states as "X does not depend on
   Y" (`NEVER`): no crate's `[dependencies]` names a crate it must not depend on.

Prints each breach and exits 1 when there is one not in `KNOWN`, or when a breach `KNOWN`
lists is gone (so that the list only shrinks: take it out); `--self-test` breaks each rule on
purpose in a scratch copy and checks that it is seen.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

MAX_LINES = 700
# Crates that are not published (tests' and benchmarks' kits, the plots), and the patched
# Ballista scheduler, which is Ballista's code: their names are not partout's public API.
UNPUBLISHED = {"partout-testkit", "partout-bench", "partout-plots", "partout-ballista-scheduler"}

# "X does not depend on Y", for each X: the crates it must never depend on.
NEVER = {
    "partout-core": {"partout-format", "partout-exchange", "partout-input", "partout-output", "partout-job", "partout-flight"},
    "partout-format": {"partout-core", "partout-exchange", "partout-input", "partout-output", "partout-job", "partout-flight"},
    "partout-input": {"partout-core", "partout-exchange", "partout-output", "partout-job", "partout-flight"},
    "partout-output": {"partout-job", "partout-flight"},
    "partout-flight": {"partout-job"},
}

DEPENDENCIES_RE = re.compile(r"^\[dependencies\]\n(.*?)(?=^\[|\Z)", re.M | re.S)

# Breaches not yet mended, each with why it is still there. A breach here is reported but
# does not fail the check; one that is gone fails it until it is taken out of this list.
KNOWN: set[str] = set()

# Each crate's `Result` alias over its own error, as `std::io::Result` and `fmt::Result` are.
CONVENTIONAL = {"Result"}

USE_RE = re.compile(r"\buse\s+((?:crate|super|self)(?:::\w+)*)::\{", re.S)
PATH_RE = re.compile(r"\b((?:crate|super)(?:::\w+)+)")
PUB_TYPE_RE = re.compile(r"^\s*pub\s+(?:struct|enum|trait|type|union)\s+(\w+)", re.M)
PUB_USE_RE = re.compile(r"^\s*pub(?:\(crate\))?\s+use\s+([^;]+);", re.M)
MOD_RE = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", re.M)


def strip_comments(text: str) -> str:
    """The code of a Rust file without comments and string literals (a rough lexer: enough
    to keep paths in doc comments and strings from counting as imports)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""')
            i = j + 1
        elif text.startswith("r#\"", i) or text.startswith('r"', i):
            hashes = text[i + 1 : text.find('"', i)].count("#")
            end = '"' + "#" * hashes
            j = text.find(end, text.find('"', i) + 1)
            out.append('""')
            i = n if j < 0 else j + len(end)
        elif text[i] == "'" and i + 2 < n and (text[i + 2] == "'" or text[i + 1] == "\\"):
            # A char literal ('a', '\n', '\''); lifetimes ('a) are left alone.
            j = text.find("'", i + 2)
            out.append("' '")
            i = j + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


TEST_MOD_RE = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{")


def without_tests(code: str) -> str:
    """`code` without its `#[cfg(test)] mod … { … }` blocks: a module's tests may reach any
    module of the crate; the rule is about the code that ships."""
    while (m := TEST_MOD_RE.search(code)) is not None:
        depth, i = 0, m.end() - 1
        while i < len(code):
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            i += 1
            if depth == 0:
                break
        code = code[: m.start()] + code[i:]
    return code


def split_group(text: str, start: int) -> tuple[list[str], int]:
    """The comma-separated items of the brace group opening at `text[start]`, nested groups
    flattened into `a::{b, c}` → `a::b`, `a::c`."""
    depth, i, item, items = 0, start, "", []
    while i < len(text):
        c = text[i]
        if c == "{":
            depth += 1
            if depth > 1:
                inner, i = split_group(text, i)
                items.extend(item.strip() + x for x in inner)
                item = ""
                continue
        elif c == "}":
            depth -= 1
            if depth == 0:
                if item.strip():
                    items.append(item.strip())
                return items, i + 1
        elif c == "," and depth == 1:
            if item.strip():
                items.append(item.strip())
            item = ""
        elif depth >= 1:
            item += c
        i += 1
    return items, i


class Crate:
    def __init__(self, root: Path):
        self.root = root
        self.name = root.parent.parent.name
        self.files: dict[tuple[str, ...], Path] = {}
        self.dirs: set[tuple[str, ...]] = {()}
        src = root.parent
        self._walk(root, ())
        self.src = src

    def _walk(self, path: Path, module: tuple[str, ...]) -> None:
        self.files[module] = path
        code = strip_comments(path.read_text())
        children = MOD_RE.findall(code)
        if children:
            self.dirs.add(module)
        base = path.parent if path.name in ("lib.rs", "main.rs", "mod.rs") else path.with_suffix("")
        for child in children:
            for candidate in (base / f"{child}.rs", base / child / "mod.rs"):
                if candidate.exists():
                    self._walk(candidate, module + (child,))
                    break

    def reexports(self, module: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
        """The names `module`'s own file re-exports, each with the module it comes from."""
        code = strip_comments(self.files[module].read_text())
        names = {}
        for body in PUB_USE_RE.findall(code):
            body = " ".join(body.split())
            if "{" in body:
                prefix = body[: body.index("{")].rstrip(":").rstrip()
                items, _ = split_group(body, body.index("{"))
                paths = [f"{prefix}::{x}" for x in items]
            else:
                paths = [body]
            for p in paths:
                p = p.split(" as ")
                alias = p[1].strip() if len(p) > 1 else None
                parts = [x for x in p[0].strip().split("::") if x]
                if not parts or parts[-1] == "*":
                    continue
                names[alias or parts[-1]] = self.resolve(module, parts)[0]
        return names

    def resolve(self, module: tuple[str, ...], parts: list[str]) -> tuple[tuple[str, ...], list[str]]:
        """The module a path written in `module` names (as deep as modules go), absolute, and
        what the path names past it."""
        if parts[0] == "crate":
            at, parts = (), parts[1:]
        elif parts[0] in ("super", "self"):
            at = module
            while parts and parts[0] in ("super", "self"):
                if parts[0] == "super":
                    at = at[:-1]
                parts = parts[1:]
        else:
            at = module
        while parts and at + (parts[0],) in self.files:
            at, parts = at + (parts[0],), parts[1:]
        return at, parts

    def imports(self) -> dict[tuple[str, ...], set[tuple[str, ...]]]:
        """Each module's imports: the modules its code names through `crate::` and `super::`
        paths (and `self::` inside `use` groups), resolved through re-exports."""
        found: dict[tuple[str, ...], set[tuple[str, ...]]] = defaultdict(set)
        for module, path in self.files.items():
            # Test modules in files of their own (`#[cfg(test)] mod tests;`) likewise.
            if "tests" in module:
                continue
            code = without_tests(strip_comments(path.read_text()))
            paths = []
            for m in USE_RE.finditer(code):
                items, _ = split_group(code, m.end() - 1)
                paths.extend(f"{m.group(1)}::{x}" for x in items)
            paths.extend(PATH_RE.findall(USE_RE.sub(" ", code)))
            for text in paths:
                parts = [x.strip() for x in text.split(" as ")[0].split("::") if x.strip()]
                # `use super::*` in a file's test module: the file's own items.
                if parts == ["super", "*"]:
                    continue
                target, rest = self.resolve(module, parts)
                # A name a directory module re-exports: an import of the module defining it.
                seen = set()
                while rest and target in self.dirs and target not in seen:
                    seen.add(target)
                    origin = self.reexports(target).get(rest[0])
                    if origin is None:
                        break
                    target, rest = origin, rest[1:]
                if target != module:
                    found[module].add(target)
        return found

    def circles(self) -> list[list[str]]:
        """The circles among the child modules of each directory module."""
        imports = self.imports()
        out = []
        for parent in sorted(self.dirs):
            children = sorted(
                m for m in self.files if len(m) == len(parent) + 1 and m[: len(parent)] == parent
            )
            edges: dict[tuple[str, ...], set[tuple[str, ...]]] = defaultdict(set)
            for source, targets in imports.items():
                if source[: len(parent)] != parent or len(source) <= len(parent):
                    continue
                child = source[: len(parent) + 1]
                for target in targets:
                    if target[: len(parent)] != parent or len(target) <= len(parent):
                        continue
                    other = target[: len(parent) + 1]
                    if other != child:
                        edges[child].add(other)
            for scc in strongly_connected(children, edges):
                if len(scc) > 1:
                    out.append(["::".join(m) for m in scc])
        return out

    def public_types(self) -> set[str]:
        names = set()
        for path in self.files.values():
            names.update(PUB_TYPE_RE.findall(strip_comments(path.read_text())))
        return names


def strongly_connected(nodes, edges):
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            out.append(sorted(scc))

    for v in nodes:
        if v not in index:
            visit(v)
    return out


def check(workspace: Path) -> list[str]:
    breaches = []
    crates = []
    for manifest in sorted(workspace.glob("crates/*/Cargo.toml")):
        src = manifest.parent / "src"
        for path in sorted(src.rglob("*.rs")):
            lines = path.read_text().count("\n")
            if lines > MAX_LINES:
                breaches.append(f"{path.relative_to(workspace)}: {lines} lines (at most {MAX_LINES})")
        for root in (src / "lib.rs", src / "main.rs"):
            if root.exists():
                crates.append(Crate(root))
    for manifest in sorted(workspace.glob("crates/*/Cargo.toml")):
        name = manifest.parent.name
        section = DEPENDENCIES_RE.search(manifest.read_text())
        named = set(re.findall(r"^(partout-[a-z-]+)", section.group(1), re.M)) if section else set()
        for other in sorted(named & NEVER.get(name, set())):
            breaches.append(f"{name} depends on {other}, which it must not")
    defined = defaultdict(list)
    for crate in crates:
        for circle in crate.circles():
            breaches.append(f"{crate.name}: a circle of imports: {' ↔ '.join(circle)}")
        if crate.name not in UNPUBLISHED and crate.root.name == "lib.rs":
            for name in crate.public_types() - CONVENTIONAL:
                defined[name].append(crate.name)
    for name, where in sorted(defined.items()):
        if len(where) > 1:
            breaches.append(f"the type name {name} is defined in {', '.join(sorted(where))}")
    return breaches


def self_test(workspace: Path) -> None:
    """Each rule broken once in a scratch copy of the sources, and seen."""
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch)
        shutil.copytree(workspace / "crates", copy / "crates", ignore=shutil.ignore_patterns("target", "tests", "examples", "benches"))
        assert set(check(copy)) == KNOWN, "the scratch copy breaks a rule before it is broken"
        core = copy / "crates/partout-core/src"
        (core / "long.rs").write_text("// a line\n" * (MAX_LINES + 1))
        (core / "lib.rs").write_text((core / "lib.rs").read_text() + "\nmod long;\n")
        (core / "circle_a.rs").write_text("use crate::circle_b::B;\npub struct A;\n")
        (core / "circle_b.rs").write_text("pub struct B(crate::circle_a::A);\n")
        (core / "lib.rs").write_text((core / "lib.rs").read_text() + "mod circle_a;\nmod circle_b;\n")
        input_manifest = copy / "crates/partout-input/Cargo.toml"
        input_manifest.write_text(
            input_manifest.read_text().replace("[dependencies]\n", "[dependencies]\npartout-output.workspace = true\n", 1)
        )
        format_lib = copy / "crates/partout-format/src/lib.rs"
        format_lib.write_text(format_lib.read_text() + "\n/// Twice.\npub struct A;\n")
        found = check(copy)
        assert any("long.rs: 701 lines" in b for b in found), found
        assert any("circle_a ↔ circle_b" in b for b in found), found
        assert any("type name A is defined in partout-core, partout-format" in b for b in found), found
        assert any("partout-input depends on partout-output, which it must not" in b for b in found), found
    print("check_house self-test: each rule, broken once, is seen")


def main() -> int:
    workspace = Path(__file__).resolve().parents[2]
    if "--self-test" in sys.argv:
        self_test(workspace)
        return 0
    breaches = check(workspace)
    new = [b for b in breaches if b not in KNOWN]
    mended = sorted(KNOWN - set(breaches))
    for b in breaches:
        print(("known: " if b in KNOWN else "") + b)
    for b in mended:
        print(f"mended, so take it out of KNOWN: {b}")
    if new or mended:
        print(f"{len(new)} new breaches of the house rules, {len(mended)} mended (tests/house/check_house.py)")
        return 1
    print(
        "the house rules hold: files within 700 lines, no circles of imports, each public type "
        f"name once ({len(KNOWN)} known breach{'es' if len(KNOWN) != 1 else ''} left)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
