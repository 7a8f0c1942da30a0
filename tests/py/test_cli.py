"""The CLI as a newcomer meets it (issue 18 item 6): `pt2web devices` prints no stray lines from
the Vulkan stack, `--adapter N` picks an adapter by its number in `pt2web devices` and names
the range when N is out of it.
"""
import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = os.environ.get("PT2WEB_BIN", str(ROOT / "target" / "release" / "pt2web"))


def pt2web(*args):
    # As on a fresh headless machine: no Wayland session, no switch set by hand.
    env = {k: v for k, v in os.environ.items()
           if k not in ("XDG_RUNTIME_DIR", "WAYLAND_DISPLAY", "NODEVICE_SELECT")}
    return subprocess.run([BIN, *args], capture_output=True, text=True, env=env)


def adapter_count():
    r = pt2web("devices", "--json")
    assert r.returncode == 0, r.stderr

    return len(json.loads(r.stdout)["adapters"])


def test_devices_prints_no_stray_lines():
    r = pt2web("devices")
    assert r.returncode == 0, r.stderr
    assert "XDG_RUNTIME_DIR" not in r.stderr, r.stderr
    assert r.stderr.strip() == "", r.stderr


def test_adapter_out_of_range_is_named():
    n = adapter_count()
    r = pt2web("run", "--device", "gpu", "--adapter", str(n + 3))
    assert r.returncode == 1
    assert f"--adapter {n + 3}" in r.stderr and f"finds {n} adapter" in r.stderr, r.stderr


def test_adapter_zero_runs_the_default_model():
    if adapter_count() == 0:
        if os.environ.get("PT2WEB_REQUIRE_GPU") == "1":
            pytest.fail("no GPU adapter (PT2WEB_REQUIRE_GPU=1)")
        pytest.skip("no GPU adapter")
    r = pt2web("run", "--device", "gpu", "--adapter", "0", "--json")
    assert r.returncode == 0, r.stderr
    assert "XDG_RUNTIME_DIR" not in r.stderr, r.stderr

    assert json.loads(r.stdout)["gpu"]["adapter"]
