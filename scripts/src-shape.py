#!/usr/bin/env python3
"""The shape of the library's code, as issue #16 measures it.

    scripts/src-shape.py [SRC_DIR]      (default: src)

Prints: the number of functions, the median function length and the number
over 60 lines (a function counts from its first signature line to its
closing brace; the code is in kernel style: braces of functions in column
0), the longest functions, and the call cycles among the .c files (a file
calls another when it calls a function defined there; comments and string
literals are left out; calls through function pointers, such as the OS
layer's hpr__os->..., are not seen). Text only: it compiles nothing.
"""
import glob
import os
import re
import statistics
import sys


def functions(path):
    lines = open(path).read().split('\n')
    out, i = [], 0
    while i < len(lines):
        if lines[i] == '{':
            j = i - 1
            while j > 0 and lines[j - 1].strip() and \
                    not lines[j - 1].startswith(('}', '#', '/*', ' *', '//')) and \
                    not lines[j - 1].endswith(';'):
                j -= 1
            k = i
            while k < len(lines) and lines[k] != '}':
                k += 1
            m = re.search(r'(\w+)\s*\(', ' '.join(lines[j:i]))
            out.append((m.group(1) if m else '?', k - j + 1, path))
            i = k
        i += 1
    return out


def code(path):
    text = re.sub(r'/\*.*?\*/', '', open(path).read(), flags=re.S)
    return re.sub(r'"(\\.|[^"\\])*"', '""', text)


def cycles(files, calls):
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in calls[v]:
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
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in files:
        if v not in index:
            visit(v)
    return out


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else 'src'
    files = sorted(glob.glob(os.path.join(src, '*.c')))
    fns = [f for p in files for f in functions(p)]
    lens = sorted(f[1] for f in fns)
    print(f"functions {len(fns)}, median length {statistics.median(lens):g}, "
          f"over 60 lines {sum(1 for n in lens if n > 60)}")
    for name, n, path in sorted(fns, key=lambda f: -f[1])[:5]:
        print(f"  {n:4d}  {os.path.basename(path)}:{name}")
    defs = {}
    for name, _, path in fns:
        defs.setdefault(name, path)
    calls = {p: set() for p in files}
    for p in files:
        for m in re.finditer(r'\b(\w+)\s*\(', code(p)):
            q = defs.get(m.group(1))
            if q and q != p:
                calls[p].add(q)
    found = cycles(files, calls)
    print(f"call cycles among the files: {len(found)}")
    for comp in found:
        print("  " + " ".join(os.path.basename(p) for p in comp))


if __name__ == '__main__':
    main()
