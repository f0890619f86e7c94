#!/usr/bin/env python3
"""mo::quant::gguf_quantize_row (via mo_tool_gguf_quantize) against llama.cpp's own encoders.

- gguf-py (gguf 0.19): for the types it can quantize (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0), our
  bytes equal gguf.quants.quantize's; for every type we encode, with and without importance,
  gguf.quants.dequantize of our bytes equals our own dequantization bit for bit.
- ggml itself, when PyPI's libggml-python is installed (or MO_LIBGGML_BASE names a libggml-base.so):
  our bytes equal ggml's quantize_<type>(src, dst, nrows, n_per_row, imatrix) for every block type,
  with and without an importance matrix, on many row shapes. Without that library this part is skipped
  (the unit test GgufQuantize.BytesEqualLlamaCppWithAndWithoutImportance keeps golden hashes of it).
"""
import ctypes
import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf.quants import dequantize, quantize

TOOLS = Path(os.environ["MO_TOOLS_DIR"])
BLOCK_TYPES = [Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0, Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K]
GGUF_PY_QUANTIZES = [Q.F32, Q.F16, Q.BF16, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0]
BLOCK = {Q.F32: 1, Q.F16: 1, Q.BF16: 1, Q.Q4_0: 32, Q.Q4_1: 32, Q.Q5_0: 32, Q.Q5_1: 32, Q.Q8_0: 32,
         Q.Q2_K: 256, Q.Q3_K: 256, Q.Q4_K: 256, Q.Q5_K: 256, Q.Q6_K: 256}

failures = []
skipped = []  # parts that could not run: the test then exits 77 (ctest: Skipped) unless something failed


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run_tool(name, *args):
    r = subprocess.run([str(TOOLS / name), *map(str, args)], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{name} {' '.join(map(str, args))}: {r.stderr.strip()}")


def ours(tmp, qtype, x, importance=None):
    """Our bytes for the rows of x ([rows, n_per_row] f32), each quantized on its own."""
    src, dst = tmp / "x.f32", tmp / "q.bin"
    np.ascontiguousarray(x, dtype=np.float32).tofile(src)
    args = [qtype.value, x.shape[1], src, dst]
    if importance is not None:
        np.ascontiguousarray(importance, dtype=np.float32).tofile(tmp / "imp.f32")
        args.append(tmp / "imp.f32")
    run_tool("mo_tool_gguf_quantize", *args)
    return np.fromfile(dst, dtype=np.uint8)


def our_dequant(tmp, qtype, raw):
    src, dst = tmp / "blocks.bin", tmp / "blocks.f32"
    raw.tofile(src)
    run_tool("mo_tool_gguf_dequant", "blocks", qtype.value, src, dst)
    return np.fromfile(dst, dtype=np.float32)


def first_difference(a, b, unit):
    """'' when equal, else where the first differing block (of `unit` bytes) is."""
    if a.shape != b.shape:
        return f"{a.size} bytes vs {b.size}"
    diff = np.flatnonzero(a != b)
    if diff.size == 0:
        return ""
    blocks = np.unique(diff // unit)
    return f"{blocks.size} of {a.size // unit} blocks differ, first block {int(blocks[0])}"


def same_floats(a, b):
    a = np.asarray(a, dtype=np.float32).ravel()
    b = np.asarray(b, dtype=np.float32).ravel()
    nan = np.isnan(a) & np.isnan(b)
    return a.shape == b.shape and not ((a.view(np.uint32) != b.view(np.uint32)) & ~nan).any()


def distributions(rng, rows, n):
    """Row sets a quantizer has to get right: typical weights and the edge cases of each search."""
    g = lambda s=1.0: (rng.standard_normal((rows, n)) * s).astype(np.float32)
    d = {"gaussian": g(0.02), "t(2) heavy tails": rng.standard_t(2, (rows, n)).astype(np.float32) * 0.01}
    x = g(0.02)
    x[rng.random((rows, n)) < 0.01] *= 50
    d["1% outliers"] = x
    d["all equal"] = np.full((rows, n), 0.37, np.float32)
    d["zeros"] = np.zeros((rows, n), np.float32)
    d["tiny (1e-6)"] = g(1e-6)
    d["positive"] = np.abs(g()) + np.float32(0.5)
    d["negative"] = -np.abs(g()) - np.float32(1)
    x = g()
    x[rng.random((rows, n)) < 0.9] = 0
    d["90% zeros"] = x
    d["integers"] = rng.integers(-8, 8, (rows, n)).astype(np.float32)
    d["per-block scales 2^-12..2^12"] = (g() * np.exp2(rng.integers(-12, 13, (rows, n // 32, 1))).repeat(32, 1)
                                         .reshape(rows, n)).astype(np.float32)
    d["large (3e4)"] = g(3e4)
    x = g()
    x[:, ::2] = -x[:, 1::2]  # equal magnitudes: ties for the max-magnitude pick
    d["paired +-"] = x
    return d


def importances(rng, n):
    return {"uniform imatrix": rng.uniform(0, 1, n).astype(np.float32),
            "skewed imatrix": (np.abs(rng.standard_normal(n)) ** 4).astype(np.float32),
            "imatrix with zeros": np.where(rng.random(n) < 0.3, 0, rng.uniform(0, 2, n)).astype(np.float32)}


def check_gguf_py(tmp, rng):
    for qtype in GGUF_PY_QUANTIZES:
        bad = []
        for name, x in distributions(rng, 8, 512).items():
            with np.errstate(over="ignore"):  # 3e4 rows overflow f16 scales, as they do in llama.cpp
                ref = np.ascontiguousarray(quantize(x, qtype)).view(np.uint8).ravel()
            where = first_difference(ours(tmp, qtype, x), ref, 1)
            if where:
                bad.append(f"{name}: {where}")
        check(not bad, f"{qtype.name}: bytes equal gguf.quants.quantize on 13 row sets" + (f" ({bad})" if bad else ""))


def check_dequantize_agrees(tmp, rng):
    n = 1024
    for qtype in BLOCK_TYPES:
        bad = []
        imps = [None, *importances(rng, n).values()]
        for name, x in distributions(rng, 4, n).items():
            for imp in imps:
                q = ours(tmp, qtype, x, imp)
                if not same_floats(our_dequant(tmp, qtype, q), dequantize(q, qtype)):
                    bad.append(name)
        check(not bad, f"{qtype.name}: gguf.quants.dequantize of our bytes equals ours" + (f" ({bad})" if bad else ""))


def find_libggml():
    path = os.environ.get("MO_LIBGGML_BASE")
    if not path:
        spec = importlib.util.find_spec("libggml")
        if spec is None or not spec.submodule_search_locations:
            return None
        for d in spec.submodule_search_locations:
            for sub in ("lib64", "lib"):
                p = Path(d) / sub / "libggml-base.so"
                if p.exists():
                    path = str(p)
    return ctypes.CDLL(path) if path else None


def check_ggml(tmp, rng):
    lib = find_libggml()
    if lib is None:
        skipped.append("the ggml comparison: libggml-python is not installed (scripts/install-deps.sh) and MO_LIBGGML_BASE is not set")
        return
    sizes = {Q.Q4_0: 18, Q.Q4_1: 20, Q.Q5_0: 22, Q.Q5_1: 24, Q.Q8_0: 34,
             Q.Q2_K: 84, Q.Q3_K: 110, Q.Q4_K: 144, Q.Q5_K: 176, Q.Q6_K: 210}
    for qtype in BLOCK_TYPES:
        fn_name = "quantize_" + qtype.name.lower().replace("_k", "_K")
        fn = getattr(lib, fn_name)
        fn.restype = ctypes.c_size_t
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
        bad, cases = [], 0
        for n in (256, 768, 4096):
            rows = 4
            imps = {"no imatrix": None, **importances(rng, n)}
            x_sets = distributions(rng, rows, n)
            x_sets["denormal (1e-39)"] = (rng.standard_normal((rows, n)) * 1e-39).astype(np.float32)
            for xname, x in x_sets.items():
                x = np.ascontiguousarray(x)
                for iname, imp in imps.items():
                    ref = np.zeros(rows * n // BLOCK[qtype] * sizes[qtype], np.uint8)
                    fn(x.ctypes.data, ref.ctypes.data, rows, n, None if imp is None else imp.ctypes.data)
                    where = first_difference(ours(tmp, qtype, x, imp), ref, sizes[qtype])
                    cases += 1
                    if where:
                        bad.append(f"n={n} {xname}, {iname}: {where}")
        check(not bad, f"{qtype.name}: bytes equal ggml's {fn_name} in {cases} cases"
              + (f" ({bad[:5]})" if bad else ""))


def main():
    rng = np.random.default_rng(20)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        check_gguf_py(tmp, rng)
        check_dequantize_agrees(tmp, rng)
        check_ggml(tmp, rng)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    if skipped:
        print("skipped: " + "; ".join(skipped))
        return 77
    return 0


if __name__ == "__main__":
    sys.exit(main())
