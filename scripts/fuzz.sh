#!/usr/bin/env bash
# Fuzz every target for SECONDS each: scripts/fuzz.sh SECONDS [TARGETS]. Uses cargo-fuzz
# (installed if missing) with the stable toolchain (RUSTC_BOOTSTRAP enables the sanitizer flags
# cargo-fuzz needs). Targets: load_archive (any bytes as a .pt2), parse_pickle (any bytes as a
# torch.save file), mutate_program (committed fixtures with a mutated model.json, loaded,
# planned and run on the CPU under small limits; its seeds are embedded in the target).
# Seeds: fuzz/corpus/<target>/ (the committed fixtures are copied in as seeds). A unit slower
# than 30 s is a hang, and reported as a crash.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
targets="${2:-load_archive parse_pickle mutate_program}"
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
export RUSTC_BOOTSTRAP=1
mkdir -p fuzz/corpus/load_archive fuzz/corpus/parse_pickle fuzz/corpus/mutate_program
cp -n tests/fixtures/*.pt2 fuzz/corpus/load_archive/ 2>/dev/null || true
cp -n tests/fixtures/pickle/*.pt fuzz/corpus/parse_pickle/ 2>/dev/null || true
for t in $targets; do
  echo "fuzzing $t for ${secs}s"
  # mutate_program reads a few hundred bytes of choices: full-length inputs from the start.
  len="-max_len=1048576"
  [ "$t" = mutate_program ] && len="-max_len=4096 -len_control=0"
  cargo fuzz run "$t" "fuzz/corpus/$t" -- -max_total_time="$secs" -timeout=30 -rss_limit_mb=2048 $len 2>&1 | tail -n 5
done
