#!/usr/bin/env bash
# Install what the tests need on a fresh Debian machine (idempotent):
# Mesa lavapipe (Vulkan on the CPU), Rust targets/components, the Python venv with torch for fixtures and round-trip tests.
set -euo pipefail
cd "$(dirname "$0")/.."

# Mesa's lavapipe: a Vulkan driver on the CPU, so the GPU backend's tests run without a GPU
# (wgpu lists it as `llvmpipe`, backend Vulkan).
if ! ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq mesa-vulkan-drivers
  else
    echo "warning: no apt-get; install Mesa's Vulkan drivers (lavapipe) for the GPU tests" >&2
  fi
fi

rustup target add wasm32-unknown-unknown
rustup component add clippy rustfmt
# The desktop targets scripts/check_desktop.sh type-checks (macOS, Windows): opt-in, since the
# tests do not need them (PT2WEB_DESKTOP_TARGETS=1 bash scripts/setup.sh).
if [ "${PT2WEB_DESKTOP_TARGETS:-0}" = "1" ]; then
  rustup target add aarch64-apple-darwin x86_64-apple-darwin x86_64-pc-windows-msvc
fi
# The multi-threaded WebAssembly build (scripts/build_wasm.sh) rebuilds std with atomics: a
# pinned nightly with its rust-src component.
rustup toolchain install "$(cat scripts/wasm-threads-toolchain)" --profile minimal --component rust-src

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
# The Vite + TypeScript app of tests/apps (vite, typescript; its own lock file). The test
# reinstalls it only when the lock file changed, then adds the packed tarball.
(cd tests/apps/vite && npm ci --no-audit --no-fund)

# Benchmark peers (`scripts/setup.sh --bench`; the tests do not need them): ONNX export and
# ONNX Runtime in .venv (bench/requirements.txt), and ExecuTorch in a venv of its own
# (.cache/venv-et) that reuses .venv's torch through a .pth file, so its dependencies never
# change the test venv (bench/cpu_bench.py runs bench/executorch_bench.py in it).
if [ "${1:-}" = "--bench" ]; then
  .venv/bin/pip install -q --disable-pip-version-check -r bench/requirements.txt
  if [ ! -x .cache/venv-et/bin/python ]; then
    python3 -m venv .cache/venv-et
  fi
  main_sp=$(.venv/bin/python -c 'import site; print(site.getsitepackages()[0])')
  et_sp=$(.cache/venv-et/bin/python -c 'import site; print(site.getsitepackages()[0])')
  echo "$main_sp" > "$et_sp/main-venv.pth"
  .cache/venv-et/bin/pip install -q --disable-pip-version-check executorch
fi
