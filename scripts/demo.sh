#!/usr/bin/env bash
# Sets everything up on a fresh Debian machine and runs the demo: the memory budget of the demo model
# (SmolLM2-135M, as shipped) and of Llama-2-13B on a 24 GB card in fp16 vs AWQ INT4, then the main job
# (scripts/main-job.sh: quantize the demo model with AWQ INT4 and write the before/after report) with a
# short evaluation (10 perplexity windows, 150 task items; run scripts/main-job.sh alone for the full one).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# The demo runs on the CPU: the CUDA backend is built only when a GPU is visible, and then for that GPU
# alone ("native"); compiling it for every shipped architecture takes longer than the demo itself.
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  MO_BUILD_TARGETS=model-optimizer scripts/build.sh -DMO_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=native
else
  MO_BUILD_TARGETS=model-optimizer scripts/build.sh -DMO_WITH_CUDA=OFF
fi
model=$(scripts/fetch-demo-model.sh)
echo
echo "== model-optimizer budget --model_path $model --gpu rtx4090"
build/model-optimizer budget --model_path "$model" --gpu rtx4090
echo
echo "== model-optimizer budget --model_path llama-2-13b --weight-format fp16 --gpu rtx4090"
build/model-optimizer budget --model_path llama-2-13b --weight-format fp16 --gpu rtx4090
echo
echo "== model-optimizer budget --model_path llama-2-13b --compare-formats --gpu rtx4090"
build/model-optimizer budget --model_path llama-2-13b --compare-formats --gpu rtx4090
echo
echo "== the main job: scripts/main-job.sh --eval-ppl-windows 10 --eval-limit 150"
scripts/main-job.sh --eval-ppl-windows 10 --eval-limit 150
