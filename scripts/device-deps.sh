#!/usr/bin/env bash
# Run here (a Debian machine with apt) before scripts/device-check.sh goes to a GPU machine that has
# CUDA but no Debian -dev packages and no network: downloads the .deb files of our build dependencies
# into .device-deps/ (git-ignored), which the device call carries and device-check.sh unpacks into a
# private prefix, and the stories260K model for an end-to-end check. Usage: scripts/device-deps.sh
# (then carry ".device-deps" in the device call)
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs=(libcli11-dev libyaml-cpp-dev libyaml-cpp0.7 libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 nlohmann-json3-dev
      libgtest-dev libgmock-dev googletest libcpp-httplib-dev libcpp-httplib0.11 libopenblas-dev libopenblas0-pthread
      libopenblas0 libopenblas-pthread-dev liblapacke-dev liblapacke libblas-dev liblapack-dev libpcre2-dev libpcre2-8-0
      libgfortran5 libquadmath0 libssl-dev libssl3 zlib1g-dev zlib1g libbrotli-dev libbrotli1)
mkdir -p .device-deps
cd .device-deps
for p in "${pkgs[@]}"; do
  ls "${p}"_*.deb >/dev/null 2>&1 || apt-get download -q "$p" 2>/dev/null || echo "device-deps: $p not found (skipped)"
done
# The tiny real model, for the end-to-end check on the GPU (the shared data does not travel).
stories=../../shared/data/models/stories260K.gguf
[ -f "$stories" ] && cp -f "$stories" . || echo "device-deps: $stories not found; the GPU check will skip its generate test"
du -sh .
