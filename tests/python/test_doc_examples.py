#!/usr/bin/env python3
"""The documentation's checked examples (blocks marked `<!-- doc-check -->` in README.md and docs/) print
what this build prints: scripts/check-docs.py runs each one and fails with a diff when the output differs,
so a change that alters a shown output fails until the doc is updated (`scripts/check-docs.py --update`)."""
import os
import subprocess
import sys
from pathlib import Path

SOURCE = Path(os.environ.get("MO_SOURCE_DIR", Path(__file__).resolve().parents[2]))


def main():
    r = subprocess.run([sys.executable, str(SOURCE / "scripts" / "check-docs.py")], capture_output=True, text=True)
    print(r.stdout + r.stderr)
    marked = sum(1 for line in r.stdout.splitlines() if " command(s), " in line or ": SKIPPED, needs " in line)
    assert marked >= 10, f"expected the docs to mark at least 10 checked examples, found {marked}"
    return r.returncode  # 77 (skipped) when examples needed the demo model or the shared data


if __name__ == "__main__":
    sys.exit(main())
