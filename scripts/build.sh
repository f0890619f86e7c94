#!/usr/bin/env bash
# Configures and builds into build/ (Release). Extra arguments go to CMake, e.g. -DMO_WITH_CUDA=OFF.
# MO_BUILD_TARGETS="model-optimizer" builds only those targets (the demo needs no test programs).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
targets=()
for t in ${MO_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build build -j"$jobs" "${targets[@]}"
