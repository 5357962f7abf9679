#!/usr/bin/python3
"""scripts/check-layers.py: the layering check behind `make check-layers`.

Compares every project #include and every cross-folder reference to a public
function against the allowed edges in scripts/layers.txt, and prints each
violation as

    file:line: folder A -> folder B (include "b/x.h") not allowed
    file:line: folder A -> folder B (symbol mt_b_fn) not allowed
    file:line: folder A -> <mpi.h> (restricted system header) not allowed

Exit status: 0 when the tree keeps the layering, 1 on any violation, 2 on a
usage error or a malformed edges file.

Folders are the top-level directories holding C/CUDA sources (.c .h .cu
.cuh); files at the top level (main.c) form the folder "main". A public
function is a function defined without `static` in a .c/.cu file, or any
function defined in a header (static inline helpers are API too); its folder
is where it is defined, found by parsing the sources (no build needed, both
the CUDA and the CPU-only files are read). A reference is any use of such a
name outside its own folder: a call, a prototype, taking its address.
Comments and string literals are ignored; code under #if counts as if
compiled (both branches are checked). System headers named on the edges
file's restricted: line (MPI, BLAS, OpenMP, CUDA, NCCL) may be included only
by the folders that list them. Python 3 standard library only.

Usage: check-layers.py [--root DIR] [--layers FILE] [--list-symbols]
"""
import argparse
import fnmatch
import os
import re
import sys

SRC_EXT = (".c", ".h", ".cu", ".cuh")
ROOT_FOLDER = "main"        # name of the folder formed by top-level files
NOT_NAMES = {"__attribute__", "__launch_bounds__", "__declspec", "_Alignas",
             "alignas", "__asm__", "asm", "if", "for", "while", "switch",
             "return", "sizeof", "_Static_assert", "static_assert"}
TOKEN = re.compile(r"[A-Za-z_]\w*|\"\"|''|->|\S")
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^">]+)[">]', re.M)


class LayersError(Exception):
    pass


def read_layers(path):
    """Returns (allowed: {folder: [entry]}, skip: [glob], restricted: [glob])
    from the edges file."""
    allowed, skip, restricted = {}, [], []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if ":" not in line.split()[0]:
                raise LayersError("%s:%d: expected 'folder: targets...'" % (path, n))
            head, rest = line.split(":", 1)
            head = head.strip()
            if head == "skip":
                skip += rest.split()
            elif head == "restricted":
                restricted += rest.split()
            elif head in allowed:
                raise LayersError("%s:%d: folder %s listed twice" % (path, n, head))
            else:
                allowed[head] = rest.split()
    return allowed, skip, restricted


def layers_cycle(allowed):
    """A cycle among the folder-level edges of the list, or None."""
    graph = {a: {re.split(r"[/:]", e, 1)[0] for e in es if e != "*" and not e.startswith("<")}
             for a, es in allowed.items()}
    state = {}

    def visit(a, path):
        state[a] = 1
        for b in sorted(graph.get(a, ())):
            if b == a:
                continue
            if state.get(b) == 1:
                return path[path.index(b):] + [b] if b in path else path + [b]
            if b not in state:
                c = visit(b, path + [b])
                if c:
                    return c
        state[a] = 2
        return None

    for a in sorted(graph):
        if a not in state:
            c = visit(a, [a])
            if c:
                return c
    return None


def strip_comments(text, strings_too):
    """Blanks comments (and string/char literals when strings_too), keeping
    newlines so that line numbers stay valid."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" "); i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(" " + "\n" * text.count("\n", i, j)); i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + c if strings_too else text[i:j]); i = j
        else:
            out.append(c); i += 1
    return "".join(out)


def tokens(code):
    """(token, line, in_directive) triples of comment- and string-free code;
    #include lines left out, other directives (macro bodies) kept."""
    res, line, cont = [], 1, False
    for ln in code.split("\n"):
        pp = cont or ln.lstrip().startswith("#")
        if not re.match(r"\s*#\s*include\b", ln):
            res += [(t, line, pp) for t in TOKEN.findall(ln)]
        cont = pp and ln.rstrip().endswith("\\")
        line += 1
    return res


def definitions(toks, header):
    """Names of the functions a file defines: (public, all)."""
    public, every = set(), set()
    toks = [t for t in toks if not t[2]]
    stack, stmt, prev = [], [], None
    for i, (t, _, _) in enumerate(toks):
        if t == "{":
            extern_c = prev == '""' and i >= 2 and toks[i - 2][0] == "extern"
            if not any(s == "{" for s in stack) and not extern_c:
                name = function_name(stmt)
                if name:
                    every.add(name)
                    if header or "static" not in stmt:
                        public.add(name)
            stack.append("extern" if extern_c else "{")
            if extern_c:
                stmt = []
        elif t == "}":
            if stack:
                stack.pop()
            if not any(s == "{" for s in stack):
                stmt = []
        elif not any(s == "{" for s in stack):
            if t == ";":
                stmt = []
            else:
                stmt.append(t)
        prev = t
    return public, every


def function_name(stmt):
    """The defined function's name when stmt (the tokens before a top-level
    '{') is a function header, else None."""
    if not stmt or stmt[-1] not in (")", "const") and not stmt[-1].isidentifier():
        return None
    depth = 0
    for k, t in enumerate(stmt):
        if t == "(":
            if depth == 0 and k and stmt[k - 1].isidentifier() \
                    and stmt[k - 1] not in NOT_NAMES and not stmt[k - 1].startswith("__"):
                return stmt[k - 1] if "=" not in stmt[:k] else None
            depth += 1
        elif t == ")":
            depth -= 1
    return None


def folder_of(rel):
    parts = rel.split("/")
    return ROOT_FOLDER if len(parts) == 1 else parts[0]


def source_files(root, skip):
    files = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if not d.startswith(".")
                           and not any(fnmatch.fnmatch(d, g) for g in skip)]
            rel_dir = ""
        dirnames.sort()
        for fn in sorted(filenames):
            if fn.endswith(SRC_EXT):
                files.append(os.path.join(rel_dir, fn) if rel_dir else fn)
    return files


def resolve_include(root, rel, inc):
    """Path (relative to root) of an included project header, or None for a
    system/library header. Like the compiler: the including file's folder
    first, then the root (-I.)."""
    for base in (os.path.dirname(rel), ""):
        p = os.path.normpath(os.path.join(base, inc))
        if not p.startswith("..") and os.path.isfile(os.path.join(root, p)):
            return p
    return None


def edge_allowed(allowed, a, b, include=None, symbol=None):
    for e in allowed.get(a, ()):
        if e == "*" or e == b:
            return True
        if include and e.startswith(b + "/") and fnmatch.fnmatch(include, e):
            return True
        if symbol and e.startswith(b + ":") and fnmatch.fnmatch(symbol, e[len(b) + 1:]):
            return True
    return False


def check(root, layers):
    allowed, skip, restricted = read_layers(layers)
    cycle = layers_cycle(allowed)
    if cycle:
        raise LayersError("%s: the allowed edges form a cycle: %s" % (layers, " -> ".join(cycle)))
    files = source_files(root, skip)
    parsed, symbols, defined_in = {}, {}, {}
    for rel in files:
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            text = f.read()
        no_comments = strip_comments(text, False)
        toks = tokens(strip_comments(no_comments, True))
        public, every = definitions(toks, rel.endswith((".h", ".cuh")))
        parsed[rel] = (no_comments, toks, every)
        for s in public:
            if s != "main":
                symbols.setdefault(s, set()).add(folder_of(rel))
        if not rel.endswith((".h", ".cuh")):
            for s in public:
                defined_in.setdefault(s, set()).add(rel)
    violations, n_inc, n_ref = [], 0, 0
    deps = {}   # inside a folder: module -> {module: (file, line, why)}
    for fo in sorted({folder_of(r) for r in files} - set(allowed)):
        violations.append("%s/: folder %s has no entry in %s" % (fo, fo, os.path.relpath(layers, root)))
    for rel in files:
        a = folder_of(rel)
        if a not in allowed:
            continue
        no_comments, toks, every = parsed[rel]
        for m in INCLUDE.finditer(no_comments):
            p = resolve_include(root, rel, m.group(2))
            if p is None:
                sys_h = "<%s>" % m.group(2)
                if any(fnmatch.fnmatch(sys_h, g) for g in restricted) and \
                        not any(e in ("*", sys_h) or e.startswith("<") and fnmatch.fnmatch(sys_h, e)
                                for e in allowed[a]):
                    line = no_comments.count("\n", 0, m.start()) + 1
                    violations.append("%s:%d: folder %s -> %s (restricted system header) not allowed"
                                      % (rel, line, a, sys_h))
                continue
            n_inc += 1
            b = folder_of(p)
            if b == a:
                line = no_comments.count("\n", 0, m.start()) + 1
                add_dep(deps, rel, p, line, 'include "%s"' % m.group(2))
            if b != a and not edge_allowed(allowed, a, b, include=p):
                line = no_comments.count("\n", 0, m.start()) + 1
                violations.append('%s:%d: folder %s -> folder %s (include "%s") not allowed'
                                  % (rel, line, a, b, m.group(2)))
        seen, depth = set(), 0
        for k, (t, line, pp) in enumerate(toks):
            if not pp:
                depth += (t == "{") - (t == "}")
            if depth > 0 and t in defined_in and t not in every \
                    and not rel.endswith((".h", ".cuh")) and not (k and toks[k - 1][0] in (".", "->")):
                for d in defined_in[t]:
                    if folder_of(d) == a:
                        add_dep(deps, rel, d, line, "calls %s" % t)
            if t not in symbols or t in every or a in symbols[t]:
                continue
            if k and toks[k - 1][0] in (".", "->"):
                continue
            n_ref += 1
            bs = sorted(symbols[t])
            if any(edge_allowed(allowed, a, b, symbol=t) for b in bs) or (line, t) in seen:
                continue
            seen.add((line, t))
            violations.append("%s:%d: folder %s -> folder %s (symbol %s) not allowed"
                              % (rel, line, a, "/".join(bs), t))
    violations += module_cycles(deps)
    return violations, len(files), n_inc, n_ref, symbols


def add_dep(deps, rel, target, line, why):
    if rel != target:
        deps.setdefault(rel, {}).setdefault(target, (rel, line, why))


def module_cycles(deps):
    """The file-level rule inside each folder: the graph of its files, with
    an edge A -> B when A includes header B or source file A (.c/.cu) calls
    a function defined in source file B, has no cycle: no header includes a
    header that includes it back, and no two source files call each other,
    directly or around a circle. One violation per cycle found, naming each
    edge's evidence."""
    out, state, stack = [], {}, []

    def visit(a):
        state[a] = 1
        stack.append(a)
        for b in sorted(deps.get(a, {})):
            if state.get(b) == 1:
                cyc = stack[stack.index(b):] + [b]
                steps = ["%s:%d: %s" % deps[x][y] for x, y in zip(cyc, cyc[1:])]
                out.append("%s: file cycle inside folder %s: %s (%s)"
                           % (cyc[0], os.path.dirname(cyc[0]) or ROOT_FOLDER,
                              " -> ".join(os.path.basename(x) for x in cyc), "; ".join(steps)))
            elif b not in state:
                visit(b)
        stack.pop()
        state[a] = 2

    for a in sorted(deps):
        if a not in state:
            visit(a)
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.dirname(here), help="source tree (default: this repo)")
    ap.add_argument("--layers", default=None, help="edges file (default: ROOT/scripts/layers.txt)")
    ap.add_argument("--list-symbols", action="store_true", help="print 'folder symbol' for each public function")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    layers = args.layers or os.path.join(root, "scripts", "layers.txt")
    try:
        violations, nf, ni, nr, symbols = check(root, layers)
    except (LayersError, OSError) as e:
        print("check-layers: %s" % e, file=sys.stderr)
        return 2
    if args.list_symbols:
        for s in sorted(symbols):
            print("%s %s" % ("/".join(sorted(symbols[s])), s))
        return 0
    for v in violations:
        print(v)
    if violations:
        print("check-layers: %d violation(s) of %s (%d files, %d includes, %d cross-folder references)"
              % (len(violations), os.path.relpath(layers, root), nf, ni, nr))
        return 1
    print("check-layers: OK (%d files, %d project includes, %d cross-folder references; edges in %s)"
          % (nf, ni, nr, os.path.relpath(layers, root)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
