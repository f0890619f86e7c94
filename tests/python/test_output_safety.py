#!/usr/bin/env python3
"""Nothing the user has is replaced (issue 32.1-3), checked through the binary on stories260K:

- a directory that appears at quantize's output path while it runs survives; the run exits 1 and keeps its
  finished output beside it under the name the error gives, and that output loads;
- of two quantize runs to one path, one wins and the other fails cleanly, its output kept or never started;
- an existing output is refused (exit 2, suggesting --force); --force replaces an earlier output of ours and
  never a file of the user's;
- eval's and diagnose's reports, and bench's results, follow the same rule.
"""
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = os.environ["MO_BINARY"]
SHARED = Path(os.environ["MO_SHARED_DATA"])
STORIES = SHARED / "models" / "stories260K.gguf"


def run(*args, cwd=None):
    return subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, cwd=cwd)


def kept_path(stderr):
    m = re.search(r"this run's output is at '([^']+)'", stderr)
    assert m, stderr
    return Path(m.group(1))


def check_output_that_appears_meanwhile(tmp):
    out = tmp / "out"
    for samples in (32, 128, 512):  # a longer run when this machine finished before the directory was made
        proc = subprocess.Popen([BIN, "quantize", "--model_path", STORIES, "--quant_method", "gptq", "--num_samples", str(samples),
                                 "--max_seq_len", "256", "--no-eval", "--threads", "2", "--output_path", out],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        temp = tmp / f"out.tmp-{proc.pid}"
        while proc.poll() is None and not temp.exists():
            time.sleep(0.005)
        made = proc.poll() is None
        if made:
            out.mkdir()
            (out / "thesis.txt").write_text("irreplaceable")
        _, err = proc.communicate(timeout=600)
        if made:
            break
        subprocess.run(["rm", "-rf", str(out)], check=True)
    assert made, "every run finished before the test could create the directory"
    assert proc.returncode == 1, (proc.returncode, err)
    assert f"output_path: '{out}' appeared while this run was writing" in err, err
    assert (out / "thesis.txt").read_text() == "irreplaceable"
    kept = kept_path(err)
    assert kept == tmp / f"out-{proc.pid}", kept
    shown = run("inspect", kept)
    assert shown.returncode == 0 and "loads:         yes" in shown.stdout, shown.stdout + shown.stderr
    print(f"  a directory made during the run survived; the output was kept at {kept.name} and loads")


def check_two_runs_to_one_path(tmp):
    out = tmp / "both.gguf"
    args = ["quantize", "--model_path", STORIES, "--quant_method", "gguf", "--gguf_type", "q8_0", "--no-eval", "--output_path", out]
    procs = [subprocess.Popen([BIN, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = [(p.pid, *p.communicate(timeout=300), p.returncode) for p in procs]
    codes = sorted(r[3] for r in results)
    assert codes[0] == 0 and codes[1] in (1, 2), results
    loser = next(r for r in results if r[3] != 0)
    if loser[3] == 1:  # both ran: the later commit found the earlier output and kept its own beside it
        assert kept_path(loser[2]).exists(), loser
    else:  # the later one started after the first had finished
        assert "already exists" in loser[2], loser
    assert run("inspect", out).returncode == 0
    print(f"  two runs to one path: exit codes {codes}; the loser's output was kept or it never started")


def check_force(tmp):
    out = tmp / "q.gguf"
    base = ["quantize", "--model_path", STORIES, "--quant_method", "gguf", "--no-eval", "--imatrix", "none", "--output_path", out]
    assert run(*base, "--gguf_type", "q8_0").returncode == 0
    again = run(*base, "--gguf_type", "q4_0")
    assert again.returncode == 2 and "already exists" in again.stderr and "--force" in again.stderr, again.stderr
    forced = run(*base, "--gguf_type", "q4_0", "--force")
    assert forced.returncode == 0, forced.stderr
    assert "q4_0" in run("inspect", out).stdout
    user = tmp / "user.gguf"
    user.write_bytes(b"GGUF not ours")
    refused = run("quantize", "--model_path", STORIES, "--quant_method", "gguf", "--no-eval", "--output_path", user, "--force")
    assert refused.returncode == 2 and "was not written by model-optimizer" in refused.stderr, refused.stderr
    assert user.read_bytes() == b"GGUF not ours"
    # convert takes the same flag.
    hf = tmp / "hf"
    assert run("convert", STORIES, hf).returncode == 0
    assert run("convert", STORIES, hf).returncode == 2
    assert run("convert", STORIES, hf, "--force").returncode == 0
    print("  existing outputs: refused without --force, replaced with it when ours, never a user's file")


def check_reports(tmp):
    user_dir = tmp / "results"
    user_dir.mkdir()
    (user_dir / "report.md").write_text("my own report")
    for extra in ([], ["--force"]):
        r = run("eval", STORIES, "--text", "none", "--tasks", "copa", "--limit", "5", "--no-latency", "--output_path", user_dir, *extra)
        assert r.returncode == 2 and "report.md" in r.stderr, r.stderr
    assert (user_dir / "report.md").read_text() == "my own report"
    fresh = tmp / "eval-out"
    eval_args = ["eval", STORIES, "--text", "none", "--tasks", "copa", "--limit", "5", "--no-latency", "--output_path", fresh]
    assert run(*eval_args).returncode == 0
    assert run(*eval_args).returncode == 2
    assert run(*eval_args, "--force").returncode == 0
    diag = tmp / "diag"
    diag.mkdir()
    (diag / "diagnose.svg").write_text("<svg>mine</svg>")
    d = run("diagnose", "--original", STORIES, "--quantized", STORIES, "--num-samples", "2", "--max-seq-len", "32", "--output_path", diag,
            "--force")
    assert d.returncode == 2 and "diagnose.svg" in d.stderr and "was not written by model-optimizer" in d.stderr, d.stderr
    assert (diag / "diagnose.svg").read_text() == "<svg>mine</svg>"
    for name in ("notes.txt", "pipe"):
        target = tmp / name
        if name == "pipe":
            os.mkfifo(target)
        else:
            target.write_text("my notes")
        for extra in ([], ["--force"]):
            b = run("bench", "--base-url", "http://127.0.0.1:9/v1", "--num-prompts", "1", "--out", target, *extra)
            assert b.returncode == 2 and "out: '" in b.stderr, b.stderr
    assert (tmp / "notes.txt").read_text() == "my notes"
    print("  eval, diagnose and bench refuse a user's report or results file, --force or not; eval replaces its own with --force")


def main():
    if not STORIES.exists():
        print(f"skipped: {STORIES} not found")
        return 77
    with tempfile.TemporaryDirectory(prefix="mo-output-safety-") as t:
        tmp = Path(t)
        check_output_that_appears_meanwhile(tmp)
        check_two_runs_to_one_path(tmp)
        check_force(tmp)
        check_reports(tmp)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
