#!/usr/bin/env python3
"""The CUDA backend is a plugin (libmo_cuda.so) loaded only when a GPU run needs it.

- A CPU run never maps the CUDA libraries (cuBLAS alone is ~60 MB of resident relocations): `--version`
  and a CPU `generate` load no libcudart/libcublas, whether or not the binary was built with CUDA,
  when the machine has no NVIDIA device.
- `--device cuda` on such a machine loads the plugin (every symbol resolved: dlopen RTLD_NOW) and
  refuses in one line that says no GPU is visible, exit 2; a CPU build says it was built without CUDA.
- With an NVIDIA device, `--device cuda` loads the plugin and generates the CPU's greedy text.
"""
import os
import re
import subprocess
import sys
from pathlib import Path

BIN = os.environ["MO_BINARY"]
STORIES = Path(os.environ["MO_SHARED_DATA"]) / "models" / "stories260K.gguf"


def run(*args):
    env = dict(os.environ, LD_DEBUG="libs")  # the dynamic loader lists every library it opens (dlopen too)
    return subprocess.run([BIN, *args], capture_output=True, text=True, env=env)


def loaded(r, name):
    return any(name in line and "calling init" in line for line in r.stderr.splitlines())


def nvidia_device_present():
    dev = Path("/dev")
    return (dev / "nvidiactl").exists() or (dev / "dxg").exists() or any(
        p.name[6:].isdigit() and p.name.startswith("nvidia") and len(p.name) > 6 for p in dev.iterdir())


def main():
    if not STORIES.exists():  # the shared data is absent: skipped (77), as docs/building.md says
        print(f"skipped: {STORIES} not found")
        return 77
    v = run("--version")
    assert v.returncode == 0, v.stderr[-2000:]
    built = not re.search(r"^cuda:\s+off\b", v.stdout, re.M)  # "cuda:       off (CPU build)"
    if nvidia_device_present():
        # With a GPU the plugin must load and give the CPU's greedy text (a CPU build refuses by name).
        cpu = run("generate", str(STORIES), "--max_tokens", "8", "--device", "cpu")
        gpu = run("generate", str(STORIES), "--max_tokens", "8", "--device", "cuda")
        assert cpu.returncode == 0, cpu.stderr[-2000:]
        if not built:
            assert gpu.returncode == 2 and "built without CUDA" in gpu.stderr, gpu.stderr[-2000:]
            print("ok: CPU build on a GPU machine refuses --device cuda by name")
            return 0
        assert gpu.returncode == 0 and loaded(gpu, "libmo_cuda"), gpu.stderr[-2000:]
        assert gpu.stdout == cpu.stdout, (gpu.stdout, cpu.stdout)
        print("ok: CUDA build on a GPU: --device cuda loads the plugin and gives the CPU's greedy text:", gpu.stdout[:60])
        return 0
    for lib in ("libcudart", "libcublas", "libmo_cuda"):
        assert not loaded(v, lib), f"--version loaded {lib}"
    g = run("generate", str(STORIES), "--max_tokens", "4", "--device", "cpu")
    assert g.returncode == 0, g.stderr[-2000:]
    for lib in ("libcudart", "libcublas", "libmo_cuda"):
        assert not loaded(g, lib), f"a CPU generate loaded {lib}"

    c = run("generate", str(STORIES), "--max_tokens", "4", "--device", "cuda")
    assert c.returncode == 2, (c.returncode, c.stderr[-2000:])
    errors = [line for line in c.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, c.stderr[-2000:]
    if built:
        assert "no CUDA GPU is visible" in errors[0], errors[0]
        assert loaded(c, "libmo_cuda"), "--device cuda did not load the plugin"
    else:
        assert "built without CUDA" in errors[0], errors[0]
    print("ok:", "CUDA build" if built else "CPU build", "|", v.stdout.strip().splitlines()[0], "|", errors[0])


if __name__ == "__main__":
    sys.exit(main())
