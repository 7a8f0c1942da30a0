#!/usr/bin/env bash
# Type-check the core and the native host for the desktop targets this machine cannot run
# (issue 20): macOS on Apple silicon and Intel (wgpu's Metal backend) and Windows (DX12), with
# clippy -D warnings, so cfg'd code for those platforms keeps compiling. Installs the targets
# when missing (rustup; no C toolchain or SDK is needed for clippy: nothing is linked).
# Not part of scripts/test.sh (CI's time budget); run it by hand or in a CI job of its own.
# Each target twice: the default build, and with the `cuda` feature (its cfg'd CUDA and DLPack
# code, and the cuda_interop example). TARGETS="x86_64-pc-windows-msvc" limits it to some.
set -euo pipefail
cd "$(dirname "$0")/.."

targets=${TARGETS:-"aarch64-apple-darwin x86_64-apple-darwin x86_64-pc-windows-msvc"}
installed=$(rustup target list --installed)
for t in $targets; do
  if ! grep -qx "$t" <<<"$installed"; then
    rustup target add "$t"
  fi
done

t0=$(date +%s)
for t in $targets; do
  s=$(date +%s)
  printf '\n== cargo clippy --target %s\n' "$t"
  cargo clippy -p pt2web -p pt2web-native --target "$t" -- -D warnings
  cargo clippy -p pt2web -p pt2web-native --all-targets --features pt2web-native/cuda --target "$t" -- -D warnings
  printf '== %s: %ss\n' "$t" "$(( $(date +%s) - s ))"
done
printf '\ndesktop targets checked in %ss\n' "$(( $(date +%s) - t0 ))"
