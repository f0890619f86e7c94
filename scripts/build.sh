#!/usr/bin/env bash
# Configures and builds into build/ (Release). Extra arguments go to CMake, e.g. -DMO_WITH_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j"$jobs"
