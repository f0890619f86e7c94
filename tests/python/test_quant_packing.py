#!/usr/bin/env python3
"""Quantized HF checkpoints against an independent numpy implementation of the public formats.

The numpy side is written from the format descriptions (AutoAWQ WQLinear_GEMM, AutoGPTQ
qlinear_cuda_old, compressed-tensors float-quantized FP8), not from our C++:
- AWQ GEMM 4-bit, GPTQ v1 (sym; asym with act-order g_idx; `dynamic` 8-bit and skip rules), GPTQ v2 8-bit
  asym with a quantized lm_head, and FP8 per-channel / per-tensor checkpoints of stories260K load in our
  engine with every linear equal, bit for bit, to numpy's dequantization, in the representation the
  rules predict (exact Q8_0 re-blocking or F32), and the log names the scheme.
- Our packers (mo::formats::pack_awq / pack_gptq) unpack with numpy to the codes, zeros, scales and g_idx
  they were given; our FP8 encoder, decoder and quantize_fp8 equal numpy's on ties, subnormals, NaN and
  saturation.
- `generate` on the AWQ copy prints the same greedy text as on its numpy-dequantized float twin.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from safetensors import TensorSpec, serialize_file
from safetensors.numpy import load_file

BIN = Path(os.environ["MO_BINARY"])
TOOL = Path(os.environ["MO_TOOLS_DIR"]) / "mo_tool_dump_weights"
STORIES = Path(os.environ["MO_SHARED_DATA"]) / "models" / "stories260K.gguf"

AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]  # nibble k of an AWQ word holds output column 8c + AWQ_ORDER[k]
LINEARS = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
           "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
ST_DTYPE = {np.dtype(np.int32): "int32", np.dtype(np.float16): "float16", np.dtype(np.float32): "float32", np.dtype(np.uint8): "uint8"}

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run(*args, stderr=False):
    res = subprocess.run([str(a) for a in args], capture_output=True)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))}: {res.stderr.decode()}")
    return (res.stdout, res.stderr.decode()) if stderr else res.stdout


# ---- FP8 E4M3FN from the format: 1 sign, 4 exponent (bias 7), 3 mantissa bits, no infinities, S.1111.111 = NaN.
def fp8_value(code):
    s = -1.0 if code & 0x80 else 1.0
    e, m = (code >> 3) & 15, code & 7
    if e == 15 and m == 7:
        return float("nan")
    return s * (m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7))


FP8_TABLE = np.array([fp8_value(c) for c in range(256)])
FP8_POS = FP8_TABLE[:127]  # codes 0..126: every finite non-negative value, ascending


def fp8_encode(x):
    """Round to the nearest finite value, ties to the even code, saturating at 448 (what a clamp then cast does)."""
    x = np.asarray(x, np.float32)
    a = np.minimum(np.abs(x).astype(np.float64), 448.0)
    hi = np.clip(np.searchsorted(FP8_POS, a, "left"), 1, 126)
    lo = hi - 1
    dlo, dhi = a - FP8_POS[lo], FP8_POS[hi] - a
    code = np.where(dlo < dhi, lo, np.where(dhi < dlo, hi, np.where(lo % 2 == 0, lo, hi)))
    code = np.where(np.isnan(x), 0x7F, code)
    return (code | np.where(np.signbit(x), 0x80, 0)).astype(np.uint8)


def fp8_decode(q):
    return FP8_TABLE[q].astype(np.float32)


# ---- integer group quantization (round to nearest) and the two packings
def rtn(w, bits, G, sym, g_idx, zmin=0):
    """Codes [out, in], zeros and f16 scales [out, groups]; group of input column c = g_idx[c]."""
    out, n_in = w.shape
    maxq = 2 ** bits - 1
    ng = int(g_idx.max()) + 1
    q = np.zeros((out, n_in), np.uint8)
    zeros = np.zeros((out, ng), np.uint8)
    scales = np.zeros((out, ng), np.float16)
    for g in range(ng):
        cols = np.nonzero(g_idx == g)[0]
        wg = w[:, cols].astype(np.float32)
        if sym:
            s = np.abs(wg).max(1) / (2 ** (bits - 1) - 1)
        else:
            s = (np.maximum(wg.max(1), 0) - np.minimum(wg.min(1), 0)) / maxq
        s16 = np.where(s == 0, 1, s).astype(np.float16)
        sf = s16.astype(np.float32)
        z = np.full(out, 2 ** (bits - 1)) if sym else np.clip(np.round(-np.minimum(wg.min(1), 0) / sf), zmin, maxq)
        q[:, cols] = np.clip(np.round(wg / sf[:, None]) + z[:, None], 0, maxq)
        zeros[:, g], scales[:, g] = z, s16
    return q, zeros, scales


def dequant(q, zeros, scales, g_idx):
    return (q.astype(np.float32) - zeros[:, g_idx].astype(np.float32)) * scales[:, g_idx].astype(np.float32)


def awq_pack(q, zeros, scales):
    def words(m):  # m [rows, out] -> [rows, out/8]
        w = np.zeros((m.shape[0], m.shape[1] // 8), np.uint32)
        for k in range(8):
            w |= m[:, AWQ_ORDER[k]::8].astype(np.uint32) << np.uint32(4 * k)
        return w.view(np.int32)
    return {"qweight": words(q.T), "qzeros": words(zeros.T), "scales": scales.T.copy()}


def awq_unpack(t):
    def codes(w):
        n = w.view(np.uint32)[:, :, None] >> (4 * np.arange(8, dtype=np.uint32)) & 0xF
        m = np.empty_like(n)
        m[:, :, AWQ_ORDER] = n
        return m.reshape(w.shape[0], -1).astype(np.uint8)
    return codes(t["qweight"]).T, codes(t["qzeros"]).T, t["scales"].T


def gptq_pack(q, zeros, scales, g_idx, bits, v1):
    pf, mask = 32 // bits, (1 << bits) - 1
    qt = q.T.astype(np.uint32)
    qweight = np.zeros((q.shape[1] // pf, q.shape[0]), np.uint32)
    for j in range(pf):
        qweight |= qt[j::pf, :] << np.uint32(bits * j)
    zs = ((zeros.T.astype(np.int64) - (1 if v1 else 0)) & mask).astype(np.uint32)
    qzeros = np.zeros((zs.shape[0], zs.shape[1] // pf), np.uint32)
    for j in range(pf):
        qzeros |= zs[:, j::pf] << np.uint32(bits * j)
    return {"qweight": qweight.view(np.int32), "qzeros": qzeros.view(np.int32), "scales": scales.T.copy(),
            "g_idx": g_idx.astype(np.int32)}


def gptq_unpack(t, bits, v1):
    pf, mask = 32 // bits, (1 << bits) - 1
    shifts = (bits * np.arange(pf, dtype=np.uint32))
    qw = t["qweight"].view(np.uint32)
    q = (qw[:, None, :] >> shifts[None, :, None] & mask).reshape(-1, qw.shape[1])
    qz = t["qzeros"].view(np.uint32)
    z = (qz[:, :, None] >> shifts[None, None, :] & mask).reshape(qz.shape[0], -1) + (1 if v1 else 0)
    return q.T.astype(np.uint8), z.T.astype(np.int64), t["scales"].T


# ---- checkpoints
def write_safetensors(path, tensors):
    specs, keep = {}, []
    for name, (arr, dtype) in tensors.items():
        buf = np.ascontiguousarray(arr)
        keep.append(buf)
        specs[name] = TensorSpec(dtype=dtype or ST_DTYPE[buf.dtype], shape=list(buf.shape), data_ptr=buf.ctypes.data, data_len=buf.nbytes)
    serialize_file(specs, str(path))


def make_checkpoint(src, dst, quantization_config, tensors):
    """A copy of the float HF dir `src` with `tensors` (name -> (array, safetensors dtype or None)) as weights."""
    shutil.copytree(src, dst)
    config = json.loads((src / "config.json").read_text())
    if quantization_config is not None:
        config["quantization_config"] = quantization_config
    (dst / "config.json").write_text(json.dumps(config, indent=2))
    write_safetensors(dst / "model.safetensors", tensors)


def modules(n_layers):
    for i in range(n_layers):
        for gg, hf in LINEARS.items():
            yield f"blk.{i}.{gg}", f"model.layers.{i}.{hf}"
    yield "output", "lm_head"


def compare_engine(model_dir, expected, expected_types, label):
    """expected: gguf base -> f32 matrix; expected_types: gguf base -> 'q4z' | 'q8_0' | 'f32'."""
    out, err = run(TOOL, "list", model_dir, stderr=True)
    listed = json.loads(out)
    types_ok = all(listed[b]["type"] == t for b, t in expected_types.items())
    check(types_ok, f"{label}: representations {sorted(set(expected_types.values()))} as predicted"
          + ("" if types_ok else f": {[(b, listed[b]['type'], t) for b, t in expected_types.items() if listed[b]['type'] != t]}"))
    bad = []
    with tempfile.TemporaryDirectory() as tmp:
        for base, ref in expected.items():
            f = Path(tmp) / "w.f32"
            run(TOOL, "linear", model_dir, base, f)
            got = np.fromfile(f, np.float32).reshape(ref.shape)
            if got.tobytes() != ref.astype(np.float32).tobytes():
                bad.append(f"{base} (max diff {np.nanmax(np.abs(got - ref))})")
    check(not bad, f"{label}: {len(expected)} linears equal numpy's dequantization bit for bit" + (f": {bad}" if bad else ""))
    return err


def test_checkpoints(tmp):
    base = tmp / "stories-f32"
    run(BIN, "convert", STORIES, base)
    w = load_file(str(base / "model.safetensors"))
    cfg = json.loads((base / "config.json").read_text())
    n_layers = cfg["num_hidden_layers"]
    rng = np.random.default_rng(0)

    def float_tensors(skip):
        return {k: (v, None) for k, v in w.items() if k not in skip}

    # AWQ GEMM 4-bit g32, MLPs left float (ffn 172 is not a multiple of 8 outputs).
    tensors, expected, types = float_tensors(set()), {}, {}
    for gg, hf in modules(n_layers):
        W = w[hf + ".weight"]
        if ".mlp." in hf or hf == "lm_head":
            expected[gg], types[gg] = W, "f32"
            continue
        g_idx = np.arange(W.shape[1]) // 32
        q, z, s = rtn(W, 4, 32, False, g_idx)
        del tensors[hf + ".weight"]
        tensors.update({f"{hf}.{k}": (v, None) for k, v in awq_pack(q, z, s).items()})
        expected[gg], types[gg] = dequant(q, z, s, g_idx), "q4z"  # the engine's 4-bit blocks: stored scale, zero, nibbles
    awq_dir = tmp / "stories-awq"
    make_checkpoint(base, awq_dir, {"quant_method": "awq", "bits": 4, "group_size": 32, "zero_point": True, "version": "gemm",
                                    "modules_to_not_convert": ["mlp"]}, tensors)
    err = compare_engine(awq_dir, expected, types, "AWQ GEMM 4-bit g32")
    n_attn = 4 * n_layers
    check(re.search(rf"awq 4-bit g32 gemm checkpoint; linears: .*{n_awq_float(n_layers)} float \(left unquantized.*{n_attn} q4z", err)
          is not None, f"AWQ: the log names the scheme and counts ({err.strip().splitlines()[-1] if err.strip() else 'no log'})")

    # AutoAWQ's older quant_config.json beside config.json, with its own key names and no quant_method.
    legacy = tmp / "stories-awq-legacy"
    shutil.copytree(awq_dir, legacy)
    c = json.loads((legacy / "config.json").read_text())
    del c["quantization_config"]
    (legacy / "config.json").write_text(json.dumps(c, indent=2))
    (legacy / "quant_config.json").write_text(json.dumps({"zero_point": True, "q_group_size": 32, "w_bit": 4, "version": "GEMM",
                                                          "modules_to_not_convert": ["mlp"]}))
    compare_engine(legacy, expected, types, "AWQ with only AutoAWQ's quant_config.json (w_bit, q_group_size)")

    # A layout we cannot load is one error line naming the key, exit code 2.
    gemv = tmp / "stories-awq-gemv"
    shutil.copytree(awq_dir, gemv)
    c = json.loads((gemv / "config.json").read_text())
    c["quantization_config"]["version"] = "gemv"
    (gemv / "config.json").write_text(json.dumps(c))
    res = subprocess.run([str(BIN), "generate", str(gemv), "--max-tokens", "4"], capture_output=True)
    check(res.returncode == 2 and "quantization_config.version: AWQ 'gemv' is not supported" in res.stderr.decode(),
          f"AWQ GEMV checkpoint: exit {res.returncode}, {res.stderr.decode().strip()[-120:]!r}")

    # The engine on the AWQ copy generates what it generates on the numpy-dequantized float twin.
    twin = tmp / "stories-awq-dequantized"
    make_checkpoint(base, twin, None, {**float_tensors(set()), **{hf + ".weight": (expected[gg], None) for gg, hf in modules(n_layers)}})
    text_q = run(BIN, "generate", awq_dir, "--max-tokens", "40").decode()
    text_f = run(BIN, "generate", twin, "--max-tokens", "40").decode()
    check(len(text_q) > 40 and text_q == text_f, f"generate on the AWQ copy = on its dequantized twin: {text_q[:60]!r}")

    # GPTQ v1 4-bit sym g32 with dynamic rules: MLPs skipped ("-:" first), layer 1 attention 8-bit.
    dynamic = {r"-:.*\.mlp\..*": {}, r"+:model\.layers\.1\..*": {"bits": 8}}
    tensors, expected, types = float_tensors(set()), {}, {}
    for gg, hf in modules(n_layers):
        W = w[hf + ".weight"]
        if ".mlp." in hf or hf == "lm_head":
            expected[gg], types[gg] = W, "f32"
            continue
        bits = 8 if hf.startswith("model.layers.1.") else 4
        g_idx = np.arange(W.shape[1]) // 32
        q, z, s = rtn(W, bits, 32, True, g_idx)
        del tensors[hf + ".weight"]
        tensors.update({f"{hf}.{k}": (v, None) for k, v in gptq_pack(q, z, s, g_idx, bits, True).items()})
        expected[gg], types[gg] = dequant(q, z, s, g_idx), "q4z" if bits == 4 else "q8_0"
    gptq_cfg = {"quant_method": "gptq", "bits": 4, "group_size": 32, "damp_percent": 0.01, "desc_act": False, "static_groups": False,
                "sym": True, "true_sequential": True, "lm_head": False, "checkpoint_format": "gptq", "dynamic": dynamic}
    make_checkpoint(base, tmp / "stories-gptq-sym", gptq_cfg, tensors)
    compare_engine(tmp / "stories-gptq-sym", expected, types, "GPTQ v1 4-bit sym g32 + dynamic (8-bit layer 1, MLP skipped)")

    # AutoGPTQ checkpoints that predate Transformers' quantization_config: quantize_config.json only, no quant_method.
    legacy = tmp / "stories-gptq-legacy"
    shutil.copytree(tmp / "stories-gptq-sym", legacy)
    c = json.loads((legacy / "config.json").read_text())
    qc = c.pop("quantization_config")
    del qc["quant_method"]
    (legacy / "config.json").write_text(json.dumps(c, indent=2))
    (legacy / "quantize_config.json").write_text(json.dumps(qc, indent=2))
    compare_engine(legacy, expected, types, "GPTQ with only quantize_config.json (no quant_method)")

    # GPTQ v1 4-bit asym with act-order g_idx (desc_act): groups of 32 made contiguous by a column permutation, q4z.
    tensors, expected, types = float_tensors(set()), {}, {}
    for gg, hf in modules(n_layers):
        W = w[hf + ".weight"]
        if ".mlp." in hf or hf == "lm_head":
            expected[gg], types[gg] = W, "f32"
            continue
        g_idx = np.empty(W.shape[1], np.int64)
        g_idx[rng.permutation(W.shape[1])] = np.arange(W.shape[1]) // 32
        q, z, s = rtn(W, 4, 32, False, g_idx, zmin=1)  # v1 stores zero-1: a zero of 0 is not representable
        del tensors[hf + ".weight"]
        tensors.update({f"{hf}.{k}": (v, None) for k, v in gptq_pack(q, z, s, g_idx, 4, True).items()})
        expected[gg], types[gg] = dequant(q, z, s, g_idx), "q4z"
    make_checkpoint(base, tmp / "stories-gptq-actorder", {**gptq_cfg, "sym": False, "desc_act": True, "dynamic": {r"-:.*\.mlp\..*": {}}}, tensors)
    compare_engine(tmp / "stories-gptq-actorder", expected, types, "GPTQ v1 4-bit asym act-order")

    # GPTQ v2 8-bit asym g32 on every linear and the lm_head: Q8_0 only where q - zero fits int8 and widths allow.
    tensors, expected, types = float_tensors(set()), {}, {}
    for gg, hf in modules(n_layers):
        W = w[hf + ".weight"]
        g_idx = np.arange(W.shape[1]) // 32
        q, z, s = rtn(W, 8, 32, False, g_idx)
        del tensors[hf + ".weight"]
        tensors.update({f"{hf}.{k}": (v, None) for k, v in gptq_pack(q, z, s, g_idx, 8, False).items()})
        diff = q.astype(np.int64) - z[:, g_idx]
        fits = W.shape[1] % 32 == 0 and diff.min() >= -128 and diff.max() <= 127
        expected[gg], types[gg] = dequant(q, z, s, g_idx), "q8_0" if fits else "f32"
    make_checkpoint(base, tmp / "stories-gptq8-v2", {**gptq_cfg, "bits": 8, "sym": False, "lm_head": True,
                                                     "checkpoint_format": "gptq_v2", "dynamic": None}, tensors)
    compare_engine(tmp / "stories-gptq8-v2", expected, types, "GPTQ v2 8-bit asym incl. lm_head")

    # FP8 E4M3 per channel (lm_head ignored) and per tensor (weight-only): fp8 value * f32 scale.
    for per_channel in (True, False):
        tensors, expected, types = float_tensors(set()), {}, {}
        for gg, hf in modules(n_layers):
            W = w[hf + ".weight"]
            if hf == "lm_head":
                expected[gg], types[gg] = W, "f32"
                continue
            amax = np.abs(W).max(1) if per_channel else np.array([np.abs(W).max()], np.float32)
            scale = (amax.astype(np.float32) / np.float32(448)).astype(np.float32)
            q = fp8_encode((W / (scale[:, None] if per_channel else scale[0])).astype(np.float32))
            tensors[hf + ".weight"] = (q, "float8_e4m3fn")
            tensors[hf + ".weight_scale"] = (scale.reshape(-1, 1) if per_channel else scale, None)
            expected[gg] = fp8_decode(q) * (scale[:, None] if per_channel else scale[0])
            types[gg] = "f32"
        wq = {"num_bits": 8, "type": "float", "symmetric": True, "group_size": None, "strategy": "channel" if per_channel else "tensor",
              "block_structure": None, "dynamic": False, "actorder": None, "observer": "minmax", "observer_kwargs": {}}
        act = {**wq, "strategy": "token", "dynamic": True, "observer": None} if per_channel else None
        ct = {"quant_method": "compressed-tensors", "format": "float-quantized", "quantization_status": "compressed",
              "global_compression_ratio": None, "kv_cache_scheme": None, "ignore": ["lm_head"],
              "config_groups": {"group_0": {"targets": ["Linear"], "weights": wq, "input_activations": act, "output_activations": None}}}
        d = tmp / f"stories-fp8-{'channel' if per_channel else 'tensor'}"
        make_checkpoint(base, d, ct, tensors)
        compare_engine(d, expected, types, f"FP8 per-{'channel' if per_channel else 'tensor'}")
        if per_channel:
            fp8_cfg = ct
    return {"awq": None, "fp8": fp8_cfg}


def n_awq_float(n_layers):
    return 3 * n_layers + 1  # the MLP projections and the lm_head


def test_packers(tmp):
    cases = [("awq", 4, 0, 0, 16, 64, 32), ("awq", 4, 0, 0, 8, 96, -1), ("gptq_v1", 4, 1, 0, 16, 64, 32), ("gptq_v1", 4, 0, 1, 16, 96, 32),
             ("gptq_v1", 8, 1, 0, 8, 64, 16), ("gptq_v1", 8, 0, 1, 12, 40, 16), ("gptq_v2", 4, 0, 1, 24, 64, 32), ("gptq_v2", 8, 0, 0, 8, 32, -1)]
    for i, (fmt, bits, sym, act, rows, cols, group) in enumerate(cases):
        f = tmp / f"pack{i}.safetensors"
        run(TOOL, "pack", fmt, bits, sym, act, rows, cols, group, 100 + i, f)
        t = load_file(str(f))
        if fmt == "awq":
            q, z, s = awq_unpack(t)
            g_ok = True
        else:
            q, z, s = gptq_unpack(t, bits, fmt == "gptq_v1")
            g_ok = np.array_equal(t["g_idx"], t["ref_g_idx"])
        ok = (np.array_equal(q, t["ref_q"]) and np.array_equal(z, t["ref_zeros"]) and s.tobytes() == t["ref_scales"].tobytes() and g_ok)
        check(ok, f"pack {fmt} {bits}-bit sym={sym} act-order={act} {rows}x{cols} g{group}: numpy unpacks our words to the codes")


def test_fp8(tmp):
    f = tmp / "dec.f32"
    run(TOOL, "fp8_decode", f)
    got = np.fromfile(f, np.float32)
    check(np.array_equal(got, FP8_TABLE.astype(np.float32), equal_nan=True), "fp8 decode: all 256 codes equal the format table")

    rng = np.random.default_rng(1)
    mids = ((FP8_POS[:-1] + FP8_POS[1:]) / 2).astype(np.float32)  # every tie, exact in f32
    special = np.array([0.0, -0.0, 448, -448, 449, 464, 465, 1e30, np.inf, -np.inf, np.nan, 2.0 ** -9, 2.0 ** -10, 2.0 ** -11,
                        3 * 2.0 ** -10, 1.0, 1.0625, 1.1875], np.float32)
    x = np.concatenate([special, mids, -mids, np.nextafter(mids, np.float32(0)), np.nextafter(mids, np.float32(1000)),
                        (rng.standard_normal(20000) * rng.choice([1e-3, 0.05, 1, 30, 300], 20000)).astype(np.float32)])
    x.astype(np.float32).tofile(tmp / "enc.f32")
    run(TOOL, "fp8_encode", tmp / "enc.f32", tmp / "enc.u8")
    ours, ref = np.fromfile(tmp / "enc.u8", np.uint8), fp8_encode(x)
    bad = np.nonzero(ours != ref)[0]
    check(bad.size == 0, f"fp8 encode: {x.size} values (all {mids.size} ties, subnormals, NaN, saturation) equal numpy"
          + ("" if bad.size == 0 else f": first {[(float(x[i]), int(ours[i]), int(ref[i])) for i in bad[:5]]}"))

    W = (rng.standard_normal((24, 40)) * rng.uniform(0.01, 3, (24, 1))).astype(np.float32)
    W.tofile(tmp / "w.f32")
    for per_channel in (1, 0):
        run(TOOL, "fp8_quantize", tmp / "w.f32", 24, 40, per_channel, tmp / "fq.safetensors")
        t = load_file(str(tmp / "fq.safetensors"))
        amax = np.abs(W).max(1) if per_channel else np.array([np.abs(W).max()], np.float32)
        scale = amax.astype(np.float32) / np.float32(448)
        q = fp8_encode(W / (scale[:, None] if per_channel else scale[0]))
        check(np.array_equal(t["scales"], scale) and np.array_equal(t["q"], q),
              f"quantize_fp8 per-{'channel' if per_channel else 'tensor'}: scales absmax/448 and codes equal numpy")


def test_configs(fp8_reference):
    awq = json.loads(run(TOOL, "config", "awq", json.dumps({"group_size": 32, "modules_to_not_convert": ["mlp"]})))
    check(awq["config"] == {"quant_method": "awq", "bits": 4, "group_size": 32, "zero_point": True, "version": "gemm",
                            "modules_to_not_convert": ["mlp"]} and awq["parsed"] == "awq 4-bit g32 gemm",
          "awq quantization_config: AutoAWQ's keys, read back by our parser")
    gptq = json.loads(run(TOOL, "config", "gptq", json.dumps({"bits": 4, "group_size": 32, "sym": True,
                                                              "dynamic": [{"pattern": r".*\.mlp\..*", "skip": True},
                                                                          {"pattern": r"model\.layers\.1\..*", "overrides": {"bits": 8}}]})))
    check(gptq["config"] == {"quant_method": "gptq", "bits": 4, "group_size": 32, "damp_percent": 0.01, "desc_act": False,
                             "static_groups": False, "sym": True, "true_sequential": True, "lm_head": False, "checkpoint_format": "gptq",
                             "dynamic": {r"-:.*\.mlp\..*": {}, r"+:model\.layers\.1\..*": {"bits": 8}}},
          "gptq quantization_config: AutoGPTQ keys + checkpoint_format + GPTQModel dynamic")
    qc = json.loads(run(TOOL, "config", "gptq_file", json.dumps({"v2": True})))["config"]
    check(qc["checkpoint_format"] == "gptq_v2" and qc["meta"]["quantizer"][0].startswith("model-optimizer:"),
          "quantize_config.json: checkpoint_format gptq_v2 and meta.quantizer")
    fp8 = json.loads(run(TOOL, "config", "fp8"))
    check(fp8["config"] == fp8_reference, "fp8 quantization_config: the compressed-tensors float-quantized config the checkpoints use")


def main():
    if not STORIES.exists():
        print(f"skipped: {STORIES} not found")
        return 77
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        test_packers(tmp)
        test_fp8(tmp)
        refs = test_checkpoints(tmp)
        test_configs(refs["fp8"])
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
