"""The module layers hold: every #include follows an arrow declared in cmake/Modules.cmake, no module reaches
into another's private files, and docs/architecture.md shows exactly those layers (scripts/check-layers.py)."""
import os
import subprocess
import sys

root = os.environ.get("MO_SOURCE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
r = subprocess.run([sys.executable, os.path.join(root, "scripts", "check-layers.py")], capture_output=True, text=True)
print(r.stdout, end="")
print(r.stderr, end="", file=sys.stderr)
sys.exit(r.returncode)
