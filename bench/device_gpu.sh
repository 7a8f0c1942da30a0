#!/usr/bin/env bash
# pt2web on a lent NVIDIA GPU (wgpu over Vulkan) against PyTorch CUDA eager, in one command
# (issue 13). The machine has no network: everything it needs travels with the working tree.
#
# Here, once (the device tool's README has the recipe):
#   cargo build --release -p pt2web-native            # the binary travels (x86-64)
#   echo /.gl/ >> .git/info/exclude; mkdir -p .gl /tmp/amd64/partial
#   o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
#   apt-get $o update; (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
# Then through the device tool: run with carry [".gl", "target/release/pt2web"] and
#   bash bench/device_gpu.sh
# It prints the adapter, then per model pt2web's warm / first run, dispatches and host time,
# PyTorch's time on the same GPU and the ratio, and leaves $OUT/device_gpu.json (or
# /tmp/pt2web_device/device_gpu.json). Models: resnet18 b1 and b32, MiniLM seq 128, GPT-2
# small seq 128, random weights, exported there with torch.export (torchvision and
# transformers are installed on that machine). Override with MODELS=... REPEAT=...
# Then (LLM=0 skips it) bench/llm_bench.py on the GPU: the Llama-style decode benchmark of
# issue 15 (prefill / decode tok/s, readback, GPU memory) for f32, int8, int4 and f16 weights.
#
# A dry run anywhere: PYTHON=.venv/bin/python TORCH_DEVICE=cpu MODELS=resnet18_b1 REPEAT=3 bash bench/device_gpu.sh
#
# `bash bench/device_gpu.sh --interop`: only the CUDA interop check of issue 20. It runs the
# example native-host/examples/cuda_interop.rs (a CUDA buffer through mlp_core on the Vulkan
# device and back to CUDA, no host copy, compared with the CPU backend), built here with
#   cargo build --release -p pt2web-native --features cuda --example cuda_interop
# and carried as target/release/examples/cuda_interop (override with INTEROP=path), with
# tests/fixtures/mlp_core.pt2 (tracked: it travels). With INTEROP_TEST=path it also runs the
# interop test binary there (PT2WEB_REQUIRE_GPU=1, so its CUDA round trip runs or fails), built
# here with `cargo test --release --features cuda --test interop --no-run` (the path it
# prints; copy it into a carried folder). The Vulkan loader comes from .gl as below. It skips,
# with a message and exit status 0, where the example was not built or CUDA is absent (no
# libcuda or no nvidia-smi), so that it can stay in a device script.
set -euo pipefail
cd "$(dirname "$0")/.."

vulkan_loader() {
    if [ -d .gl ] && ! ldconfig -p 2>/dev/null | grep -q libvulkan.so.1; then
        for f in .gl/*.deb; do dpkg -x "$f" /; done
        ldconfig
    fi
    if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] && [ -z "${VK_DRIVER_FILES:-}" ]; then
        export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
        export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
    fi
}

if [ "${1:-}" = "--interop" ]; then
    INTEROP=${INTEROP:-target/release/examples/cuda_interop}
    if [ ! -x "$INTEROP" ]; then
        echo "interop: skipped: no $INTEROP (build it here first, see this script's header, and carry it)"
        exit 0
    fi
    has_libcuda() {
        ldconfig -p 2>/dev/null | grep -q 'libcuda\.so' ||
            ls /usr/local/nvidia/lib64/libcuda.so* /usr/lib/x86_64-linux-gnu/libcuda.so* >/dev/null 2>&1
    }
    if ! has_libcuda || ! command -v nvidia-smi >/dev/null; then
        echo "interop: skipped: no CUDA driver here (no libcuda.so, or no nvidia-smi)"
        exit 0
    fi
    vulkan_loader
    OUTDIR=${OUT:-/tmp/pt2web_device}
    mkdir -p "$OUTDIR"
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    status=0
    "$INTEROP" tests/fixtures/mlp_core.pt2 2>&1 | tee "$OUTDIR/cuda_interop.log" || status=1
    if [ -n "${INTEROP_TEST:-}" ]; then
        PT2WEB_REQUIRE_GPU=1 "$INTEROP_TEST" --test-threads 1 --nocapture 2>&1 |
            tee "$OUTDIR/interop_test.log" || status=1
    fi
    exit "$status"
fi

vulkan_loader

PT2WEB=${PT2WEB:-target/release/pt2web}
if [ ! -x "$PT2WEB" ]; then
    echo "no $PT2WEB: build it here first (cargo build --release -p pt2web-native) and carry it" >&2
    exit 2
fi
OUTDIR=${OUT:-/tmp/pt2web_device}
mkdir -p "$OUTDIR"

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
"$PT2WEB" devices
export PYTHONUNBUFFERED=1
"${PYTHON:-python3}" bench/device_gpu.py --pt2web "$PT2WEB" \
    --models "${MODELS:-resnet18_b1,resnet18_b32,minilm_s128,gpt2_s128}" \
    --repeat "${REPEAT:-20}" --out "$OUTDIR" \
    ${TORCH_DEVICE:+--torch-device "$TORCH_DEVICE"} \
    ${BACKEND+--backend "$BACKEND"} 2>&1 | tee "$OUTDIR/device_gpu.log"
if [ "${LLM:-1}" = "1" ]; then
    PT2WEB_BIN="$PT2WEB" "${PYTHON:-python3}" bench/llm_bench.py --device gpu --runs 1 \
        --weights f32,int8,int4,f16 2>&1 | tee "$OUTDIR/llm_bench.log"
fi
