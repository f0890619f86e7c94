#!/usr/bin/env python3
"""Mixed-precision `quantize` outputs in a layout every per-module loader reads (issue 19).

On stories260K (FFN width 172: the MLP linears cannot hold INT4 groups, so RTN INT4 g32 mixes INT4 g32,
INT8 g32 and INT8 per-channel linears):
- `checkpoint_format: auto` writes compressed-tensors `pack-quantized` when precisions differ, GPTQ when
  they do not; the summary says which loaders read the output.
- config.json's quantization_config is what vLLM's compressed-tensors parser needs: every quantized linear
  matched by exactly one config group (exact name or "re:" regex, re.match), fused parts (q/k/v, gate/up)
  in one group, the 16-bit linears and lm_head under `ignore`, weight-only integer args.
- An unpacker written here from compressed-tensors' pack_quantized.py (not from our C++) dequantizes every
  linear: within a rounding step of the source weights, bit-equal to the GPTQ-layout output of
  the same run (numpy GPTQ unpacker of test_quant_packing), and bit-equal to what our engine loads, which
  generates the same greedy text from both layouts.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

sys.path.insert(0, str(Path(__file__).parent))
from test_quant_packing import BIN, LINEARS, STORIES, TOOL, check, failures, gptq_unpack, run  # noqa: E402


def quantize(out, *args):
    res = subprocess.run([str(BIN), "quantize", "--model_path", str(STORIES), "--output_path", str(out), "--no-eval",
                          "--num_samples", "8", "--max_seq_len", "64", *args], capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"quantize {args}: {res.stderr}")
    return res.stdout


def tensors(d):
    out = {}
    for f in sorted(d.glob("*.safetensors")):
        out.update(load_file(str(f)))
    return out


def name_matches(target, name):
    """compressed-tensors / vLLM: "re:<regex>" is re.match, anything else is equality."""
    return re.match(target[3:], name) is not None if target.startswith("re:") else target == name


# ---- compressed-tensors pack-quantized, from compressors/quantized_compressors/pack_quantized.py
def ct_unpack(words, bits, length, axis):
    """int32 words -> unsigned codes: code i of a word sits in bits [bits*i, bits*(i+1)); word k along `axis`
    holds elements k*pf .. k*pf+pf-1 of that axis; trailing padding is cut to `length`."""
    pf, mask = 32 // bits, (1 << bits) - 1
    w = words.view(np.uint32)
    parts = [(w >> np.uint32(bits * i)) & np.uint32(mask) for i in range(pf)]
    if axis == 1:
        u = np.stack(parts, axis=2).reshape(w.shape[0], -1)[:, :length]
    else:
        u = np.stack(parts, axis=1).reshape(-1, w.shape[1])[:length, :]
    return u.astype(np.int64)


def ct_dequantize(t, module, args):
    bits = args["num_bits"]
    out, inp = (int(v) for v in t[module + ".weight_shape"])
    offset = 1 << (bits - 1)
    q = ct_unpack(t[module + ".weight_packed"], bits, inp, 1) - offset  # signed values
    scale = t[module + ".weight_scale"].astype(np.float32)
    groups = scale.shape[1]
    zp = np.zeros((out, groups), np.int64)
    if not args["symmetric"]:
        zp = ct_unpack(t[module + ".weight_zero_point"], bits, out, 0) - offset
    G = inp if args["strategy"] == "channel" else args["group_size"]
    col_group = np.arange(inp) // G
    deq = (q - zp[:, col_group]).astype(np.float32) * scale[:, col_group]
    return deq, scale[:, col_group], (out, inp)


def module_names(n_layers):
    return [f"model.layers.{i}.{hf}" for i in range(n_layers) for hf in LINEARS.values()]


def check_vllm_config(qc, names, t, label):
    """What vLLM's CompressedTensorsConfig.from_config and get_scheme need of quantization_config."""
    check(qc.get("quant_method") == "compressed-tensors" and qc.get("format") == "pack-quantized"
          and qc.get("quantization_status") == "compressed", f"{label}: quant_method compressed-tensors, format pack-quantized, compressed")
    groups = qc["config_groups"]
    arg_problems = []
    for g, spec in groups.items():
        w = spec["weights"]
        ok = (w["num_bits"] in (4, 8) and w["type"] == "int" and w["dynamic"] is False and w.get("actorder") is None
              and spec.get("input_activations") is None and isinstance(w["symmetric"], bool)
              and ((w["strategy"] == "group" and isinstance(w["group_size"], int) and w["group_size"] > 0)
                   or (w["strategy"] == "channel" and w["group_size"] is None)))
        if not ok:
            arg_problems.append(g)
    check(not arg_problems, f"{label}: every group is weight-only int4/int8 per group or channel" + (f": {arg_problems}" if arg_problems else ""))
    check("lm_head" in qc["ignore"], f"{label}: lm_head under ignore")
    bad, owner = [], {}
    for name in names:
        matched = [g for g, spec in groups.items() if any(name_matches(x, name) for x in spec["targets"])]
        ignored = any(name_matches(x, name) for x in qc["ignore"])
        if name + ".weight_packed" in t:
            if len(matched) != 1 or ignored:
                bad.append(f"{name}: groups {matched}, ignored {ignored}")
            else:
                owner[name] = matched[0]
        elif not ignored or matched or name + ".weight" not in t:
            bad.append(f"{name}: 16-bit but groups {matched}, ignored {ignored}")
    check(not bad, f"{label}: each of {len(names)} linears matched by exactly one group or ignored" + (f": {bad[:4]}" if bad else ""))
    fused_bad = []
    for name in names:
        for parts in (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj")):
            if name.endswith("." + parts[0]):
                stem = name[: -len(parts[0])]
                if len({owner.get(stem + p, "ignore") for p in parts}) != 1:
                    fused_bad.append(stem + "/".join(parts))
    check(not fused_bad, f"{label}: fused q/k/v and gate/up parts share one group (vLLM loads them as one layer)"
          + (f": {fused_bad}" if fused_bad else ""))
    return owner


def test_mixed(tmp, ref, n_layers, sym):
    label = "sym" if sym else "asym"
    extra = ["--skip_layers", "model.layers.4.*"] if sym else ["--no-sym"]  # 16-bit linears go under `ignore`
    ct_dir, gptq_dir = tmp / f"ct-{label}", tmp / f"gptq-{label}"
    out = quantize(ct_dir, "--quant_method", "rtn", "--group_size", "32", *extra)
    out_g = quantize(gptq_dir, "--quant_method", "rtn", "--group_size", "32", "--checkpoint_format", "gptq", *extra)
    check("layout: compressed-tensors-pack-quantized; loads in: vLLM, Transformers (compressed-tensors), model-optimizer" in out,
          f"{label}: auto picks compressed-tensors for mixed precisions and the summary names its loaders")
    check("loads in: vLLM, GPTQModel, model-optimizer; not Transformers" in out_g, f"{label}: forced GPTQ says Transformers cannot read it")
    manifest = json.loads((ct_dir / "model-optimizer.json").read_text())
    check(manifest["format"] == "compressed-tensors-pack-quantized" and "Transformers" in manifest["loads_in"],
          f"{label}: manifest format and loads_in")
    check(not (ct_dir / "quantize_config.json").exists(), f"{label}: no GPTQ quantize_config.json beside a compressed-tensors config")

    qc = json.loads((ct_dir / "config.json").read_text())["quantization_config"]
    t, tg = tensors(ct_dir), tensors(gptq_dir)
    gqc = json.loads((gptq_dir / "config.json").read_text())["quantization_config"]
    names = module_names(n_layers)
    owner = check_vllm_config(qc, names, t, label)
    precisions = {(g["weights"]["num_bits"], g["weights"]["group_size"]) for g in qc["config_groups"].values()}
    check(len(precisions) >= 2, f"{label}: the run mixes precisions: {sorted(precisions, key=str)}")

    not_equal, too_far, expected = [], [], {}
    for name in names:
        if name not in owner:
            continue
        args = qc["config_groups"][owner[name]]["weights"]
        deq, scale, shape = ct_dequantize(t, name, args)
        if t[name + ".weight_packed"].dtype != np.int32 or t[name + ".weight_scale"].dtype != np.float16:
            not_equal.append(f"{name}: dtypes")
        # Rounding gives half a step; the scale's f16 rounding (2^-11 relative) adds up to 2^bits * 2^-11 steps
        # at the largest codes; asymmetric zeros are rounded too, so the clamped end can lose another half step.
        w = ref[name + ".weight"]
        bound = (0.5 if args["symmetric"] else 1.0) + 2.0 ** (args["num_bits"] - 11)
        if w.shape != shape or np.any(np.abs(deq - w) > bound * scale + 1e-7):
            too_far.append(f"{name} (max err/scale {np.max(np.abs(deq - w) / scale):.3f})")
        # The same linear in the GPTQ layout of the same run: GPTQModel `dynamic` rules give its bits.
        bits = args["num_bits"]
        q, z, s = gptq_unpack({k: tg[f"{name}.{k}"] for k in ("qweight", "qzeros", "scales")}, bits, not gqc.get("checkpoint_format") == "gptq_v2")
        g_idx = tg[name + ".g_idx"]
        gdeq = (q.astype(np.float32) - z[:, g_idx].astype(np.float32)) * s[:, g_idx].astype(np.float32)
        if gdeq.tobytes() != deq.tobytes():
            not_equal.append(name)
        expected[name] = deq
    check(not too_far, f"{label}: {len(owner)} linears dequantize within a rounding step of the source weights" + (f": {too_far[:3]}" if too_far else ""))
    check(not not_equal, f"{label}: every linear equals the GPTQ-layout output of the same run bit for bit" + (f": {not_equal[:3]}" if not_equal else ""))
    floats = [n for n in names if n not in owner]
    check(len(floats) == (7 if sym else 0) and all(np.array_equal(t[n + ".weight"], tg[n + ".weight"]) for n in floats),
          f"{label}: {len(floats)} 16-bit linears (skip_layers) as in the GPTQ output")

    # Our engine reads the new layout to the same weights, in the same representation as the GPTQ layout.
    listed, listed_g = json.loads(run(TOOL, "list", ct_dir)), json.loads(run(TOOL, "list", gptq_dir))
    check(listed == listed_g, f"{label}: the engine holds both layouts in the same representations")
    engine_bad = []
    gguf_of = {f"model.layers.{i}.{hf}": f"blk.{i}.{gg}" for i in range(n_layers) for gg, hf in LINEARS.items()}
    for name, deq in expected.items():
        f = tmp / "w.f32"
        run(TOOL, "linear", ct_dir, gguf_of[name], f)
        if np.fromfile(f, np.float32).reshape(deq.shape).tobytes() != deq.tobytes():
            engine_bad.append(name)
    check(not engine_bad, f"{label}: the engine's linears equal the independent unpacker bit for bit" + (f": {engine_bad[:3]}" if engine_bad else ""))
    gen = [run(BIN, "generate", d, "--max-tokens", "32").decode() for d in (ct_dir, gptq_dir)]
    check(gen[0] == gen[1] and len(gen[0]) > 0, f"{label}: same greedy text from both layouts: {gen[0][:60]!r}")


def test_uniform(tmp):
    d = tmp / "uniform"
    out = quantize(d, "--quant_method", "rtn", "--bits", "8", "--group_size", "-1", "--sensitivity_threshold", "0")
    qc = json.loads((d / "config.json").read_text())["quantization_config"]
    check(qc["quant_method"] == "gptq" and "dynamic" not in qc and (d / "quantize_config.json").exists(),
          "uniform INT8 per-channel: auto keeps the GPTQ layout (no dynamic rules)")
    check("layout: gptq-v1; loads in: vLLM, Transformers (GPTQ), model-optimizer" in out, "uniform: the summary names GPTQ's loaders")
    res = subprocess.run([str(BIN), "quantize", "--model_path", str(STORIES), "--output_path", str(tmp / "awq-ct"), "--quant_method", "awq",
                          "--checkpoint_format", "compressed-tensors", "--no-eval"], capture_output=True, text=True)
    check(res.returncode != 0 and "checkpoint_format: 'compressed-tensors' applies to quant_method rtn and gptq" in res.stderr,
          f"awq with checkpoint_format compressed-tensors is refused by name: {res.stderr.strip()[-160:]!r}")


def main():
    if not STORIES.exists():
        print(f"skipped: {STORIES} not found")
        return 77
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        base = tmp / "stories-f32"
        run(BIN, "convert", STORIES, base)
        ref = load_file(str(base / "model.safetensors"))
        n_layers = json.loads((base / "config.json").read_text())["num_hidden_layers"]
        test_mixed(tmp, ref, n_layers, sym=True)
        test_mixed(tmp, ref, n_layers, sym=False)
        test_uniform(tmp)
    print(f"{len(failures)} check(s) failed" if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
