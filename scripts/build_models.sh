#!/usr/bin/env bash
# Build the real-model test archives (resnet18, mobilenet_v3_small, vit_b_16, MiniLM with
# real weights, small GPT-2) into the git-ignored cache .cache/models/ with torch 2.15.
#   scripts/build_models.sh [--only resnet18,minilm] [--force] [--no-verify]
# Already-built models are skipped unless --force. Needs .venv (scripts/setup.sh).
# Takes about 2 minutes on 2 CPU cores (vit_b_16 ~45 s); about 1 GB of disk. Then the tiny LMs,
# the OpInfo samples and the model corpus (each rebuilt when its generator changes).
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
if [ ! -x "$PY" ]; then
  echo "no $PY: run scripts/setup.sh first (or set PYTHON=...)" >&2
  exit 1
fi
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
"$PY" tests/fixgen/gen_models.py "$@"
# The demo page's expected sentence similarities (a few seconds).
[ -f .cache/models/minilm.similarity.json ] || "$PY" tests/fixgen/gen_similarity.py
# Tiny Llama- and GPT-2-style models with a static KV cache and PyTorch's greedy tokens
# (`generate` tests; about 40 s).
[ -f .cache/models/gpt2_static.generate.json ] || "$PY" tests/fixgen/gen_lm.py
# PyTorch's OpInfo samples (op_db) exported as op cases, with torch's results (tests/opinfo.rs):
# float32, 3 samples per entry (about 3 minutes on 2 CPU cores, 20 MB), and the other dtypes
# each entry supports, 1 sample per entry and dtype (about 7 minutes, 35 MB). Rebuilt when
# the generator changes.
OPINFO_SHA=$(sha256sum tests/fixgen/gen_opinfo.py | cut -d' ' -f1)
for set in "opinfo float32 3" "opinfo-dtypes other 1"; do
  read -r dir dtypes samples <<< "$set"
  if [ ! -f ".cache/$dir/summary.json" ] || [ "$(cat ".cache/$dir/generator.sha256" 2>/dev/null)" != "$OPINFO_SHA" ]; then
    "$PY" tests/fixgen/gen_opinfo.py --dtypes "$dtypes" --samples "$samples" --out ".cache/$dir"
    echo "$OPINFO_SHA" > ".cache/$dir/generator.sha256"
  fi
done
# The model corpus: a few dozen model classes from torchvision, timm, transformers and
# diffusers with random weights and small configurations, in both IRs, with eager PyTorch's
# outputs (tests/corpus.rs; about 2 minutes on 2 cores, 115 MB). Rebuilt when the
# generator or tests/requirements.txt changes.
CORPUS_STAMP=".cache/corpus/generator.sha256"
# (The pinned library versions are part of the stamp: a new timm or diffusers rebuilds it.)
CORPUS_SHA=$(cat tests/fixgen/gen_corpus.py tests/requirements.txt | sha256sum | cut -d' ' -f1)
if [ ! -f .cache/corpus/corpus.json ] || [ "$(cat "$CORPUS_STAMP" 2>/dev/null)" != "$CORPUS_SHA" ]; then
  "$PY" tests/fixgen/gen_corpus.py
  echo "$CORPUS_SHA" > "$CORPUS_STAMP"
fi
