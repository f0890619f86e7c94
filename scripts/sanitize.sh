#!/usr/bin/env bash
# The sanitizer run (CI's second step): builds with clang under AddressSanitizer + UndefinedBehaviorSanitizer
# into build-asan/, runs the unit tests there, then each fuzz target (tests/fuzz) on its seed corpus plus a
# bounded mutation run. Any finding fails the run; libFuzzer leaves the input in build-asan/fuzz-findings/.
# By default the mutation run is a fixed number of inputs from a fixed seed, so the same tree gives the same
# result on any machine (CI must not fail on a change because a faster machine got further); hunting for new
# findings is a longer run with a random seed: FUZZ_SEED=0 FUZZ_SECONDS=600 scripts/sanitize.sh.
#   FUZZ_RUNS=100000 (inputs per target, the only bound: every machine runs the same inputs; 0 = corpus only)
#   FUZZ_TARGETS="gguf chat_template" (default: all)   FUZZ_SEED=1 (0 = random)
#   FUZZ_SECONDS (a time per target instead of FUZZ_RUNS, for hunting)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-}
runs=${FUZZ_RUNS:-100000}

scripts/install-deps.sh clang libclang-rt-14-dev >/dev/null  # clang, libFuzzer and the sanitizer runtimes

jobs=$(nproc 2>/dev/null || echo 2)
# -O0 with line tables (readable stack traces, assert() on) at about half the compile time of -O1; the parsers,
# the tokenizer and the numeric modules are built at -O1 all the same (MO_SANITIZE_O1_MODULES in CMakeLists.txt),
# so the tests and the fuzz targets run at -O1 speed where they spend their time.
CC=clang CXX=clang++ cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Sanitize -DCMAKE_CXX_FLAGS="-O0 -gline-tables-only" \
  -DMO_WITH_CUDA=OFF -DMO_SANITIZE=address,undefined -DMO_FUZZ=ON >/dev/null
targets=$(sed -n 's#^.*/fuzz/\(fuzz_[a-z_]*\)\.cpp$#\1#p' <(ls tests/fuzz/fuzz_*.cpp) | grep -v '^fuzz_main$')
built=$SECONDS
cmake --build build-asan -j"$jobs" --target mo_unit_tests $targets
echo "sanitize: build took $((SECONDS - built)) s"

# allocator_may_return_null: a huge allocation fails as it would without ASan (bad_alloc), which the
# code turns into an error naming the bytes, instead of ASan aborting first.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
echo "sanitize: unit tests under ASan/UBSan"
tested=$SECONDS
ctest --test-dir build-asan --output-on-failure -L unit -j"$jobs"
echo "sanitize: unit tests took $((SECONDS - tested)) s"

shared=$(cmake -L -N build-asan | sed -n 's/^MO_SHARED_DATA:PATH=//p')
export MO_SHARED_DATA=${MO_SHARED_DATA:-$shared}
findings=build-asan/fuzz-findings
mkdir -p "$findings"
failed=()
for t in ${FUZZ_TARGETS:-$(sed 's/fuzz_//g' <<<"$targets")}; do
  seeds=(tests/fuzz/corpus/"$t")
  [ "$t" = chat_template ] && seeds+=(tests/data/chat_templates)
  work=$(mktemp -d)  # new inputs go here, not into the committed seeds
  args=(-seed="${FUZZ_SEED:-1}" -timeout=30 -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 -artifact_prefix="$findings/$t-")
  if [ -n "$seconds" ]; then
    args+=(-max_total_time="$seconds")
    echo "sanitize: fuzz_$t, ${seconds} s, seed ${FUZZ_SEED:-1}"
  else
    args+=(-runs="$runs")
    echo "sanitize: fuzz_$t, $runs inputs, seed ${FUZZ_SEED:-1}"
  fi
  started=$(date +%s)
  if ! build-asan/tests/fuzz/fuzz_"$t" "${args[@]}" "$work" "${seeds[@]}" >"$findings/$t.log" 2>&1; then
    failed+=("$t")
    tail -60 "$findings/$t.log"
  else
    ran=$(sed -n 's/^stat::number_of_executed_units: *//p' "$findings/$t.log")
    printf 'sanitize:   fuzz_%s: %s inputs in %s s, peak RSS %s MB\n' "$t" "$ran" "$(($(date +%s) - started))" \
      "$(sed -n 's/^stat::peak_rss_mb: *//p' "$findings/$t.log")"
    # The count is the contract: a run that stopped short of it (a time limit, a crash of libFuzzer itself) fails.
    if [ -z "$seconds" ] && [ "${ran:-0}" -lt "$runs" ]; then
      echo "sanitize: fuzz_$t ran $ran of $runs inputs"
      failed+=("$t")
    fi
  fi
  rm -rf "$work"
done
if ((${#failed[@]})); then
  echo "sanitize: findings in ${failed[*]} (inputs in $findings/)"
  exit 1
fi
echo "sanitize: no findings"
