#!/usr/bin/env bash
# Type-check the core and the native host for the desktop targets this machine cannot run
# (issue 20): macOS on Apple silicon (wgpu's Metal backend, NEON kernels) and Windows (DX12),
# with clippy -D warnings, so cfg'd code for those platforms keeps compiling. Installs the
# targets when missing (rustup; no C toolchain or SDK is needed for clippy: nothing is linked).
# Part of scripts/test.sh (PT2WEB_DESKTOP_CHECK=0 skips it there).
# Windows twice: the default build, and with the `cuda` feature (its cfg'd CUDA and DLPack code,
# and the cuda_interop example); Linux with the `cuda` feature (src/gpu/external.rs and
# tests/interop.rs, which the default build leaves out). macOS has no CUDA, and Intel macOS
# adds no cfg that the other targets leave unchecked (x86 kernels: Linux and Windows; Metal:
# Apple silicon), so CI leaves both out: TARGETS="... x86_64-apple-darwin" and
# PT2WEB_DESKTOP_CUDA_ALL=1 add them.
# Their builds go to a target dir outside the checkout, kept between runs as CI caches keep
# them: PT2WEB_DESKTOP_TARGET_DIR, by default ~/.cache/pt2web/desktop-target. Cold, the
# targets' dependencies take about 12 min on 2 cores; after a change to pt2web alone, 2 min.
set -euo pipefail
cd "$(dirname "$0")/.."

targets=${TARGETS:-"aarch64-apple-darwin x86_64-pc-windows-msvc x86_64-unknown-linux-gnu"}
installed=$(rustup target list --installed)
for t in $targets; do
  if ! grep -qx "$t" <<<"$installed"; then
    rustup target add "$t"
  fi
done

export CARGO_TARGET_DIR="${PT2WEB_DESKTOP_TARGET_DIR:-$HOME/.cache/pt2web/desktop-target}"
mkdir -p "$CARGO_TARGET_DIR"

t0=$(date +%s)
for t in $targets; do
  s=$(date +%s)
  printf '\n== cargo clippy --target %s\n' "$t"
  if [ "$t" = x86_64-unknown-linux-gnu ]; then
    cargo clippy -p pt2web -p pt2web-native --lib --bins --examples --tests --features pt2web-native/cuda --target "$t" -- -D warnings
  else
    cargo clippy -p pt2web -p pt2web-native --target "$t" -- -D warnings
    if [[ "$t" != *-apple-darwin || "${PT2WEB_DESKTOP_CUDA_ALL:-0}" = 1 ]]; then
      cargo clippy -p pt2web -p pt2web-native --lib --bins --examples --features pt2web-native/cuda --target "$t" -- -D warnings
    fi
  fi
  printf '== %s: %ss\n' "$t" "$(( $(date +%s) - s ))"
done
printf '\ndesktop targets checked in %ss\n' "$(( $(date +%s) - t0 ))"
