#!/usr/bin/env python3
"""Measurement half of scripts/bench-vs-llama-cpp.sh (stdlib only; the shell script builds the tools
and the model files, then calls one of these subcommands):

  engine     our mo_tool_bench_engine against llama-bench, pp512 and tg128, alternating run by run
  serve      our `serve` against llama-server, both loaded by `model-optimizer bench`
  bandwidth  decode speed of random 1B-class weights as effective GB/s against a STREAM triad
  shape-gguf an F16 GGUF of a published model shape with random weights (llama-quantize makes the rest)
  shapes-summary  the ratios of several `engine --json` files in one table

Every subcommand prints Markdown on stdout and appends it to --out.
"""
import argparse
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

# ---------------------------------------------------------------------------------------------------
# helpers


def log(msg):
    print(f"[bench-vs-llama-cpp] {msg}", file=sys.stderr, flush=True)


def run_measured(cmd, env=None, timeout=None):
    """Runs cmd, returns (stdout, stderr, peak RSS in bytes of that child alone, seconds)."""
    with tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env)
        try:
            out = p.stdout.read()
        finally:
            p.stdout.close()
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        secs = time.monotonic() - t0
        err.seek(0)
        errtext = err.read().decode(errors="replace")
    out = out.decode(errors="replace")
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited with {p.returncode}:\n{out[-2000:]}\n{errtext[-4000:]}")
    return out, errtext, ru.ru_maxrss * 1024, secs


def mean_sd(v):
    if not v:
        return None, None
    return statistics.fmean(v), (statistics.stdev(v) if len(v) > 1 else 0.0)


def fmt_ms(v):
    m, s = mean_sd(v)
    if m is None:
        return "-"
    return f"{m:.1f} ± {s:.1f}" if len(v) > 1 else f"{m:.1f}"


def mib(b):
    return f"{b / 2**20:.0f} MiB"


def size_of(path):
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)
    return os.path.getsize(path)


def emit(text, out):
    print(text, flush=True)
    if out:
        with open(out, "a") as f:
            f.write(text + "\n")


# ---------------------------------------------------------------------------------------------------
# engine: pp512 / tg128


OURS_ROW = re.compile(r"^\|[^|]*\|[^|]*\|[^|]*\|[^|]*\|\s*(pp|tg)(\d+)\s*\|\s*([0-9.]+)")


def ours_once(tool, model, test, n, threads):
    p, g = (n, 0) if test == "pp" else (0, n)
    out, _, rss, _ = run_measured([tool, model, "-p", str(p), "-n", str(g), "-t", str(threads), "-r", "1"])
    for line in out.splitlines():
        m = OURS_ROW.match(line)
        if m and m.group(1) == test:
            return float(m.group(3)), rss
    raise RuntimeError(f"no {test}{n} row in mo_tool_bench_engine output:\n{out}")


LLAMA_EXTRA = shlex.split(os.environ.get("LLAMA_BENCH_ARGS", ""))


def llama_once(bench, model, test, n, threads):
    p, g = (n, 0) if test == "pp" else (0, n)
    out, _, rss, _ = run_measured([bench, "-m", model, "-p", str(p), "-n", str(g), "-t", str(threads), "-r", "1",
                                   "-o", "json"] + LLAMA_EXTRA)
    rows = json.loads(out)
    for r in rows:
        if (test == "pp" and r["n_prompt"] == n and r["n_gen"] == 0) or (test == "tg" and r["n_gen"] == n and r["n_prompt"] == 0):
            return float(r["avg_ts"]), rss
    raise RuntimeError(f"no {test}{n} result in llama-bench output:\n{out}")


def cmd_engine(a):
    models = []  # (label, path, llama.cpp runs it too)
    for spec in a.model:
        label, path = spec.split("=", 1)
        models.append((label, path, True))
    for spec in a.ours_only or []:
        label, path = spec.split("=", 1)
        models.append((label, path, False))
    tests = [("pp", a.p), ("tg", a.n)]
    res = {}  # (label, test) -> {"ours": [...], "llama": [...]}; rss per label and tool
    rss = {}
    for label, path, both in models:
        for test, n in tests:
            r = res.setdefault((label, test), {"ours": [], "llama": []})
            for run in range(a.runs):
                # ours, llama.cpp, ours, llama.cpp, ... and the one that starts flips every run, so slow drift
                # in the machine's load does not always favour the same tool
                order = ["ours", "llama"] if run % 2 == 0 else ["llama", "ours"]
                for tool in order:
                    if tool == "llama" and not both:
                        continue
                    if tool == "ours":
                        tps, peak = ours_once(a.ours, path, test, n, a.threads)
                    else:
                        tps, peak = llama_once(a.llama_bench, path, test, n, a.threads)
                    r[tool].append(tps)
                    key = (label, tool)
                    rss[key] = max(rss.get(key, 0), peak)
                    log(f"{label} {test}{n} run {run + 1}/{a.runs} {'ours' if tool == 'ours' else 'llama.cpp'}: {tps:.2f} tok/s")
    lines = [
        f"| model | file size | test | ours tok/s | llama.cpp tok/s | ours / llama.cpp | ours peak RSS | ours RSS / size | llama.cpp peak RSS |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for label, path, both in models:
        size = size_of(path)
        for test, n in tests:
            r = res[(label, test)]
            om, osd = mean_sd(r["ours"])
            lm, lsd = mean_sd(r["llama"])
            ratio = f"{om / lm:.2f}" if lm else "-"
            ours_rss = rss[(label, "ours")]
            llama_rss = rss.get((label, "llama"))
            lines.append(
                f"| {label} | {size / 1e6:.1f} MB | {test}{n} | {om:.2f} ± {osd:.2f} | "
                + (f"{lm:.2f} ± {lsd:.2f}" if lm else "(not supported)")
                + f" | {ratio} | {mib(ours_rss)} | {ours_rss / size:.2f} | {mib(llama_rss) if llama_rss else '-'} |"
            )
    emit("\n".join(lines) + "\n", a.out)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"results": {f"{k[0]} {k[1]}": v for k, v in res.items()},
                       "peak_rss": {f"{k[0]} {k[1]}": v for k, v in rss.items()}}, f, indent=1)


# ---------------------------------------------------------------------------------------------------
# serve: our server and llama-server under `model-optimizer bench`

SERVERS = []  # Popen objects still to stop


def stop_servers(*_):
    while SERVERS:
        p = SERVERS.pop()
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def on_signal(signum, _frame):
    stop_servers()
    sys.exit(128 + signum)


def start_server(cmd, health_url, logfile, pidfile):
    log(f"starting: {' '.join(cmd)}")
    lf = open(logfile, "w")
    p = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT, start_new_session=True)
    SERVERS.append(p)
    if pidfile:
        with open(pidfile, "a") as f:
            f.write(f"{p.pid}\n")
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if p.poll() is not None:
            raise RuntimeError(f"server exited with {p.returncode} during start-up; see {logfile}")
        try:
            with urllib.request.urlopen(health_url, timeout=2) as r:
                if r.status == 200:
                    return p
        except Exception:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"server not healthy after 300 s; see {logfile}")


def run_bench(a, port, outjson):
    cmd = [a.mo, "bench", "--base-url", f"http://127.0.0.1:{port}/v1", "--endpoint", "completions",
           "--concurrency", a.concurrency, "--num-prompts", str(a.num_prompts), "--input-len", str(a.input_len),
           "--output-len", str(a.output_len), "--ignore-eos", "--stream", "--no-progress", "--out", outjson]
    log(" ".join(cmd))
    subprocess.run(cmd, check=True, stdout=sys.stderr)
    with open(outjson) as f:
        return json.load(f)


def level_rows(res):
    rows = {}
    for lv in res["levels"]:
        s = lv["summary"]
        rows[lv["concurrency"]] = s
    return rows


def bench_table(name, rows):
    lines = [f"**{name}**", "",
             "| concurrency | ok | failed | output tok/s | req/s | TTFT p50 ms | TTFT p99 ms | TPOT p50 ms | E2E p50 ms | input tokens (mean) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for c, s in sorted(rows.items()):
        def q(m, k="median"):
            v = s.get(m) or {}
            return f"{v.get(k):.1f}" if v.get(k) is not None else "-"
        lines.append(f"| {c} | {s['completed']} | {s['failed']} | {s['output_throughput']:.1f} | {s['request_throughput']:.2f} | "
                     f"{q('ttft_ms')} | {q('ttft_ms', 'p99')} | {q('tpot_ms')} | {q('e2e_ms')} | {q('input_len', 'mean')} |")
    return "\n".join(lines) + "\n"


def cmd_serve(a):
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    os.makedirs(a.workdir, exist_ok=True)
    concs = [int(c) for c in a.concurrency.split(",")]
    # a slot must hold bench's tokenizer probe (260 words; about 1,300 tokens with the byte-per-token
    # placeholder vocabulary of the random-weight files) as well as input + output, as our max_model_len does
    slot_ctx = max(2048, a.input_len + a.output_len)
    results = {}
    try:
        p = start_server([a.mo, "serve", "--model_path", a.model, "--host", "127.0.0.1", "--port", str(a.port_ours),
                          "--threads", str(a.threads), "--max_num_seqs", str(max(concs)), "--max_model_len", "2048",
                          "--device", "cpu"],
                         f"http://127.0.0.1:{a.port_ours}/health", os.path.join(a.workdir, "serve-ours.log"), a.pidfile)
        results["ours"] = run_bench(a, a.port_ours, os.path.join(a.workdir, "ours.json"))
        stop_servers()
        p = start_server([a.llama_server, "-m", a.model, "-t", str(a.threads), "--host", "127.0.0.1",
                          "--port", str(a.port_llama), "-np", str(max(concs)), "-c", str(max(concs) * slot_ctx),
                          "--no-webui"],
                         f"http://127.0.0.1:{a.port_llama}/health", os.path.join(a.workdir, "serve-llama.log"), a.pidfile)
        results["llama"] = run_bench(a, a.port_llama, os.path.join(a.workdir, "llama.json"))
    finally:
        stop_servers()
    ours, llama = level_rows(results["ours"]), level_rows(results["llama"])
    text = bench_table(f"ours: model-optimizer serve --threads {a.threads}", ours)
    text += "\n" + bench_table(f"llama.cpp: llama-server -t {a.threads} -np {max(concs)} -c {max(concs) * slot_ctx}", llama)
    lo, hi = min(concs), max(concs)

    def ratio(x, y):
        return f"{x / y:.2f}" if y else "-"
    text += "\n| ratio | value |\n|---|---|\n"
    for c in concs:
        text += f"| output tok/s at c={c}, ours / llama-server | {ratio(ours[c]['output_throughput'], llama[c]['output_throughput'])} |\n"
    text += f"| output tok/s c={hi} / c={lo}, ours | {ratio(ours[hi]['output_throughput'], ours[lo]['output_throughput'])} |\n"
    text += f"| output tok/s c={hi} / c={lo}, llama-server | {ratio(llama[hi]['output_throughput'], llama[lo]['output_throughput'])} |\n"
    text += f"| TTFT p50 at c={lo}, ours / llama-server (lower is better) | {ratio(ours[lo]['ttft_ms']['median'], llama[lo]['ttft_ms']['median'])} |\n"
    text += f"| TPOT p50 at c={lo}, ours / llama-server (lower is better) | {ratio(ours[lo]['tpot_ms']['median'], llama[lo]['tpot_ms']['median'])} |\n"
    emit(text, a.out)


# ---------------------------------------------------------------------------------------------------
# bandwidth: decode of random 1B-class weights against a STREAM triad

BLOCK = {"q4_0": (32, 18), "q8_0": (32, 34), "q4_1": (32, 20), "f16": (1, 2)}  # (values, bytes) per block


def triad(exe, threads, mib_per_array):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_PROC_BIND="false")
    out, _, _, _ = run_measured([exe, str(mib_per_array), "10"], env=env)
    m = re.search(r"best ([0-9.]+) GB/s, mean ([0-9.]+)", out)
    return float(m.group(1)), float(m.group(2)), out.strip()


def cmd_bandwidth(a):
    hidden, layers, heads, kv_heads, ffn, vocab = (int(x) for x in a.shape.split(","))
    kv = kv_heads * (hidden // heads)
    per_layer = 2 * hidden * hidden + 2 * kv * hidden + 3 * hidden * ffn
    # one decode token reads every layer matrix and the output matrix once, one row of the embedding
    elems = layers * per_layer + vocab * hidden
    ggufs = dict(g.split("=", 1) for g in a.gguf)
    lines = ["| weights | read per token | tool | tg tok/s (mean ± sd) | effective GB/s | fraction of triad |",
             "|---|---|---|---|---|---|"]
    triads = []
    for t in a.types.split(","):
        vals, nbytes = BLOCK[t]
        per_token = elems / vals * nbytes
        before, _, txt = triad(a.triad, a.threads, a.triad_mib)
        triads.append(f"before {t}: {txt}")
        tps = {"ours": [], "llama": []}
        for run in range(a.runs):
            order = ["ours", "llama"] if run % 2 == 0 else ["llama", "ours"]
            for tool in order:
                if tool == "ours":
                    out, _, _, _ = run_measured([a.ours, "--dummy-shape", a.shape, "--type", t, "-p", "0", "-n", str(a.n),
                                                 "-t", str(a.threads), "-r", "1"])
                    rows = [OURS_ROW.match(l) for l in out.splitlines()]
                    rows = [m for m in rows if m and m.group(1) == "tg"]
                    if not rows:
                        raise RuntimeError(f"no tg row in:\n{out}")
                    v = float(rows[-1].group(3))
                elif t in ggufs and a.llama_bench:
                    v, _ = llama_once(a.llama_bench, ggufs[t], "tg", a.n, a.threads)
                else:
                    continue
                tps[tool].append(v)
                log(f"{t} tg{a.n} run {run + 1}/{a.runs} {'ours' if tool == 'ours' else 'llama.cpp'}: {v:.2f} tok/s "
                    f"= {v * per_token / 1e9:.2f} GB/s")
        after, _, txt = triad(a.triad, a.threads, a.triad_mib)
        triads.append(f"after {t}:  {txt}")
        best = max(before, after)
        for tool, name in (("ours", "ours"), ("llama", "llama.cpp")):
            if not tps[tool]:
                continue
            m, sd = mean_sd(tps[tool])
            gbs = m * per_token / 1e9
            lines.append(f"| {t} (random) | {per_token / 1e6:.0f} MB | {name} | {m:.2f} ± {sd:.2f} | {gbs:.2f} | {gbs / best:.0%} |")
        lines.append(f"| | | STREAM triad, best | | {before:.2f} before, {after:.2f} after | 100% = {best:.2f} |")
    text = "\n".join(lines) + "\n\n```\n" + "\n".join(triads) + "\n```\n"
    emit(text, a.out)


def llama_gguf_header(w, name, hidden, layers, heads, kv_heads, ffn, vocab, eps, rope_base, file_type):
    """The hyperparameters and a placeholder SentencePiece vocabulary: <unk>, <s>, </s>, the 256 byte tokens
    (so text tokenizes, one byte a token: llama-server refuses text without them) and t259, t260, ..."""
    w.add_name(name)
    w.add_context_length(4096)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_dimension_count(hidden // heads)
    w.add_layer_norm_rms_eps(eps)
    w.add_rope_freq_base(rope_base)
    w.add_file_type(file_type)
    w.add_tokenizer_model("llama")
    w.add_token_list(["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + [f"t{i}" for i in range(259, vocab)])
    w.add_token_scores([0.0] * vocab)
    w.add_token_types([2, 3, 3] + [6] * 256 + [1] * (vocab - 259))
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)


def cmd_random_gguf(a):
    """A Llama GGUF of the given shape with random blocks of one type (as our --dummy-shape makes) and a
    placeholder SentencePiece vocabulary, so llama.cpp can run the same shapes. Needs the gguf package."""
    import numpy as np
    import gguf

    hidden, layers, heads, kv_heads, ffn, vocab = (int(x) for x in a.shape.split(","))
    head_dim = hidden // heads
    qtype = {"q4_0": gguf.GGMLQuantizationType.Q4_0, "q8_0": gguf.GGMLQuantizationType.Q8_0, "f16": None}[a.type]
    vals, nbytes = BLOCK[a.type]
    # scale so the values have a standard deviation of about 0.02
    d = np.float16(0.02 / (4.6 if a.type == "q4_0" else 74.0))
    rng = np.random.default_rng(1)
    w = gguf.GGUFWriter(a.output + ".tmp", "llama")
    llama_gguf_header(w, f"random-{a.shape}-{a.type}", hidden, layers, heads, kv_heads, ffn, vocab, 1e-5, 10000.0,
                      {"q4_0": 2, "q8_0": 7, "f16": 1}[a.type])

    def mat(name, rows, cols):
        if qtype is None:  # f16: normal values of standard deviation 0.02
            w.add_tensor(name, (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16))
            return
        blocks = rng.integers(0, 256, size=(rows, cols // vals, nbytes), dtype=np.uint8)
        blocks[:, :, 0:2] = np.frombuffer(d.tobytes(), dtype=np.uint8)
        w.add_tensor(name, blocks.reshape(rows, -1), raw_dtype=qtype)

    def norm(name):
        w.add_tensor(name, np.ones(hidden, dtype=np.float32))

    mat("token_embd.weight", vocab, hidden)
    norm("output_norm.weight")
    mat("output.weight", vocab, hidden)
    for i in range(layers):
        norm(f"blk.{i}.attn_norm.weight")
        mat(f"blk.{i}.attn_q.weight", hidden, hidden)
        mat(f"blk.{i}.attn_k.weight", kv_heads * head_dim, hidden)
        mat(f"blk.{i}.attn_v.weight", kv_heads * head_dim, hidden)
        mat(f"blk.{i}.attn_output.weight", hidden, hidden)
        norm(f"blk.{i}.ffn_norm.weight")
        mat(f"blk.{i}.ffn_gate.weight", ffn, hidden)
        mat(f"blk.{i}.ffn_up.weight", ffn, hidden)
        mat(f"blk.{i}.ffn_down.weight", hidden, ffn)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(a.output + ".tmp", a.output)


# Published configurations for --shapes: (arch, hidden, layers, heads, kv heads, ffn, vocab, q/k/v bias,
# tied output, rope base, rms eps), as in each model's config.json
SHAPES = {
    "qwen2.5-0.5b": ("qwen2", 896, 24, 14, 2, 4864, 151936, True, True, 1000000.0, 1e-6),
    "llama-3.2-1b": ("llama", 2048, 16, 32, 8, 8192, 128256, False, True, 500000.0, 1e-5),
    "llama-3.2-3b": ("llama", 3072, 28, 24, 8, 8192, 128256, False, True, 500000.0, 1e-5),
    "llama-3.1-8b": ("llama", 4096, 32, 32, 8, 14336, 128256, False, False, 500000.0, 1e-5),
}


def cmd_shape_gguf(a):
    """An F16 GGUF of a published model shape with random normal weights (sd 0.02) and a placeholder
    SentencePiece vocabulary, streamed tensor by tensor (an 8B shape is 16 GB); llama-quantize makes the
    other types from it. Needs the gguf package."""
    import numpy as np
    import gguf

    arch, hidden, layers, heads, kv_heads, ffn, vocab, bias, tied, rope_base, eps = SHAPES[a.shape]
    head_dim = hidden // heads
    kv = kv_heads * head_dim
    rng = np.random.default_rng(1)
    w = gguf.GGUFWriter(a.output + ".tmp", arch)
    llama_gguf_header(w, f"random-{a.shape}", hidden, layers, heads, kv_heads, ffn, vocab, eps, rope_base, 1)

    tensors = [("token_embd.weight", (vocab, hidden)), ("output_norm.weight", (hidden,))]
    if not tied:
        tensors.append(("output.weight", (vocab, hidden)))
    for i in range(layers):
        b = f"blk.{i}."
        tensors += [(b + "attn_norm.weight", (hidden,)), (b + "attn_q.weight", (hidden, hidden)),
                    (b + "attn_k.weight", (kv, hidden)), (b + "attn_v.weight", (kv, hidden))]
        if bias:
            tensors += [(b + "attn_q.bias", (hidden,)), (b + "attn_k.bias", (kv,)), (b + "attn_v.bias", (kv,))]
        tensors += [(b + "attn_output.weight", (hidden, hidden)), (b + "ffn_norm.weight", (hidden,)),
                    (b + "ffn_gate.weight", (ffn, hidden)), (b + "ffn_up.weight", (ffn, hidden)),
                    (b + "ffn_down.weight", (hidden, ffn))]
    for name, shape in tensors:  # 1-D tensors (norms, biases) stay f32, as convert_hf_to_gguf writes them
        dt = np.float32 if len(shape) == 1 else np.float16
        w.add_tensor_info(name, shape, np.dtype(dt), int(np.prod(shape)) * np.dtype(dt).itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for name, shape in tensors:
        if len(shape) == 1:
            v = np.ones(shape, np.float32) if name.endswith("norm.weight") else \
                (rng.standard_normal(shape, dtype=np.float32) * 0.02)
        else:
            v = np.empty(shape, np.float16)
            step = max(1, (1 << 24) // shape[1])
            for r in range(0, shape[0], step):
                v[r:r + step] = rng.standard_normal((min(step, shape[0] - r), shape[1]), dtype=np.float32) * 0.02
        w.write_tensor_data(v)
    w.close()
    os.replace(a.output + ".tmp", a.output)


def cmd_shapes_summary(a):
    """One row per (shape, type) with the pp and tg ratios from the engine subcommand's JSON files."""
    lines = ["| shape | type | pp ours / llama.cpp (runs) | tg ours / llama.cpp (runs) |", "|---|---|---|---|"]
    for spec in a.json:
        shape, path = spec.split("=", 1)
        with open(path) as f:
            res = json.load(f)["results"]
        labels = list(dict.fromkeys(k.rsplit(" ", 1)[0] for k in res))
        for label in labels:
            cells = []
            for test in ("pp", "tg"):
                r = res.get(f"{label} {test}")
                if not r or not r["llama"]:
                    cells.append("-")
                    continue
                om, lm = statistics.fmean(r["ours"]), statistics.fmean(r["llama"])
                runs = ", ".join(f"{o / l:.2f}" for o, l in zip(r["ours"], r["llama"]))
                cells.append(f"**{om / lm:.2f}** ({om:.1f}/{lm:.1f}; {runs})")
            lines.append(f"| {shape} | {label} | {cells[0]} | {cells[1]} |")
    emit("\n".join(lines) + "\n", a.out)


# ---------------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("engine")
    e.add_argument("--ours", required=True, help="mo_tool_bench_engine")
    e.add_argument("--llama-bench", required=True)
    e.add_argument("--model", action="append", default=[], help="LABEL=FILE (both tools)")
    e.add_argument("--ours-only", action="append", default=[], help="LABEL=PATH (our engine only)")
    e.add_argument("-p", type=int, default=512)
    e.add_argument("-n", type=int, default=128)
    e.add_argument("--threads", type=int, default=2)
    e.add_argument("--runs", type=int, default=3)
    e.add_argument("--out")
    e.add_argument("--json")
    s = sub.add_parser("serve")
    s.add_argument("--mo", required=True)
    s.add_argument("--llama-server", required=True)
    s.add_argument("--model", required=True)
    s.add_argument("--threads", type=int, default=2)
    s.add_argument("--concurrency", default="1,4,16")
    s.add_argument("--num-prompts", type=int, default=32)
    s.add_argument("--input-len", type=int, default=128)
    s.add_argument("--output-len", type=int, default=64)
    s.add_argument("--port-ours", type=int, default=18431)
    s.add_argument("--port-llama", type=int, default=18432)
    s.add_argument("--workdir", required=True)
    s.add_argument("--pidfile")
    s.add_argument("--out")
    b = sub.add_parser("bandwidth")
    b.add_argument("--ours", required=True)
    b.add_argument("--triad", required=True)
    b.add_argument("--shape", default="2048,22,32,4,5632,32000")
    b.add_argument("--types", default="q4_0,q8_0")
    b.add_argument("-n", type=int, default=128)
    b.add_argument("--runs", type=int, default=3)
    b.add_argument("--threads", type=int, default=2)
    b.add_argument("--triad-mib", type=int, default=256)
    b.add_argument("--llama-bench")
    b.add_argument("--gguf", action="append", default=[], help="TYPE=FILE: the same shapes for llama-bench")
    b.add_argument("--out")
    g = sub.add_parser("random-gguf")
    g.add_argument("--shape", default="2048,22,32,4,5632,32000")
    g.add_argument("--type", default="q4_0", choices=["q4_0", "q8_0", "f16"])
    g.add_argument("--output", required=True)
    sg = sub.add_parser("shape-gguf")
    sg.add_argument("--shape", required=True, choices=sorted(SHAPES))
    sg.add_argument("--output", required=True)
    ss = sub.add_parser("shapes-summary")
    ss.add_argument("--json", action="append", default=[], help="SHAPE=engine.json")
    ss.add_argument("--out")
    a = ap.parse_args()
    {"shape-gguf": cmd_shape_gguf, "shapes-summary": cmd_shapes_summary, "engine": cmd_engine, "serve": cmd_serve, "bandwidth": cmd_bandwidth, "random-gguf": cmd_random_gguf}[a.cmd](a)


if __name__ == "__main__":
    main()
