#!/usr/bin/env bash
# Installs everything guildlore needs on a fresh Debian machine:
# system libraries (apt) and a virtualenv in .venv with the project and its extras.
# Safe to run again: every step is idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

WITH_TESTS=0
for arg in "$@"; do
  case "$arg" in
    --tests) WITH_TESTS=1 ;;
    *) echo "setup.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

need_pkgs=(libopus0)
if [ "$WITH_TESTS" = 1 ]; then
  # systemd: systemd-analyze checks the units in deploy/systemd.
  need_pkgs+=(espeak-ng sox chromium chromium-driver systemd)
fi
missing=()
for p in "${need_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "setup: installing system packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
extras="."
# The tests install the optional local speech-to-text extra too, so its
# end-to-end test runs instead of being skipped.
[ "$WITH_TESTS" = 1 ] && extras=".[dev,local-stt]"
stamp=".venv/.guildlore-installed-$(sha256sum pyproject.toml | cut -c1-16)-$WITH_TESTS"
if [ ! -f "$stamp" ]; then
  .venv/bin/python -m pip install -q --upgrade pip
  # setuptools reports every editable install with an "informational"
  # warning (a folder named like the package may shadow it: here that folder
  # IS the package, on purpose); silence that one message, nothing else.
  PYTHONWARNINGS="ignore:Editable installation" .venv/bin/python -m pip install -q -e "$extras"
  touch "$stamp"
fi
