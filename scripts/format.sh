#!/usr/bin/env bash
# clang-format (.clang-format) over every C++ and CUDA file in src/, include/, kernels/ and tests/:
# rewrites them, or with --check lists the files that differ and exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
fmt=$(command -v clang-format-14 || command -v clang-format || true)
[ -n "$fmt" ] || { echo "format: clang-format not found (Debian: apt-get install clang-format)" >&2; exit 2; }
mapfile -t files < <(git ls-files 'src/*.cpp' 'src/*.h' 'src/*.cu' 'include/*.h' 'kernels/*.cu' 'kernels/*.cuh' 'kernels/*.h' 'tests/*.cpp' 'tests/*.h')
if [ "${1:-}" = "--check" ]; then
  bad=0
  for f in "${files[@]}"; do
    if ! "$fmt" --dry-run -Werror "$f" >/dev/null 2>&1; then echo "format: $f differs from .clang-format"; bad=1; fi
  done
  [ "$bad" -eq 0 ] && echo "format: ${#files[@]} files follow .clang-format"
  exit "$bad"
fi
"$fmt" -i "${files[@]}"
echo "format: ${#files[@]} files formatted"
