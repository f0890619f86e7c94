#!/usr/bin/env bash
# clang-tidy with the checks in .clang-tidy over the C++ files changed since origin/main (or main), or
# every file under src/ with --all. Needs a configured build/ (compile_commands.json). Exit 1 on findings.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build/compile_commands.json ] || { echo "tidy: no build/compile_commands.json; run scripts/build.sh first" >&2; exit 2; }
tidy=$(command -v run-clang-tidy-14 || command -v run-clang-tidy || true)
[ -n "$tidy" ] || { echo "tidy: run-clang-tidy not found (Debian: apt-get install clang-tidy)" >&2; exit 2; }
if [ "${1:-}" = "--all" ]; then
  files=$(git ls-files 'src/*.cpp')
else
  base=$(git merge-base HEAD origin/main 2>/dev/null || git merge-base HEAD main)
  files=$(git diff --name-only "$base" -- 'src/*.cpp'; git ls-files --others --exclude-standard 'src/*.cpp')
fi
[ -n "$files" ] || { echo "tidy: no C++ files to check"; exit 0; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# shellcheck disable=SC2086
"$tidy" -quiet -p build -j "$(nproc 2>/dev/null || echo 2)" $files >"$out" 2>/dev/null || true
grep -E "warning:|error:" "$out" | sort -u || true
n=$(grep -cE "warning:|error:" "$out" || true)
echo "tidy: $(echo "$files" | wc -w) files, $n findings"
[ "$n" -eq 0 ]
