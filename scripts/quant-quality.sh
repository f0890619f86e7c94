#!/usr/bin/env bash
# The quality table of docs/quantize.md: SmolLM2-135M-Instruct (F16 HF directory from the demo model)
# quantized with RTN, AWQ and GPTQ (4-bit, group 64) and RTN INT8 per-channel on the built-in `general`
# calibration set, then WikiText-2 test (raw) perplexity by our engine, llama.cpp's method (n_ctx 512,
# first CHUNKS windows), and size on disk.
#   scripts/quant-quality.sh [OUT_DIR]      env: TEXT (the WikiText-2 raw test file), CHUNKS (default 40)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.cache/quant-quality}
text=${TEXT:-../shared/data/text/wikitext2-test-raw.txt}
chunks=${CHUNKS:-40}
scripts/fetch-demo-model.sh --hf >/dev/null
model=.cache/models/SmolLM2-135M-Instruct-F16
bin=build/model-optimizer
ppl=build/tests/tools/mo_tool_perplexity
mkdir -p "$out"

run() {  # name, quantize flags...
  local name=$1; shift
  if [ ! -d "$out/$name" ]; then
    local t0=$(date +%s)
    "$bin" quantize --model_path "$model" --output_path "$out/$name" --no-eval "$@" >"$out/$name.log" 2>&1
    echo $(($(date +%s) - t0)) >"$out/$name.seconds"
  fi
}
run rtn-int4-g64 --quant_method rtn --bits 4 --group_size 64
run awq-int4-g64 --quant_method awq --bits 4 --group_size 64
run gptq-int4-g64 --quant_method gptq --bits 4 --group_size 64
run rtn-int8-pc --quant_method rtn --bits 8 --group_size -1
# The second table: what the sensitivity fallback and act-order contribute.
run rtn-int4-g64-nosens --quant_method rtn --bits 4 --group_size 64 --sensitivity_threshold 0
run gptq-int4-g64-noact --quant_method gptq --bits 4 --group_size 64 --no-desc-act

echo "| model | format | size on disk | quantize time | WikiText-2 PPL | vs F16 |"
echo "|---|---|---|---|---|---|"
base=""
for name in f16 rtn-int4-g64 awq-int4-g64 gptq-int4-g64 rtn-int8-pc rtn-int4-g64-nosens gptq-int4-g64-noact; do
  dir=$out/$name; [ "$name" = f16 ] && dir=$model
  [ -s "$out/$name.ppl" ] || MO_LOG_LEVEL=warn "$ppl" "$dir" "$text" --ctx 512 --chunks "$chunks" >"$out/$name.ppl"
  p=$(python3 -c "import json,sys;print('%.4f'%json.load(open('$out/$name.ppl'))['ppl'])")
  [ -z "$base" ] && base=$p
  size=$(du -sb --exclude='*.log' "$dir" | cut -f1)
  secs=$( [ -s "$out/$name.seconds" ] && echo "$(cat "$out/$name.seconds") s" || echo "-")
  fmt=$( [ "$name" = f16 ] && echo "F16 safetensors" || python3 -c "import json;print(json.load(open('$dir/model-optimizer.json'))['summary'].split(';')[0])")
  echo "| $name | $fmt | $(numfmt --to=iec --suffix=B "$size") | $secs | $p | $(python3 -c "print('%+.2f%%'%(100*($p/$base-1)))") |"
done
