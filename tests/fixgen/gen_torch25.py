#!/usr/bin/env python
"""Fixtures written by torch 2.5 (the legacy, pre-"pt2 archive" layout of torch.export.save).

    .venv25/bin/python tests/fixgen/gen_torch25.py

torch 2.5's torch.export.save writes a zip with no top folder:
    serialized_exported_program.json   the ExportedProgram (schema 7.x)
    serialized_state_dict.pt           torch.save'd dict FQN -> tensor (a pickle in its own zip)
    serialized_constants.pt            torch.save'd dict of constants
    serialized_example_inputs.pt       torch.save'd example inputs
    version                            e.g. "7.3"
    extra_files/NAME                   extra files
Meta uses the same format as gen_fixtures.py with "layout": "legacy-2.5".
"""

from __future__ import annotations

import copy
import os
import shutil
import sys
import tempfile
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.export import Dim, export  # noqa: E402

import common  # noqa: E402
from common import Case  # noqa: E402

warnings.filterwarnings("ignore")


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 8)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 8))

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x))) * self.scale


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 4 * 4, 5)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return self.fc(torch.flatten(x, 1))


def build(name):
    torch.manual_seed(25)
    if name == "torch25_mlp":
        m = MLP().eval()
        x = torch.randn(4, 16)
        ep = export(copy.deepcopy(m), (x,), dynamic_shapes={"x": {0: Dim("batch", min=1, max=64)}})
        cases = [Case((x,), label="example"), Case((torch.randn(1, 16),), label="b1"),
                 Case((torch.randn(9, 16),), label="b9")]
        return (m, ep, "aten", cases, {"note.txt": "written by torch 2.5\n"},
                "torch 2.5 legacy layout: MLP (linear/relu) with a buffer, dynamic batch Dim('batch', 1, 64), "
                "export() ATen dialect, extra file")
    if name == "torch25_convnet_core":
        m = ConvNet().eval()
        x = torch.randn(2, 3, 8, 8)
        ep = export(copy.deepcopy(m), (x,)).run_decompositions()
        return (m, ep, "core_aten", [Case((x,), label="example")], None,
                "torch 2.5 legacy layout: conv2d + batchnorm (eval) + maxpool + linear, core ATen, "
                "int64 num_batches_tracked buffer")
    raise KeyError(name)


NAMES = ["torch25_mlp", "torch25_convnet_core"]


def main() -> int:
    out = common.FIXTURES
    os.makedirs(out, exist_ok=True)
    failures = 0
    for name in NAMES:
        t0 = time.time()
        m, ep, ir, cases, extra_files, covers = build(name)
        pm, state = common.program_meta(ep, ir)
        for c in cases:
            common.run_eager(m, c)
        final = os.path.join(out, f"{name}.pt2")
        with tempfile.TemporaryDirectory() as td:
            tmp = os.path.join(td, f"{name}.pt2")
            torch.export.save(ep, tmp, extra_files=extra_files)
            if not (os.path.exists(final) and common.same_archive_content(tmp, final)):
                shutil.copyfile(tmp, final)
        cases_meta = []
        for i, c in enumerate(cases):
            fname = f"{name}.io.safetensors" if i == 0 else f"{name}.io.{c.label}.safetensors"
            cases_meta.append(common.write_io(os.path.join(out, fname), c))
        common.remove_other_cases(out, name, [c["file"] for c in cases_meta])
        state_file = f"{name}.state.safetensors"
        common.save_safetensors(common.state_tensors(state), os.path.join(out, state_file))
        pm.update({"io": cases_meta[0]["file"], "input_names": [u["name"] for u in pm["user_inputs"]],
                   "io_cases": cases_meta, "state": state_file})
        entries = common.archive_entries(final)
        extra = {k: {"sha256": common.sha256_bytes(v.encode()), "nbytes": len(v.encode()), "content": v}
                 for k, v in (extra_files or {}).items()}
        from torch._export.serde.schema import SCHEMA_VERSION

        meta = {
            "name": name,
            "meta_format": common.META_FORMAT_VERSION,
            "covers": covers,
            "torch_version": torch.__version__,
            "layout": "legacy-2.5",
            "archive": os.path.basename(final),
            "archive_prefix": "",
            "archive_entries": entries,
            "schema_version": list(SCHEMA_VERSION),
            "extra_files": extra,
            "programs": {"model": pm},
        }
        common.dump_json(meta, os.path.join(out, f"{name}.meta.json"))

        # verify: load back with torch 2.5 and reproduce eager outputs
        try:
            for c in cases:
                ex = {k: "" for k in (extra_files or {})}
                loaded = torch.export.load(final, extra_files=ex)
                if ex != (extra_files or {}):
                    raise AssertionError("extra files differ")
                with torch.no_grad():
                    got = loaded.module()(*common.clone_tree(c.args))
                common.compare_outputs(c.outputs, common.flatten(got), f"{name}/{c.label}")
            print(f"  {name:24s} ok  {time.time() - t0:5.1f}s  {covers[:70]}")
        except Exception as e:
            failures += 1
            print(f"  {name:24s} FAILED: {e!r}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
