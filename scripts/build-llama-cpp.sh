#!/usr/bin/env bash
# Builds llama.cpp's llama-bench, llama-server and llama-quantize (CPU only) once, for the side-by-side benchmarks
# (scripts/bench-vs-llama-cpp.sh). The source is the llama.cpp that the llama-cpp-python source
# distribution on PyPI vendors (pinned: LLAMA_CPP_PYTHON_VERSION, default 0.3.36; when that version
# cannot be downloaded, the newest one pip finds is used and its version printed).
# Everything lives in .cache/llama.cpp/ (git-ignored); the binaries end up in .cache/llama.cpp/bin/.
# Prints the bin directory on stdout; progress goes to stderr. Later calls only print the path.
# Env: LLAMA_CPP_PYTHON_VERSION, JOBS (default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
root=.cache/llama.cpp
bin=$root/bin
want=${LLAMA_CPP_PYTHON_VERSION:-0.3.36}
jobs=${JOBS:-2}
py=.cache/venv/bin/python
[ -x "$py" ] || py=python3

if [ -x "$bin/llama-bench" ] && [ -x "$bin/llama-server" ] && [ -x "$bin/llama-quantize" ]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$root/src"
sdist=$(ls "$root"/src/llama_cpp_python-*.tar.gz 2>/dev/null | head -n1 || true)
if [ -z "$sdist" ]; then
  echo "build-llama-cpp: downloading the llama-cpp-python==$want source distribution from PyPI" >&2
  if ! "$py" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
      "llama-cpp-python==$want" -d "$root/src" >&2; then
    echo "build-llama-cpp: llama-cpp-python==$want is not available; using the newest version" >&2
    "$py" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
      llama-cpp-python -d "$root/src" >&2
  fi
  sdist=$(ls "$root"/src/llama_cpp_python-*.tar.gz | head -n1)
fi
version=$(basename "$sdist" .tar.gz)
version=${version#llama_cpp_python-}
echo "build-llama-cpp: llama-cpp-python $version" >&2
src=$root/src/llama_cpp_python-$version
[ -d "$src/vendor/llama.cpp" ] || tar -xzf "$sdist" -C "$root/src"
llama=$src/vendor/llama.cpp

# Option names checked against this vendored llama.cpp: LLAMA_CURL is deprecated (a no-op with a
# warning; downloads now go through LLAMA_OPENSSL), and the server's web UI would otherwise try to
# download prebuilt assets from Hugging Face at build time (LLAMA_USE_PREBUILT_UI).
cmake -S "$llama" -B "$root/build" -DCMAKE_BUILD_TYPE=Release \
  -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON \
  -DBUILD_SHARED_LIBS=OFF >&2
cmake --build "$root/build" -j"$jobs" --target llama-bench llama-server llama-quantize >&2
mkdir -p "$bin"
for t in llama-bench llama-server llama-quantize; do
  f=$(find "$root/build" -type f -name "$t" -perm -u+x | head -n1)
  [ -n "$f" ] || { echo "build-llama-cpp: $t was not built" >&2; exit 1; }
  cp "$f" "$bin/$t"
done
echo "$version" > "$bin/VERSION"
echo "$bin"
