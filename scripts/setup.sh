#!/usr/bin/env bash
# Install what the tests need on a fresh Debian machine (idempotent):
# Rust targets/components, the Python venv with torch for fixtures and round-trip tests.
set -euo pipefail
cd "$(dirname "$0")/.."

rustup target add wasm32-unknown-unknown
rustup component add clippy rustfmt

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/pip install -q --disable-pip-version-check -r tests/requirements.txt
