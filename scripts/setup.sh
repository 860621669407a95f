#!/usr/bin/env bash
# One-time set-up on a fresh Debian machine (idempotent): system packages,
# the Python venv for tools and tests, and the default model files.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
for pkg in build-essential cmake pkg-config libpcre2-dev libcjson-dev libmicrohttpd-dev python3-venv; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing packages ${need_apt[*]}; run as root or install them" >&2
    exit 1
  fi
  echo "setup: apt-get install ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ] || [ requirements.txt -nt .venv/.stamp ]; then
  echo "setup: python venv (.venv)"
  python3 -m venv .venv
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -r requirements.txt
  touch .venv/.stamp
fi

bash scripts/fetch_models.sh
