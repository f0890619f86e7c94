#!/usr/bin/env python3
"""Runs the documentation's checked examples and compares their output with what the docs show.

A fenced block in README.md or docs/*.md is checked when the line just above its opening fence is

    <!-- doc-check -->                       or
    <!-- doc-check {"ignore": ["TTFT [0-9.]+ ms"], "stdout": true} -->

Inside the block, a line starting with "$ " is a command (a trailing backslash continues it on the next
line) and the lines after it, up to the next command, are its output: stdout and stderr together, or
stdout alone with "stdout": true. An output line "..." stands for any number of lines (an example
that shows only part of a long output). Each "ignore" regex marks a measurement that changes from run to run
(a time, a rate); what it matches is left out of the comparison on both sides. The exit code is not
compared, so documented errors are checked too.

Commands run with `model-optimizer` on PATH (the build's binary, or $MO_BINARY) in a scratch folder laid
out like the checkout: build/, .cache/, configs/ and scripts/ link to the checkout's and ../shared to the
shared data, so the docs' relative paths work and whatever a command writes lands in the scratch folder.

    scripts/check-docs.py             check every marked block; exit 1 with a diff per mismatch
    scripts/check-docs.py --update    rewrite the output of the marked blocks that differ (not those with '...')
    scripts/check-docs.py --list      list the marked blocks

Exit status: 0 all match, 1 some differ, 77 none differ but some were skipped (the demo model not fetched).
"""
import argparse
import difflib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKER = re.compile(r"^<!-- doc-check(?:\s+(\{.*\}))?\s*-->\s*$")
OPTIONS = {"ignore", "stdout", "timeout"}


class Block:
    def __init__(self, path, fence_line, options, body_start, body_end, steps):
        self.path, self.fence_line, self.options = path, fence_line, options
        self.body_start, self.body_end, self.steps = body_start, body_end, steps

    def where(self):
        return f"{self.path.relative_to(ROOT)}:{self.fence_line + 1}"


def parse_steps(lines, where):
    """[(command, [expected output lines])] from a block's lines."""
    steps, i = [], 0
    if lines and not lines[0].startswith("$ "):
        raise SystemExit(f"{where}: a checked block must start with a '$ ' command line")
    while i < len(lines):
        cmd = lines[i][2:]
        while cmd.endswith("\\") and i + 1 < len(lines):
            i += 1
            cmd += "\n" + lines[i]  # bash joins the lines at the backslash
        i += 1
        out = []
        while i < len(lines) and not lines[i].startswith("$ "):
            out.append(lines[i])
            i += 1
        steps.append((cmd, out))
    return steps


def find_blocks(path):
    lines = path.read_text().split("\n")
    blocks = []
    for n, line in enumerate(lines):
        m = MARKER.match(line)
        if not m:
            continue
        where = f"{path.relative_to(ROOT)}:{n + 1}"
        try:
            options = json.loads(m.group(1)) if m.group(1) else {}
        except json.JSONDecodeError as e:
            raise SystemExit(f"{where}: the doc-check options are not JSON: {e}")
        if not isinstance(options, dict) or set(options) - OPTIONS:
            raise SystemExit(f"{where}: doc-check options must be an object with keys among {sorted(OPTIONS)}")
        fence = n + 1
        if fence >= len(lines) or not lines[fence].startswith("```"):
            raise SystemExit(f"{where}: a doc-check marker must be followed by a fenced block")
        end = fence + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        if end == len(lines):
            raise SystemExit(f"{where}: the fenced block is not closed")
        blocks.append(Block(path, fence, options, fence + 1, end, parse_steps(lines[fence + 1:end], where)))
    return blocks


def scratch_dir(tmp, binary):
    """A folder that looks like the checkout from the inside: <tmp>/work with <tmp>/shared beside it."""
    work = Path(tmp) / "work"
    work.mkdir()
    for name in ("build", ".cache", "configs", "scripts"):
        if (ROOT / name).exists():
            (work / name).symlink_to(ROOT / name)
    shared = Path(os.environ.get("MO_SHARED_DATA", ROOT.parent / "shared" / "data")).resolve().parent
    if shared.exists():
        (Path(tmp) / "shared").symlink_to(shared)
    bindir = Path(tmp) / "bin"
    bindir.mkdir()
    (bindir / "model-optimizer").symlink_to(binary)
    return work, bindir


def matches(expected, actual):
    """expected == actual, where an expected line "..." stands for any number of lines."""
    if not expected:
        return not actual
    if expected[0] == "...":
        return any(matches(expected[1:], actual[k:]) for k in range(len(actual) + 1))
    return bool(actual) and expected[0] == actual[0] and matches(expected[1:], actual[1:])


def normalise(lines, ignore):
    out = []
    for line in lines:
        for pattern in ignore:
            line = re.sub(pattern, "<varies>", line)
        out.append(line.rstrip())
    while out and not out[-1]:
        out.pop()
    return out


def run_block(block, work, env):
    """[(command, expected lines, actual lines)] for the block's commands."""
    results = []
    for cmd, expected in block.steps:
        stderr = subprocess.DEVNULL if block.options.get("stdout") else subprocess.STDOUT
        try:
            r = subprocess.run(["bash", "-c", cmd], cwd=work, env=env, stdout=subprocess.PIPE, stderr=stderr,
                               timeout=block.options.get("timeout", 600))
            actual = r.stdout.decode(errors="replace").split("\n")
        except subprocess.TimeoutExpired:
            actual = [f"(timed out after {block.options.get('timeout', 600)} s)"]
        while actual and not actual[-1].strip():
            actual.pop()
        results.append((cmd, expected, actual))
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--update", action="store_true", help="rewrite the marked blocks with the output of this build")
    ap.add_argument("--list", action="store_true", help="list the marked blocks and exit")
    ap.add_argument("docs", nargs="*", help="files to check (default: README.md and docs/*.md)")
    args = ap.parse_args()

    paths = [Path(p).resolve() for p in args.docs] or [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    blocks = [b for p in paths for b in find_blocks(p)]
    if args.list:
        for b in blocks:
            firsts = [c.split("\n")[0].rstrip(" \\") for c, _ in b.steps]
            print(f"{b.where()}: {'; '.join(firsts)}")
        return 0
    binary = Path(os.environ.get("MO_BINARY", ROOT / "build" / "model-optimizer")).resolve()
    if not binary.exists():
        print(f"check-docs: {binary} not found; build first (scripts/build.sh) or set MO_BINARY", file=sys.stderr)
        return 1

    failures, edits = 0, {}
    with tempfile.TemporaryDirectory(prefix="mo-doc-check-") as tmp:
        work, bindir = scratch_dir(tmp, binary)
        # MO_SIMD=avx2: the examples' numbers are the same on every x86-64 machine with AVX2 (the last digits
        # of an f32 result depend on the vector width; AVX-512 machines would otherwise print their own)
        env = {**os.environ, "PATH": f"{bindir}:{os.environ.get('PATH', '')}", "COLUMNS": "120", "MO_SIMD": "avx2"}
        env.pop("MO_LOG_LEVEL", None)
        skipped = 0
        for b in blocks:
            # The demo model comes from PyPI (scripts/fetch-demo-model.sh); without it its examples cannot run.
            needed = {p: ROOT / p for c, _ in b.steps for p in re.findall(r"\.cache/models/[\w.-]+", c)}
            # The shared data (MO_SHARED_DATA) may be absent too; the docs spell it ../shared/data/.
            shared = Path(os.environ.get("MO_SHARED_DATA", ROOT.parent / "shared" / "data"))
            needed |= {p: shared / p[len("../shared/data/"):] for c, _ in b.steps for p in re.findall(r"\.\./shared/data/[\w./-]+", c)}
            missing = sorted(p for p, real in needed.items() if not real.exists())
            if missing:
                print(f"{b.where()}: SKIPPED, needs {', '.join(missing)} (scripts/fetch-demo-model.sh, the shared data)")
                skipped += 1
                continue
            results = run_block(b, work, env)
            ignore = b.options.get("ignore", [])
            bad = [(c, e, a) for c, e, a in results if not matches(normalise(e, ignore), normalise(a, ignore))]
            print(f"{b.where()}: {len(results)} command(s), {'ok' if not bad else 'DIFFERS'}")
            if args.update and bad and any("..." in e for _, e, _ in results):
                print("  not updated: the block leaves lines out with '...'; edit it by hand")
            elif args.update and bad:
                body = []
                for c, _, a in results:
                    body += ["$ " + c] + a
                edits.setdefault(b.path, []).append((b.body_start, b.body_end, body))
                continue
            for c, e, a in bad:
                failures += 1
                diff = difflib.unified_diff(normalise(e, ignore), normalise(a, ignore), "the doc", "this build", lineterm="")
                print(f"  $ {c}\n" + "\n".join("    " + d for d in diff))
    for path, changes in edits.items():
        lines = path.read_text().split("\n")
        for start, end, body in sorted(changes, reverse=True):
            lines[start:end] = body
        path.write_text("\n".join(lines))
        print(f"updated {path.relative_to(ROOT)}")
    if failures:
        print(f"check-docs: {failures} example(s) differ from this build's output; update the doc "
              f"(scripts/check-docs.py --update) after checking that the new output is right")
        return 1
    print(f"check-docs: {len(blocks) - skipped} checked block(s) match" + (f", {skipped} skipped" if skipped else ""))
    return 77 if skipped else 0  # 77: ctest's SKIP_RETURN_CODE for these tests


if __name__ == "__main__":
    sys.exit(main())
