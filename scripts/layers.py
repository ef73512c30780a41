#!/usr/bin/env python3
"""The stage folders of user/ form a strict stack (docs/architecture.md).

    scripts/layers.py [--root DIR] [--isolated FOLDER] [--apart F=G,H] LAYER...

LAYER... are user/'s folders, lowest first (the Makefile's USER_LAYERS);
the files at user/ itself (main.c) sit on top of them. Every
#include "x.h" of a file under user/ names its folder ("collect/x.h";
user/'s own headers are bare): the layer is read from the include line.
It must be the file's own folder or a lower one (bpf/'s headers and
generated ones are below everything), and no module (x.c with x.h) may
reach itself through includes: no cycle, even inside one folder. The
modules of an --isolated folder (cmd: the commands) include none of each
other's headers: what two of them share goes a layer down. And a
module's prefix is its file name: every function a header of a folder
declares is named after a module of that folder (x_..., x__..., or
FOLDER_x_...; util/'s may also take hb_). Below the top folder (the
commands) only the option parser (user/cli/, or a cli.c or cli.h) names a command's mode
(MODE_...): a command passes its behaviour in (struct run's flags) rather
than being told apart. --apart sampling=profile,export: user/sampling/
includes nothing of those lower folders (the live session knows no
profile and no delivery). Exit 1, naming every violation, when one is found;
0 with one line otherwise.
"""
import argparse
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# a declaration at the start of a line: its return type, then the name and "("
DECL = re.compile(r'^(?!typedef)(?:static\s+inline\s+|const\s+|struct\s+|enum\s+|unsigned\s+)*'
                  r'[a-z_][a-z0-9_]*[\s*]+\**([a-z_][a-z0-9_]*)\s*\(', re.M)
COMMENT = re.compile(r'/\*.*?\*/', re.S)
MODE = re.compile(r'\bMODE_[A-Z]+\b')


def scan(root, layers):
    """{path: (level, module, [included names])} for user/'s files, and header -> path."""
    files, headers = {}, {}
    folders = [(len(layers), "")] + [(i, name) for i, name in enumerate(layers)]
    for level, folder in folders:
        d = os.path.join(root, "user", folder)
        if not os.path.isdir(d):
            raise SystemExit(f"layers: user/{folder} is not a folder")
        for name in sorted(os.listdir(d)):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join("user", folder, name) if folder else os.path.join("user", name)
            with open(os.path.join(root, path), encoding="utf-8") as f:
                incs = INCLUDE.findall(f.read())
            files[path] = (level, os.path.splitext(name)[0], incs)
            if name.endswith(".h"):
                # the include line's name: its folder and its file
                headers[os.path.relpath(path, "user")] = path
    for d in sorted(os.listdir(os.path.join(root, "user"))):
        if os.path.isdir(os.path.join(root, "user", d)) and d not in layers:
            raise SystemExit(f"layers: user/{d} is in no layer (add it to USER_LAYERS)")
    return files, headers


def bare_names(headers):
    """Header file name -> its path, for the headers of user/'s folders."""
    return {os.path.basename(k): v for k, v in headers.items() if "/" in k}


def level_name(layers, level):
    return "user/ (the commands)" if level == len(layers) else f"user/{layers[level]}/"


def prefixes(root, files):
    """Functions declared in a folder's headers not named after a module of the folder."""
    problems = []
    modules = {}
    for path, (_, module, _) in files.items():
        modules.setdefault(os.path.dirname(path), set()).add(module)
    for path in sorted(files):
        folder = os.path.dirname(path)
        if not path.endswith(".h") or folder == "user":
            continue
        with open(os.path.join(root, path), encoding="utf-8") as f:
            text = COMMENT.sub("", f.read())
        fname = os.path.basename(folder)
        ok = [m + "_" for m in modules[folder]] + [fname + "_" + m + "_" for m in modules[folder]]
        if fname == "util":
            ok.append("hb_")
        for name in DECL.findall(text):
            if not any(name.startswith(p) for p in ok):
                problems.append(f"{path} declares {name}(): a module's prefix is its file "
                                f"name ({os.path.splitext(os.path.basename(path))[0]}_...)")
    return problems


def modes(root, files, top):
    """Files below the top folder, but the option parser, that name a command's mode."""
    problems = []
    for path, (level, module, _) in sorted(files.items()):
        if level >= top or module == "cli" or path.startswith("user/cli/"):
            continue
        with open(os.path.join(root, path), encoding="utf-8") as f:
            m = MODE.search(COMMENT.sub("", f.read()))
        if m:
            problems.append(f"{path} tests a command's mode ({m.group(0)}): let the command "
                            f"pass the behaviour in (struct run)")
    return problems


def check(root, layers, isolated=(), apart=None):
    apart = apart or {}
    files, headers = scan(root, layers)
    problems = prefixes(root, files) + modes(root, files, len(layers) - 1)
    graph = {}  # module path stem -> set of module path stems it includes
    bare = bare_names(headers)
    for path, (level, module, incs) in files.items():
        me = os.path.splitext(path)[0]
        for inc in incs:
            target = headers.get(inc)
            if target is None and "/" not in inc and inc in bare:
                problems.append(
                    f"{path} includes {inc} by its bare name: "
                    f"name its folder, {os.path.relpath(bare[inc], 'user')}"
                )
                target = bare[inc]
            if target is None:
                continue  # bpf/ or generated: below every layer
            tlevel = files[target][0]
            folder = os.path.basename(os.path.dirname(path))
            tfolder = os.path.basename(os.path.dirname(target))
            if tfolder in apart.get(folder, ()):
                problems.append(f"{path} includes {inc}: user/{folder}/ stays apart from "
                                f"user/{tfolder}/")
            if (folder in isolated and os.path.dirname(target) == os.path.dirname(path)
                    and files[target][1] != module):
                problems.append(
                    f"{path} includes {inc}: one module of user/{folder}/ includes "
                    f"another's (what they share goes a layer down)"
                )
            if tlevel > level:
                problems.append(
                    f"{path} includes {inc}, which is in {level_name(layers, tlevel)}, "
                    f"above {level_name(layers, level)}"
                )
            other = os.path.splitext(target)[0]
            if other != me:
                graph.setdefault(me, set()).add(other)
    # cycles between modules (a .c and its .h are one module)
    state, stack = {}, []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                cyc = stack[stack.index(n):] + [n]
                problems.append("include cycle: " + " -> ".join(cyc))
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    return problems, len(files)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=".")
    ap.add_argument("--isolated", action="append", default=[])
    ap.add_argument("--apart", action="append", default=[])
    ap.add_argument("layers", nargs="+")
    a = ap.parse_args()
    apart = {}
    for rule in a.apart:
        folder, _, others = rule.partition("=")
        apart.setdefault(folder, set()).update(o for o in others.split(",") if o)
    problems, n = check(a.root, a.layers, a.isolated, apart)
    for p in problems:
        print(f"layers: {p}", file=sys.stderr)
    if problems:
        print(f"layers: {len(problems)} violation(s)", file=sys.stderr)
        return 1
    print(f"layers: {n} files in {len(a.layers)} folders and user/, no upward include, no cycle, "
          f"every prefix a module's name, no mode below the commands")
    return 0


if __name__ == "__main__":
    sys.exit(main())
