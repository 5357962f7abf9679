#!/usr/bin/python3
"""scripts/check-dead.py: the dead-function check behind `make check-dead`.

Lists every exported function of the library (a function defined without
`static` in a .c/.cu file of a source folder, found by the same parser as
scripts/check-layers.py) that nothing outside tests/ calls: no call, address
taken or table entry in any other source file, header, macro body, main.c
or bench/ program, and none in its own file besides its definition. Such a
function is either dead (delete it) or test-only code (move it under
tests/support/, which is linked into the tests alone). Prototypes do not
count as uses.

    folder/file.c:LINE: mt_fn is exported but nothing outside tests/ calls it

Exit status: 0 when there is none, 1 when any is listed, 2 on a usage error.
Python 3 standard library only.

Usage: check-dead.py [--root DIR] [--layers FILE]
"""
import argparse
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("check_layers", os.path.join(HERE, "check-layers.py"))
cl = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cl)

# callers that count although they are not library folders
CALLER_DIRS = ("bench",)


def uses(toks, header):
    """(name, line) of every use of an identifier in a file's tokens: any
    occurrence inside braces or a macro body, and at file scope anything but
    a function's own name in a prototype or definition header."""
    out, depth = [], 0
    for k, (t, line, pp) in enumerate(toks):
        if not pp:
            if t == "{":
                depth += 1
                continue
            if t == "}":
                depth -= 1
                continue
        if not (t[0].isalpha() or t[0] == "_"):
            continue
        if depth == 0 and not pp:
            nxt = toks[k + 1][0] if k + 1 < len(toks) else ""
            if nxt == "(":   # a declarator: prototype or definition
                continue
        out.append((t, line))
    return out


def dead(root, layers):
    _, skip, _ = cl.read_layers(layers)
    lib_files = cl.source_files(root, skip)
    extra = []
    for d in CALLER_DIRS:
        for dp, _, fns in os.walk(os.path.join(root, d)):
            extra += [os.path.relpath(os.path.join(dp, f), root) for f in sorted(fns)
                      if f.endswith(cl.SRC_EXT)]
    exported, used = {}, set()
    for rel in lib_files + extra:
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            text = f.read()
        toks = cl.tokens(cl.strip_comments(cl.strip_comments(text, False), True))
        header = rel.endswith((".h", ".cuh"))
        if rel in lib_files and not header:
            public, _ = cl.definitions(toks, False)
            for name in public:
                if name != "main":
                    line = next((ln for t, ln, pp in toks if t == name and not pp), 0)
                    exported.setdefault(name, (rel, line))
        for name, _ in uses(toks, header):
            used.add(name)
    return sorted((rel, line, name) for name, (rel, line) in exported.items() if name not in used)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.dirname(HERE), help="source tree (default: this repo)")
    ap.add_argument("--layers", default=None, help="edges file (default: ROOT/scripts/layers.txt)")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    layers = args.layers or os.path.join(root, "scripts", "layers.txt")
    try:
        rows = dead(root, layers)
    except (cl.LayersError, OSError) as e:
        print("check-dead: %s" % e, file=sys.stderr)
        return 2
    for rel, line, name in rows:
        print("%s:%d: %s is exported but nothing outside tests/ calls it" % (rel, line, name))
    if rows:
        print("check-dead: %d exported function(s) without a caller outside tests/" % len(rows))
        return 1
    print("check-dead: OK (every exported function has a caller outside tests/)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
