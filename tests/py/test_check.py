"""`pt2web check` on every committed fixture, judged by what torch recorded (meta.json from
tests/fixgen): the state bytes of the memory estimate equal torch's storage bytes, the peak of
live activations holds at least the example inputs and outputs, and an unreadable --inputs
file is an error.
"""
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
BIN = os.environ.get("PT2WEB_BIN", str(ROOT / "target" / "release" / "pt2web"))

# hostile_alloc's repeat_interleave of tensor counts has a size with no bound before the run:
# its meta pass stops there by design (the run's byte budget is checked by the kernel).
NO_ESTIMATE = {"hostile_alloc"}

SINGLE = sorted(
    p.name[: -len(".meta.json")]
    for p in FIX.glob("*.meta.json")
    if len(json.loads(p.read_text())["programs"]) == 1
    and p.name[: -len(".meta.json")] not in NO_ESTIMATE
)

SIZES = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4,
         "int16": 2, "int8": 1, "uint8": 1, "bool": 1}


def nbytes(entries):
    total = 0
    for e in entries:
        n = 1
        for s in e["shape"]:
            n *= s
        total += n * SIZES[e["dtype"]]
    return total


@pytest.mark.parametrize("name", SINGLE)
def test_check_memory_estimate_matches_torch(name):
    meta = json.loads((FIX / f"{name}.meta.json").read_text())
    (pm,) = meta["programs"].values()
    r = subprocess.run([BIN, "check", str(FIX / meta["archive"]), "--json"],
                       capture_output=True, text=True)
    out = json.loads(r.stdout)
    # The exit status still says whether every op runs on the CPU.
    assert (r.returncode == 0) == (out["unsupported"] == []), r.stderr
    mem = out["memory"]
    assert mem is not None, out["memory_error"]
    state = mem["parameter_bytes"] + mem["buffer_bytes"] + mem["constant_bytes"]
    assert state == pm["state_storage_bytes"]
    # Constants the graph passes derive (folded batch norms) are counted on their own.
    assert mem["total_bytes"] == state + mem["derived_bytes"] + mem["peak_activation_bytes"]
    case = next((c for c in pm.get("io_cases", []) if c["file"] == f"{name}.io.safetensors"), None)
    if case is not None and out["memory_inputs_from"].startswith("the sample inputs"):
        assert mem["input_bytes"] == nbytes(case["inputs"])
        assert mem["peak_activation_bytes"] >= nbytes(case["inputs"])


def test_check_inputs_file_must_exist(tmp_path):
    r = subprocess.run([BIN, "check", str(FIX / "mlp_core.pt2"), "--inputs",
                        str(tmp_path / "missing.safetensors")], capture_output=True, text=True)
    assert r.returncode != 0
    assert "missing.safetensors" in r.stderr


def test_check_inputs_that_break_the_guards_fail(tmp_path):
    torch = pytest.importorskip("torch")
    from safetensors.torch import save_file

    f = tmp_path / "bad.safetensors"
    # dyn_shared's x and y share their first dim (s17); 5 != 6 violates it.
    save_file({"x": torch.zeros(5, 7), "y": torch.zeros(6, 7)}, str(f))
    r = subprocess.run([BIN, "check", str(FIX / "dyn_shared.pt2"), "--inputs", str(f)],
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert "'y'" in r.stderr and "s17" in r.stderr
