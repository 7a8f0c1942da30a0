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

# wasm-bindgen-cli at exactly the version Cargo.lock pins for the wasm-bindgen crate.
wb=$(grep -A1 'name = "wasm-bindgen"' Cargo.lock | sed -n 's/version = "\(.*\)"/\1/p' | head -1)
if [ "$(wasm-bindgen --version 2>/dev/null | awk '{print $2}')" != "$wb" ]; then
  # Not --locked: a dependency version its lockfile pins was yanked from crates.io.
  cargo install wasm-bindgen-cli --version "$wb"
fi

# Browser tests: Debian's chromium (driven by playwright-core from npm, no browser download).
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q chromium
fi
npm ci --no-audit --no-fund
