#!/usr/bin/env bash
# The streaming load at scale in Chromium (CI runs it with 4 tables): writes a ~1 GB archive (16
# embedding tables of 64 MiB: tests/fixgen/gen_big_archive.py --tables 16, into
# target/big-browser/ unless PT2WEB_BIG_DIR says where), serves it with Range requests, loads it
# in Chromium on WebGPU by streaming, in the page and in a Worker through the archive cache, runs
# it against PyTorch's output and prints the load times, wasm memory and the page's JS memory
# peak, failing when either grew by more than two entries (scripts/big_archive_browser.mjs).
# PT2WEB_JS=/js/OTHER/index.js loads another copy of the package (to compare with an older one;
# its ../pkg/ imports rewritten to ../../pkg/); PT2WEB_LAZY='{"aheadWeights": 1}' sets the lazy
# load's sizes (js/index.js LAZY) for the page loads. Needs pkg/ (scripts/build_wasm.sh).
#   scripts/big_archive_browser.sh [TABLES]
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
out="${PT2WEB_BIG_DIR:-target/big-browser}"
"$PY" tests/fixgen/gen_big_archive.py --tables "${1:-16}" --out "$out"
node scripts/big_archive_browser.mjs "$out"
