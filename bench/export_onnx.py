"""Export the benchmark models to ONNX from the very .pt2 archives pt2web runs (same weights):
    .venv/bin/python bench/export_onnx.py [--models resnet18,mobilenet_v3_small,minilm]
Writes .cache/models/NAME.onnx (torch.onnx.export of torch.export.load(NAME.pt2), opset 18),
and checks onnxruntime-free: the ONNX file reloads with `onnx.checker`.
Needs: pip install onnx onnxscript (bench/requirements.txt).
"""
import argparse
import json
from pathlib import Path

import onnx
import torch
import transformers.modeling_outputs  # noqa: F401  (ModelOutput pytree types)
from safetensors.torch import load_file

CACHE = Path(__file__).resolve().parents[1] / ".cache" / "models"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet18,mobilenet_v3_small,minilm")
    a = ap.parse_args()
    for name in a.models.split(","):
        meta = json.loads((CACHE / f"{name}.meta.json").read_text())
        prog = meta["programs"]["model"]
        case = prog["io_cases"][0]
        io = load_file(str(CACHE / case["file"]))
        flat = [io[i["key"]] for i in case["inputs"]]
        ep = torch.export.load(CACHE / meta["archive"])
        args, kwargs = torch.utils._pytree.tree_unflatten(flat, ep.call_spec.in_spec)
        out = CACHE / f"{name}.onnx"
        torch.onnx.export(ep, args, str(out), kwargs=kwargs, input_names=prog["input_names"],
                          opset_version=18, dynamo=True, external_data=False)
        onnx.checker.check_model(str(out))
        print(f"{name}: {out} ({out.stat().st_size / 1e6:.1f} MB), inputs {prog['input_names']}")


if __name__ == "__main__":
    main()
