#!/usr/bin/env python3
"""What a hostile model file could carry: chat templates that nest, loop or grow without bound, and
hyperparameters out of range. `generate` and `serve` end with a clear error, never a crash (SIGSEGV from
deep nesting, SIGFPE from a context length cast to int), a hang or a silent ChatML fallback. stories260K
is copied with a new `tokenizer.chat_template` (gguf-py's gguf_new_metadata) or a changed key
(gguf_set_metadata). `inspect` says when a model would be refused (missing or mis-shaped tensors, an unusable
template) and exits 1."""
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from serve_process import serving

BIN = os.environ["MO_BINARY"]
STORIES = Path(os.environ["MO_SHARED_DATA"]) / "models" / "stories260K.gguf"

TEMPLATES = {
    "deep": "{{ " + "(" * 4500 + "1" + ")" * 4500 + " }}",
    "macro": "{% macro f() %}x{% endmacro %}{{ f() }}",
    "unclosed": "{% for m in messages %}{{ m.content }}",
    "loop": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "huge": "{{ 'x' * 1000000000 }}",
}


def with_template(tmp, name, text):
    src = Path(tmp) / f"{name}.jinja"
    src.write_text(text, encoding="utf-8")
    out = Path(tmp) / f"{name}.gguf"
    subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", str(STORIES), str(out), "--chat-template-file", str(src), "--force"],
                   check=True, capture_output=True)
    return out


def with_key(tmp, key, value):
    out = Path(tmp) / f"{key}-{value}.gguf"
    out.write_bytes(STORIES.read_bytes())
    subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_set_metadata", str(out), key, str(value), "--force"], check=True,
                   capture_output=True)
    return out


def check_hparams(tmp):
    for key, value, expected in (("llama.context_length", 4294967295, "expected a token count in [1, 16777216], got 4294967295"),
                                 ("llama.context_length", 2147483648, "expected a token count in [1, 16777216], got 2147483648"),
                                 ("llama.attention.layer_norm_rms_epsilon", 0, "expected a number in (0, 1), got 0"),
                                 ("llama.attention.layer_norm_rms_epsilon", "nan", "expected a number in (0, 1), got nan"),
                                 ("tokenizer.ggml.eos_token_id", 70000, "expected token ids in [0, 512), got 70000")):
        model = with_key(tmp, key, value)
        for cmd in ([BIN, "serve", "--model_path", str(model), "--port", "1"], [BIN, "generate", str(model), "--max-tokens", "2"]):
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            assert r.returncode == 2 and f"key '{key}': {expected}" in r.stderr, (cmd[1], key, value, r.returncode, r.stderr[-2000:])
        print(f"ok   {key} = {value}: refused by serve and generate, naming the key")


def with_tensor_names(tmp, label, *swaps):
    """stories260K with tensor names replaced in its header (names of equal length, so offsets stay)."""
    data = STORIES.read_bytes()
    for old, new in swaps:
        assert data.count(old) == 1 and len(old) == len(new), old
        data = data.replace(old, new)
    out = Path(tmp) / f"{label}.gguf"
    out.write_bytes(data)
    return out


def check_inspect_agrees(tmp, macro_model):
    """inspect says what generate would refuse, instead of describing the model as fine."""
    missing = with_tensor_names(tmp, "missing", (b"blk.0.attn_q.weight", b"blk.0.attn_x.weight"))
    swapped = with_tensor_names(tmp, "swapped", (b"blk.0.ffn_down", b"blk.0.ffn_TMPX"), (b"blk.0.ffn_gate", b"blk.0.ffn_down"),
                                (b"blk.0.ffn_TMPX", b"blk.0.ffn_gate"))
    for model in (missing, swapped, macro_model):
        g = subprocess.run([BIN, "generate", str(model), "--chat", "--prompt", "Hi", "--max-tokens", "2"], capture_output=True, text=True,
                           timeout=120)
        reason = g.stderr.strip().splitlines()[-1].removeprefix("error: ")
        assert g.returncode != 0 and reason, (model.name, g.returncode, g.stderr)
        i = subprocess.run([BIN, "inspect", str(model)], capture_output=True, text=True, timeout=120)
        assert i.returncode == 1 and f"loads:         NO: {reason}" in i.stdout and reason in i.stderr, (model.name, reason, i.stdout, i.stderr)
        j = subprocess.run([BIN, "inspect", str(model), "--json"], capture_output=True, text=True, timeout=120)
        assert json.loads(j.stdout)["load_error"] == reason, (model.name, j.stdout[-500:])
        print(f"ok   inspect {model.name}: exit 1, 'loads: NO: {reason[:70]}...' as generate says")
    i = subprocess.run([BIN, "inspect", str(STORIES)], capture_output=True, text=True, timeout=120)
    assert i.returncode == 0 and "loads:         yes" in i.stdout, (i.returncode, i.stdout, i.stderr)
    print("ok   inspect stories260K: loads: yes")


def generate(model):
    return subprocess.run([BIN, "generate", str(model), "--chat", "--prompt", "Hi", "--max-tokens", "4"], capture_output=True, text=True,
                          timeout=120)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        check_hparams(tmp)
        models = {name: with_template(tmp, name, text) for name, text in TEMPLATES.items()}
        # Refused when the model is loaded: what does not parse, nests too deep or uses what we lack.
        for name, expected in (("deep", "nests deeper than 200 levels"), ("macro", "'macro' tag is not supported"),
                               ("unclosed", "unexpected end of template")):
            r = generate(models[name])
            assert r.returncode == 2 and expected in r.stderr and "cannot be used" in r.stderr, (name, r.returncode, r.stderr[-2000:])
            s = subprocess.run([BIN, "serve", "--model_path", str(models[name]), "--port", "1"], capture_output=True, text=True, timeout=120)
            assert s.returncode == 2 and expected in s.stderr, (name, s.returncode, s.stderr[-2000:])
            print(f"ok   {name}: refused at load by generate and serve ({expected})")
        check_inspect_agrees(tmp, models["macro"])
        # Parse fine, run out of budget: an error in bounded time.
        for name, expected in (("loop", "evaluation steps"), ("huge", "MiB")):
            start = time.time()
            r = generate(models[name])
            assert r.returncode not in (0,) and r.returncode > 0 and expected in r.stderr, (name, r.returncode, r.stderr[-2000:])
            print(f"ok   {name}: generate --chat fails in {time.time() - start:.1f} s ({expected})")
        with serving(models["loop"], "--threads", "2") as port:
            body = json.dumps({"model": "loop", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}).encode()
            req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", body, {"Content-Type": "application/json"})
            try:
                urllib.request.urlopen(req, timeout=60)
                raise AssertionError("a runaway template rendered")
            except urllib.error.HTTPError as e:
                err = json.loads(e.read())["error"]
                assert e.code == 400 and "evaluation steps" in err["message"], (e.code, err)
            assert urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5).status == 200
            print("ok   loop: serve answers 400 naming the limit and keeps serving")
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
