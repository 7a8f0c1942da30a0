"""Export more model families for pt2web dispatch-count benchmarks (random weights, batch 1):
    .venv/bin/python bench/export_zoo.py [--models efficientnet_b0,resnet18_f16,swin_t,unet2d] [--out .cache/bench] [--force]
Writes OUT/NAME.pt2 (training IR: torch.export.export, strict=False) and OUT/NAME.core.pt2
(core ATen: ep.run_decompositions()) with torch.export.save, which also stores the example
inputs in the archive (data/sample_inputs/), so `pt2web bench OUT/NAME.pt2` needs no --inputs:
    PT2WEB_PASSES=none target/release/pt2web bench OUT/NAME.pt2 --device gpu --repeat 3 --warmup 1
Models:
  efficientnet_b0  torchvision efficientnet_b0(weights=None), x [1,3,224,224]
  resnet18_f16     torchvision resnet18(weights=None).half(), x [1,3,224,224] f16
  swin_t           torchvision swin_t(weights=None), x [1,3,224,224]
  unet2d           small diffusers UNet2DConditionModel (sample_size 32, block_out_channels (32,64),
                   1 layer per block, cross-attention dim 32, head dim 8), sample [1,4,32,32],
                   timestep [1] (f32), encoder_hidden_states [1,8,32]; returns the sample tensor
Needs: torch, torchvision; unet2d also pip install diffusers. An archive already in OUT is
skipped unless --force. Nothing is compared with eager PyTorch here (see tests/fixgen for that).
"""
import argparse
import os
import time
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

import torch  # noqa: E402

warnings.filterwarnings("ignore")

OUT = Path(__file__).resolve().parents[1] / ".cache" / "bench"


def _vision(name):
    """torchvision model NAME with fresh seeded weights; BatchNorm gets running statistics from a
    few train-mode passes (as tests/fixgen/gen_models.py does), so activations do not vanish."""
    import torchvision

    torch.manual_seed(0)
    m = getattr(torchvision.models, name)(weights=None)
    with torch.no_grad():
        if any(isinstance(mod, torch.nn.BatchNorm2d) for mod in m.modules()):
            m.train()
            for _ in range(2):
                m(torch.randn(4, 3, 224, 224))
    return m.eval(), (torch.randn(1, 3, 224, 224),), {}


class UNetSample(torch.nn.Module):
    """UNet2DConditionModel returning the bare sample tensor (no output dataclass)."""

    def __init__(self, unet):
        super().__init__()
        self.unet = unet

    def forward(self, sample, timestep, encoder_hidden_states):
        return self.unet(sample, timestep, encoder_hidden_states, return_dict=False)[0]


def build_unet2d():
    from diffusers import UNet2DConditionModel

    torch.manual_seed(0)
    unet = UNet2DConditionModel(
        sample_size=32, in_channels=4, out_channels=4, block_out_channels=(32, 64), layers_per_block=1,
        cross_attention_dim=32, attention_head_dim=8,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"))
    args = (torch.randn(1, 4, 32, 32), torch.tensor([10.0]), torch.randn(1, 8, 32))
    return UNetSample(unet).eval(), args, {}


def build_resnet18_f16():
    """resnet18 in half precision (weights and input f16), as `model.half()` exports it."""
    m, (x,), kw = _vision("resnet18")
    return m.half(), (x.half(),), kw


MODELS = {
    "efficientnet_b0": lambda: _vision("efficientnet_b0"),
    "resnet18_f16": build_resnet18_f16,
    "swin_t": lambda: _vision("swin_t"),
    "unet2d": build_unet2d,
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"torch {torch.__version__}, out {out}", flush=True)
    for name in a.models.split(","):
        paths = [out / f"{name}.pt2", out / f"{name}.core.pt2"]
        if all(p.exists() for p in paths) and not a.force:
            print(f"{name}: already exported (--force to redo)")
            continue
        t0 = time.time()
        mod, args, kwargs = MODELS[name]()
        ep = torch.export.export(mod, args, kwargs, strict=False)
        t1 = time.time()
        torch.export.save(ep, paths[0])
        core = ep.run_decompositions()
        torch.export.save(core, paths[1])
        for p, e in zip(paths, (ep, core)):
            nodes = sum(1 for n in e.graph.nodes if n.op == "call_function")
            print(f"{name}: {p} ({p.stat().st_size / 1e6:.1f} MB, {nodes} call nodes)", flush=True)
        print(f"{name}: export {t1 - t0:.1f}s, decompose + save {time.time() - t1:.1f}s", flush=True)


if __name__ == "__main__":
    main()
