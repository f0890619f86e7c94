#!/usr/bin/env python3
"""Our GPTQ (mo::quant::gptq_quantize) against a numpy transcription of AutoGPTQ's GPTQ.fasterquant.

The reference below follows auto_gptq/quantization/gptq.py and quantizer.py line by line (dead columns,
dampening, Cholesky of the inverse Hessian, act-order with static groups, lazy blocks of 128, group
parameters re-fitted at each group start from the block-updated W), with one documented difference that
we share on purpose: the scale is rounded to f16 (what the checkpoint stores) before codes are computed.
Our sweep updates weights in float32 (as torch does) and the reference in float64, so a code sitting on
a rounding tie may differ: we require >= 99% identical codes and the same output error within 1%, and
both below round-to-nearest's.
"""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

TOOL = Path(os.environ["MO_TOOLS_DIR"]) / "mo_tool_dump_weights"
failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def find_params(x, bits, sym):
    """quantizer.find_params(x, weight=True) for rows of x, scale rounded to f16."""
    maxq = 2 ** bits - 1
    xmin = np.minimum(x.min(axis=1), 0)
    xmax = np.maximum(x.max(axis=1), 0)
    if sym:
        xmax = np.maximum(np.abs(xmin), xmax)
        xmin = np.where(xmin < 0, -xmax, xmin)
    both0 = (xmin == 0) & (xmax == 0)
    xmin, xmax = np.where(both0, -1, xmin), np.where(both0, 1, xmax)
    scale = ((xmax - xmin) / maxq).astype(np.float16).astype(np.float64)
    zero = np.full_like(scale, (maxq + 1) / 2) if sym else np.round(-xmin / scale)
    return scale, zero


def quantize(w, scale, zero, bits):
    q = np.clip(np.round(w / scale) + zero, 0, 2 ** bits - 1)
    return q, scale * (q - zero)


def fasterquant(W, H, bits, group, sym, actorder, static_groups, blocksize=128, percdamp=0.01):
    W, H = W.astype(np.float64).copy(), H.copy()
    rows, cols = W.shape
    scale, zero = find_params(W, bits, sym)
    dead = np.diag(H) == 0
    H[dead, dead] = 1
    W[:, dead] = 0
    groups = []
    if static_groups and group != -1:
        groups = [find_params(W[:, i:i + group], bits, sym) for i in range(0, cols, group)]
    perm = np.arange(cols)
    if actorder:
        perm = np.argsort(-np.diag(H), kind="stable")
        W, H = W[:, perm], H[perm][:, perm]
    H[np.diag_indices(cols)] += percdamp * np.mean(np.diag(H))
    Hinv = np.linalg.cholesky(np.linalg.inv(H)).T  # upper factor U, H^-1 = U^T U
    Q, D = np.zeros_like(W), np.zeros_like(W)
    gsel = np.zeros(cols, dtype=np.int64)
    for i1 in range(0, cols, blocksize):
        i2 = min(i1 + blocksize, cols)
        W1, Err1, Hinv1 = W[:, i1:i2].copy(), np.zeros((rows, i2 - i1)), Hinv[i1:i2, i1:i2]
        for i in range(i2 - i1):
            c = i1 + i
            if group != -1:
                if not static_groups:
                    if c % group == 0:
                        scale, zero = find_params(W[:, c:c + group], bits, sym)
                    gsel[c] = c // group
                else:
                    scale, zero = groups[perm[c] // group]
                    gsel[c] = perm[c] // group
            w, d = W1[:, i], Hinv1[i, i]
            q, deq = quantize(w, scale, zero, bits)
            Q[:, c], D[:, c] = q, deq
            err = (w - deq) / d
            W1[:, i:] -= np.outer(err, Hinv1[i, i:])
            Err1[:, i] = err
        W[:, i2:] -= Err1 @ Hinv[i1:i2, i2:]
    inv = np.argsort(perm)
    return Q[:, inv].astype(np.uint8), gsel[inv], D[:, inv]


def dequant(d, group, cols):
    g = d["g_idx"] if group != -1 else np.zeros(cols, dtype=np.int32)
    s, z = d["scales"].astype(np.float64), d["zeros"].astype(np.float64)
    return (d["q"].astype(np.float64) - z[:, g]) * s[:, g]


def rtn(W, bits, group, sym):
    out = np.empty_like(W, dtype=np.float64)
    g = W.shape[1] if group == -1 else group
    for c in range(0, W.shape[1], g):
        s, z = find_params(W[:, c:c + g], bits, sym)
        out[:, c:c + g] = quantize(W[:, c:c + g], s[:, None], z[:, None], bits)[1]
    return out


def out_err(W, Wq, X):
    return float(np.sum(((W.astype(np.float64) - Wq) @ X.T.astype(np.float64)) ** 2))


def main():
    rng = np.random.default_rng(7)
    rows, cols, n = 96, 320, 4096
    # Correlated inputs with a few outlier channels and two dead ones, as real activations have.
    A = rng.normal(size=(cols, cols)) / np.sqrt(cols) + np.eye(cols)
    X = (rng.normal(size=(n, cols)) @ A).astype(np.float32)
    X[:, :4] *= 8
    X[:, [17, 250]] = 0
    W = rng.normal(scale=0.05, size=(rows, cols)).astype(np.float32)
    H = 2 / n * (X.astype(np.float64).T @ X.astype(np.float64))
    with tempfile.TemporaryDirectory() as tmp:
        wf, xf = Path(tmp) / "w.f32", Path(tmp) / "x.f32"
        W.tofile(wf)
        X.tofile(xf)
        for bits, group, sym, act, static in [(4, 64, True, False, False), (4, 64, False, False, False), (4, -1, True, False, False),
                                              (4, 32, True, True, True), (8, 128, False, False, False), (4, 128, True, True, False)]:
            name = f"{bits}-bit group {group} {'sym' if sym else 'asym'}{' act-order' if act else ''}{' static' if static else ''}"
            out = Path(tmp) / "q.safetensors"
            subprocess.run([str(TOOL), "gptq", wf, xf, str(rows), str(cols), str(bits), str(group), str(int(sym)), str(int(act)),
                            str(int(static)), out], check=True)
            ours = load_file(str(out))
            ref_q, ref_g, ref_w = fasterquant(W, H, bits, group, sym, act, static)
            same = float(np.mean(ours["q"] == ref_q))
            check(same >= 0.99, f"{name}: {same:.2%} of codes equal AutoGPTQ's")
            if group != -1:
                check(np.array_equal(ours["g_idx"], ref_g), f"{name}: g_idx equals AutoGPTQ's")
            e_ours = out_err(W, dequant(ours, group, cols), X)
            e_ref = out_err(W, ref_w, X)
            e_rtn = out_err(W, rtn(W, bits, group, sym), X) if not act else None
            check(abs(e_ours / e_ref - 1) < 0.01, f"{name}: output error {e_ours:.4g} vs AutoGPTQ's {e_ref:.4g}")
            if e_rtn is not None:
                check(e_ours < 0.8 * e_rtn, f"{name}: output error {e_ours:.4g} well below round-to-nearest's {e_rtn:.4g}")
    if failures:
        print(f"{len(failures)} check(s) failed")
        sys.exit(1)


if __name__ == "__main__":
    main()
