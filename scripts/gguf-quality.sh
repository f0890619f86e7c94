#!/usr/bin/env bash
# The quality table of docs/gguf.md: SmolLM2-135M-Instruct (F16 HF directory from the demo model)
# quantized to GGUF file types with and without an importance matrix (computed from the built-in
# `general` calibration set), then WikiText-2 test (raw) perplexity by our engine, llama.cpp's method
# (n_ctx 512, first CHUNKS windows), the RMS weight error against our F16 export (all matrices), size
# and quantize time.
#   scripts/gguf-quality.sh [OUT_DIR]   env: TEXT, CHUNKS (default 20), TYPES (default below),
#                                            SAMPLES (calibration samples for the imatrix, default 32)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.cache/gguf-quality}
text=${TEXT:-../shared/data/text/wikitext2-test-raw.txt}
chunks=${CHUNKS:-20}
samples=${SAMPLES:-32}
types=${TYPES:-"f16 q8_0 q6_k q5_k_m q4_k_m q4_0 q2_k"}
scripts/fetch-demo-model.sh --hf >/dev/null
model=.cache/models/SmolLM2-135M-Instruct-F16
bin=${BIN:-build/model-optimizer}
ppl=${PPL:-build/tests/tools/mo_tool_perplexity}
py=${PYTHON:-.cache/venv/bin/python}
mkdir -p "$out"

run() {  # name, quantize flags...
  local name=$1; shift
  if [ ! -s "$out/$name.gguf" ]; then
    local t0=$(date +%s.%N)
    "$bin" quantize --model_path "$model" --output_path "$out/$name.gguf" --quant_method gguf --no-eval \
      --num_samples "$samples" "$@" >"$out/$name.log" 2>&1
    python3 -c "print('%.1f' % ($(date +%s.%N) - $t0))" >"$out/$name.seconds"
  fi
  [ -s "$out/$name.ppl" ] || "$ppl" "$out/$name.gguf" "$text" --ctx 512 --chunks "$chunks" >"$out/$name.ppl"
}

# RMS of (dequantized - F16 export) over every matrix of the file.
rms() {
  "$py" - "$out/f16.gguf" "$1" <<'PY'
import sys, numpy as np, gguf
from gguf.quants import dequantize
ref = {t.name: t for t in gguf.GGUFReader(sys.argv[1]).tensors}
se, n = 0.0, 0
for t in gguf.GGUFReader(sys.argv[2]).tensors:
    if len(t.shape) < 2:
        continue
    a = dequantize(t.data, t.tensor_type).astype(np.float64).ravel()
    b = dequantize(ref[t.name].data, ref[t.name].tensor_type).astype(np.float64).ravel()
    se += float(((a - b) ** 2).sum()); n += a.size
print("%.3e" % (se / n) ** 0.5)
PY
}

echo "| gguf_type | imatrix | size | quantize time | RMS weight error | WikiText-2 PPL | vs F16 |"
echo "|---|---|---|---|---|---|---|"
base=""
for type in $types; do
  for im in none auto; do
    [ "$im" = auto ] && case $type in f16|bf16|q8_0) continue;; esac
    name=$type-$im
    [ "$type" = f16 ] && name=f16
    run "$name" --gguf_type "$type" --imatrix "$im"
    p=$(python3 -c "import json;print('%.4f'%json.load(open('$out/$name.ppl'))['ppl'])")
    [ -z "$base" ] && base=$p
    size=$(stat -c %s "$out/$name.gguf")
    err=$( [ "$name" = f16 ] && echo 0 || rms "$out/$name.gguf")
    echo "| $type | $im | $(numfmt --to=iec --suffix=B "$size") | $(cat "$out/$name.seconds") s | $err | $p | $(python3 -c "print('%+.2f%%'%(100*($p/$base-1)))") |"
  done
done
