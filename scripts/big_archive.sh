#!/usr/bin/env bash
# The streaming-load test at scale (tests/big_archive.rs): writes a ~2.7 GB archive into the
# git-ignored .cache/big/ (tests/fixgen/gen_big_archive.py, ~30 s, skipped when up to date),
# then loads it from its file on the CPU and on the GPU (lavapipe here), each in its own
# process, and prints the host peak (VmHWM) against the archive size.
#   scripts/big_archive.sh        (PT2WEB_REQUIRE_GPU=1 makes a missing adapter fail)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
"$PY" tests/fixgen/gen_big_archive.py
# --workspace: the features `cargo test --workspace` (scripts/test.sh) built with, so no rebuild.
cargo test --workspace --release --test big_archive -- --ignored --exact big_archive_loads_without_a_second_copy --nocapture
