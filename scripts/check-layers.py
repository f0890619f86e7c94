#!/usr/bin/env python3
"""The module layers, from cmake/Modules.cmake (the one list the build enforces), checked against the tree.

  scripts/check-layers.py           check: every #include of another module's header is an allowed arrow,
                                    no source reaches into another module's private files ("../<module>/"),
                                    and docs/architecture.md shows exactly these layers
  scripts/check-layers.py --write   rewrite the layer picture in docs/architecture.md from the CMake list

Exit status 1 with one line per violation ("src/io/x.cpp:12: io -> quant is not an allowed arrow").
"""
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
DOC = os.path.join(ROOT, "docs", "architecture.md")
BEGIN, END = "<!-- layers:begin (scripts/check-layers.py --write) -->", "<!-- layers:end -->"
# The CUDA kernels are compiled into the plugin (cmake/Cuda.cmake), which may read these modules' headers.
KERNEL_DEPS = ["core", "formats", "engine"]


def modules():
    """[(name, [direct deps])] in declaration order, from the mo_module() calls."""
    text = open(os.path.join(ROOT, "cmake", "Modules.cmake")).read()
    out = []
    for m in re.finditer(r"^mo_module\((\w+)([^)]*)\)", text, re.M):
        args = m.group(2).split()
        deps, mode = [], None
        for a in args:
            if a in ("DEPS", "LIBS"):
                mode = a
            elif mode == "DEPS":
                deps.append(a)
        out.append((m.group(1), deps))
    return out


def closure(mods):
    direct = dict(mods)
    full = {}
    for name, _ in mods:
        seen, todo = set(), list(direct[name])
        while todo:
            d = todo.pop()
            if d not in seen:
                seen.add(d)
                todo.extend(direct.get(d, []))
        full[name] = seen
    return full


def module_of(path):
    parts = path.split(os.sep)
    if parts[0] == "src" and len(parts) > 2:
        return parts[1]
    if parts[0] == "include" and len(parts) > 3 and parts[1] == "mo":
        return parts[2]
    if parts[0] == "kernels":
        return "kernels"
    return None


def check_includes(mods):
    allowed = closure(mods)
    allowed["kernels"] = set(KERNEL_DEPS) | {"kernels"}
    allowed["app"] = {m for m, _ in mods}  # the command-line front end may use every module
    problems = []
    inc = re.compile(r'^\s*#\s*include\s+"(mo/(\w+)/[^"]+|\.\./([\w]+)/[^"]+)"')
    for top in ("src", "include", "kernels"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for f in sorted(files):
                if not f.endswith((".h", ".cpp", ".cu", ".cuh")):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, f), ROOT)
                mod = module_of(rel)
                if mod is None:
                    continue
                if rel.startswith(os.path.join("src", "engine", "backend")) and f.endswith(".cu"):
                    mod = "kernels"  # the CUDA backend wrapper is built into the plugin with the kernels
                for n, line in enumerate(open(os.path.join(ROOT, rel), errors="replace"), 1):
                    m = inc.match(line)
                    if not m:
                        continue
                    target = m.group(2) or m.group(3)
                    if m.group(3):
                        # "../x/" from src/<module>/ reaches into module x's private files; "../" inside a module is fine.
                        if target != mod and target not in ("backend", "cpu", "linear") and os.path.exists(os.path.join(ROOT, "src", target)):
                            problems.append(f"{rel}:{n}: includes {m.group(1)}, a private file of module {target}")
                        continue
                    if target != mod and target not in allowed.get(mod, set()):
                        problems.append(f"{rel}:{n}: {mod} -> {target} is not an allowed arrow (cmake/Modules.cmake)")
    return problems


def reduced(mods):
    """Direct arrows without the ones implied by a longer path, so the picture stays readable."""
    full = closure(mods)
    out = []
    for name, deps in mods:
        keep = [d for d in deps if not any(d in full[o] for o in deps if o != d)]
        out.append((name, keep))
    return out


def picture(mods):
    lines = [BEGIN, "", "```mermaid", "flowchart BT"]
    for name, deps in reduced(mods):
        for d in deps:
            lines.append(f"  {name} --> {d}")
    lines.append("  app --> " + " & ".join(n for n, _ in mods if not any(n in d for _, d in mods)))
    lines.append("  kernels[\"kernels (CUDA plugin)\"] --> " + " & ".join(KERNEL_DEPS))
    lines += ["```", "", "| module | library | may include (declared; what those include comes along) |", "|---|---|---|"]
    for name, deps in mods:
        lines.append(f"| `{name}` | `mo_{name}` | {', '.join(f'`{d}`' for d in deps) or '—'} |")
    lines += ["", END]
    return "\n".join(lines)


def main():
    mods = modules()
    if not mods:
        print("check-layers: no mo_module() calls in cmake/Modules.cmake")
        return 1
    doc = open(DOC).read() if os.path.exists(DOC) else ""
    want = picture(mods)
    if "--write" in sys.argv:
        if BEGIN in doc and END in doc:
            doc = doc[: doc.index(BEGIN)] + want + doc[doc.index(END) + len(END):]
        else:
            doc += "\n" + want + "\n"
        open(DOC, "w").write(doc)
        print(f"check-layers: wrote the layer picture of {len(mods)} modules into docs/architecture.md")
    problems = check_includes(mods)
    if BEGIN not in doc or END not in doc or doc[doc.index(BEGIN): doc.index(END) + len(END)] != want:
        problems.append("docs/architecture.md: the layer picture differs from cmake/Modules.cmake; run scripts/check-layers.py --write")
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"check-layers: {len(mods)} modules, every include follows an allowed arrow, docs/architecture.md agrees")
    return 0


if __name__ == "__main__":
    sys.exit(main())
