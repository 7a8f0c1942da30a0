#!/usr/bin/env bash
# The soak of issue 17: mixed good and bad calls in Node, WebGPU runs of GPT-2 with random
# shapes in Chromium; prints the JS heap, wasm and GPU memory deltas after the warm-up.
# Full counts by default (10,000 calls, 1,000 runs: minutes); CI runs a small count:
# PT2WEB_SOAK_CALLS / PT2WEB_SOAK_RUNS override them (0 skips a part). Needs pkg/.
set -euo pipefail
cd "$(dirname "$0")/.."
exec node --expose-gc scripts/soak.mjs --calls "${PT2WEB_SOAK_CALLS:-10000}" --runs "${PT2WEB_SOAK_RUNS:-1000}"
