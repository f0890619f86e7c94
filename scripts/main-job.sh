#!/usr/bin/env bash
# The main job on the built-in defaults: fetch the SmolLM2-135M demo model and convert it to an HF
# directory, quantize it with AWQ INT4 g64 on the built-in `general` calibration set (g64: SmolLM2's
# hidden size 576 is not a multiple of 128, and AWQ GEMM keeps one group size for the whole model),
# evaluate base vs quantized with the same engine, and print where the report is. Needs build/model-optimizer
# (scripts/build.sh). MO_BIN overrides the binary; extra arguments go to `quantize` (e.g. --eval-limit 100).
# The output directory is .cache/main-job/SmolLM2-135M-Instruct-AWQ-INT4 (an earlier one is moved aside).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${MO_BIN:-build/model-optimizer}
model=$(scripts/fetch-demo-model.sh --hf)
scripts/fetch-calibration.sh >&2
out=.cache/main-job/SmolLM2-135M-Instruct-AWQ-INT4
mkdir -p .cache/main-job
# quantize never writes over an existing path; keep the previous run for comparison.
[ -e "$out" ] && rm -rf "$out.previous" && mv "$out" "$out.previous"
"$bin" quantize --model_path "$model" --output_path "$out" --quant_method awq --bits 4 --group_size 64 \
  --calibration_data general "$@"
echo
echo "report: $out/report.md"
