#!/usr/bin/env python3
"""Files a user names are read only when they are regular files of a sane size (issue 32.13): a FIFO named
config.json, model.safetensors or model.gguf, `--config` on a FIFO, /dev/zero, /dev/urandom, a directory or
/proc/self/mem, and FIFOs given as calibration data, task file, eval text, diagnose data or bench dataset:
each command answers within seconds with exit 2 and one line naming the file and what was expected."""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

BIN = os.environ["MO_BINARY"]
SHARED = Path(os.environ["MO_SHARED_DATA"])
STORIES = SHARED / "models" / "stories260K.gguf"


def refused(args, expect):
    try:
        r = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"hung: {args}")
    errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert r.returncode == 2 and len(errors) == 1 and any(e in errors[0] for e in expect.split("|")), (args, r.returncode, r.stderr[-800:])
    return errors[0]


def main():
    if not STORIES.exists():
        print(f"skipped: {STORIES} not found")
        return 77
    with tempfile.TemporaryDirectory(prefix="mo-input-files-") as t:
        tmp = Path(t)
        fifo = tmp / "fifo"
        os.mkfifo(fifo)
        model_dir = tmp / "model"
        model_dir.mkdir()
        os.mkfifo(model_dir / "config.json")
        gguf = tmp / "model.gguf"
        os.mkfifo(gguf)
        cases = [
            (["inspect", model_dir], "not a regular file"),
            (["generate", gguf], "is a FIFO; expected a regular file"),
            (["budget", "--config", fifo], "is a FIFO; expected a regular file"),
            (["budget", "--config", "/dev/zero"], "is a device; expected a regular file"),
            (["budget", "--config", "/dev/urandom"], "is a device; expected a regular file"),
            (["budget", "--config", tmp], "is a directory; expected a regular file"),
            (["budget", "--config", "/proc/self/mem"], "config file cannot be read"),
            (["eval", STORIES, "--text", "none", "--no-latency", "--tasks", fifo], "is a FIFO"),
            (["eval", STORIES, "--text", fifo, "--no-latency"], "is a FIFO"),
            (["quantize", "--model_path", STORIES, "--quant_method", "rtn", "--no-eval", "--calibration_data", fifo,
              "--output_path", tmp / "q"], "is a FIFO|not a regular file (a FIFO"),
            (["diagnose", "--original", STORIES, "--quantized", STORIES, "--data", fifo], "is a FIFO|not a regular file (a FIFO"),
            (["bench", "--base-url", "http://127.0.0.1:9/v1", "--dataset", fifo, "--num-prompts", "1"], "is a FIFO"),
        ]
        for args, expect in cases:
            line = refused(args, expect)
            print(f"  {args[0]} {' '.join(str(a) for a in args[1:])[:60]}: {line[:110]}")
        assert not (tmp / "q").exists()
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
