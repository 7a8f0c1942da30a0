#!/usr/bin/env bash
# Fuzz the loader: scripts/fuzz.sh SECONDS [TARGET]. Uses cargo-fuzz (installed if missing)
# with the stable toolchain (RUSTC_BOOTSTRAP enables the sanitizer flags cargo-fuzz needs).
# Seeds: fuzz/corpus/<target>/ (the committed fixtures are copied in as seeds).
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
targets="${2:-load_archive parse_pickle}"
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
export RUSTC_BOOTSTRAP=1
mkdir -p fuzz/corpus/load_archive fuzz/corpus/parse_pickle
cp -n tests/fixtures/*.pt2 fuzz/corpus/load_archive/ 2>/dev/null || true
cp -n tests/fixtures/pickle/*.pt fuzz/corpus/parse_pickle/ 2>/dev/null || true
for t in $targets; do
  echo "fuzzing $t for ${secs}s"
  cargo fuzz run "$t" "fuzz/corpus/$t" -- -max_total_time="$secs" -rss_limit_mb=2048 -max_len=1048576 2>&1 | tail -n 5
done
