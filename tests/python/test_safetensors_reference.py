#!/usr/bin/env python3
"""mo::st (safetensors read/write) against the `safetensors` package (0.8) and huggingface_hub.

- Files we write are byte-identical to what the package writes for the same tensors and metadata
  (safetensors.serialize with TensorSpec for every dtype, safetensors.numpy.save_file for numpy
  ones) and load in it with identical arrays. With several metadata keys the package writes them in
  hash order, so there only the parsed header and the data bytes are compared.
- Files the package writes (numpy dtypes via save_file; BF16 and F8 from raw bytes) load in ours
  with identical dtype, shape, bytes and metadata.
- Sharding matches huggingface_hub's split_state_dict_into_shards_factory; shards are the package's
  bytes and the index is Transformers' json.dumps(index, indent=2, sort_keys=True) + "\\n".
- A few hundred mutated files: the package and we accept and reject the same ones, except where we
  are stricter on purpose (duplicate keys, dtypes we do not support, dimensions above INT64_MAX).
"""
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import safetensors
from safetensors import TensorSpec, deserialize, safe_open, serialize, serialize_file
from safetensors.numpy import load_file, save_file
from huggingface_hub.serialization import split_state_dict_into_shards_factory

TOOLS = Path(os.environ["MO_TOOLS_DIR"])
DUMP = TOOLS / "mo_tool_safetensors_dump"
WRITE = TOOLS / "mo_tool_safetensors_write"

# Our dtype name -> (the package's TensorSpec dtype, numpy dtype or None, bytes per element).
DTYPES = {
    "F64": ("float64", np.float64, 8), "F32": ("float32", np.float32, 4), "F16": ("float16", np.float16, 2),
    "BF16": ("bfloat16", None, 2), "F8_E4M3": ("float8_e4m3fn", None, 1), "F8_E5M2": ("float8_e5m2", None, 1),
    "I64": ("int64", np.int64, 8), "I32": ("int32", np.int32, 4), "I16": ("int16", np.int16, 2),
    "I8": ("int8", np.int8, 1), "U8": ("uint8", np.uint8, 1), "BOOL": ("bool", np.bool_, 1),
    "U64": ("uint64", np.uint64, 8), "U32": ("uint32", np.uint32, 4), "U16": ("uint16", np.uint16, 2),
}

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def run(tool, *args):
    res = subprocess.run([str(tool), *map(str, args)], capture_output=True)
    if res.returncode != 0:
        raise RuntimeError(f"{tool.name} {' '.join(map(str, args))}: {res.stderr.decode()}")
    return res.stdout


def make_tensor(name, dtype, shape, rng):
    """(name, dtype, shape, bytes) with random contents valid for the dtype."""
    n = int(np.prod(shape, dtype=np.int64)) * DTYPES[dtype][2]
    data = bytes(rng.getrandbits(8) for _ in range(n))
    if dtype == "BOOL":
        data = bytes(b & 1 for b in data)
    return (name, dtype, list(shape), data)


def ours_write(tensors, metadata, out, max_shard_bytes=None):
    spec = {"tensors": [{"name": n, "dtype": d, "shape": s, "hex": b.hex()} for n, d, s, b in tensors]}
    if metadata:
        spec["metadata"] = metadata
    if max_shard_bytes is not None:
        spec["max_shard_bytes"] = max_shard_bytes
    spec_path = Path(out).parent / (Path(out).name + ".spec.json")
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    run(WRITE, spec_path, out)


def ours_read(path):
    return json.loads(run(DUMP, path))


def specs(tensors):
    """TensorSpecs for the package; the numpy buffers they point into are returned to keep alive."""
    keep, out = [], {}
    for name, dtype, shape, data in tensors:
        buf = np.frombuffer(data, dtype=np.uint8).copy() if data else np.zeros(1, np.uint8)
        keep.append(buf)
        out[name] = TensorSpec(dtype=DTYPES[dtype][0], shape=shape, data_ptr=buf.ctypes.data, data_len=len(data))
    return out, keep


def reference_bytes(tensors, metadata):
    spec, keep = specs(tensors)
    out = bytes(serialize(spec, metadata=metadata or None))
    del keep
    return out


def split_file(blob):
    n = struct.unpack("<Q", blob[:8])[0]
    return json.loads(blob[8:8 + n]), blob[8 + n:]


def same_as_reference_load(blob, tensors, what):
    got = {name: info for name, info in deserialize(blob)}
    ok = set(got) == {t[0] for t in tensors}
    for name, dtype, shape, data in tensors:
        info = got.get(name)
        ok = ok and info is not None and info["dtype"] == dtype and list(info["shape"]) == shape
        ok = ok and bytes(info["data"]) == data
    check(ok, f"{what}: the package reads back every tensor's dtype, shape and bytes")


def check_ours_written(tmp, rng):
    every = [make_tensor(f"t.{d.lower()}", d, (3, 5), rng) for d in DTYPES]
    every += [make_tensor("scalar", "F32", (), rng), make_tensor("empty", "BF16", (0, 7), rng),
              make_tensor("model.layers.0.self_attn.q_proj.weight", "BF16", (8, 16), rng)]
    odd_names = [make_tensor(n, "F16", (2,), rng) for n in
                 ["é", "a\"b\\c", "tab\there", "nl\nx\x01\x1f", "del\x7f", "😀", "/slash", "", "z" * 300]]
    cases = [
        ("every dtype, one metadata key", every, {"format": "pt"}),
        ("every dtype, no metadata", every, None),
        ("escaped and unicode names", odd_names, {"k\x01é": "v\n\"😀"}),
        ("no tensors", [], None),
        ("no tensors, metadata", [], {"format": "np"}),
    ]
    for i, (what, tensors, metadata) in enumerate(cases):
        path = tmp / f"ours_{i}.safetensors"
        ours_write(tensors, metadata, path)
        blob = path.read_bytes()
        check(blob == reference_bytes(tensors, metadata), f"{what}: byte-identical to safetensors.serialize")
        same_as_reference_load(blob, tensors, what)

    # Several metadata keys: the package writes them in hash order, so compare parsed.
    metadata = {"zeta": "1", "alpha": "2", "mid": "3", "format": "pt"}
    path = tmp / "ours_meta.safetensors"
    ours_write(every, metadata, path)
    ours_header, ours_data = split_file(path.read_bytes())
    ref_header, ref_data = split_file(reference_bytes(every, metadata))
    check(ours_header == ref_header and ours_data == ref_data,
          "four metadata keys: same header JSON and data bytes as safetensors.serialize")
    check(list(ours_header["__metadata__"]) == sorted(metadata), "four metadata keys: ours are written sorted")
    with safe_open(str(path), framework="numpy") as f:
        check(f.metadata() == metadata, "four metadata keys: safe_open reads our metadata")

    # numpy arrays: identical to safetensors.numpy.save_file, and load_file gives the same arrays.
    arrays = {f"a.{d}": np.frombuffer(make_tensor("x", d, (4, 3), rng)[3], dtype=npd).reshape(4, 3)
              for d, (_, npd, _) in DTYPES.items() if npd is not None}
    arrays["scalar"] = np.array(3.5, dtype=np.float32)
    arrays["empty"] = np.zeros((0, 2), dtype=np.int16)
    as_tensors = [(k, next(d for d, v in DTYPES.items() if v[1] == a.dtype.type), list(a.shape), a.tobytes())
                  for k, a in arrays.items()]
    ours_path, ref_path = tmp / "ours_np.safetensors", tmp / "ref_np.safetensors"
    ours_write(as_tensors, {"format": "np"}, ours_path)
    save_file(arrays, str(ref_path), metadata={"format": "np"})
    check(ours_path.read_bytes() == ref_path.read_bytes(), "numpy arrays: byte-identical to numpy.save_file")
    loaded = load_file(str(ours_path))
    check(set(loaded) == set(arrays) and all(
        loaded[k].dtype == a.dtype and loaded[k].shape == a.shape and np.array_equal(loaded[k], a)
        for k, a in arrays.items()), "numpy arrays: numpy.load_file gives identical arrays")


def check_reference_written(tmp, rng):
    arrays = {f"np.{d}": np.frombuffer(make_tensor("x", d, (2, 3, 4), rng)[3], dtype=npd).reshape(2, 3, 4)
              for d, (_, npd, _) in DTYPES.items() if npd is not None}
    arrays["scalar"] = np.array(-1, dtype=np.int64)
    arrays["empty"] = np.zeros((5, 0), dtype=np.float32)
    path = tmp / "ref_numpy.safetensors"
    metadata = {"format": "np", "note": "written by safetensors.numpy"}
    save_file(arrays, str(path), metadata=metadata)
    got = ours_read(path)
    ok = got["metadata"] == metadata and set(got["tensors"]) == set(arrays)
    for k, a in arrays.items():
        t = got["tensors"].get(k, {})
        dtype = next(d for d, v in DTYPES.items() if v[1] == a.dtype.type)
        ok = ok and t.get("dtype") == dtype and t.get("shape") == list(a.shape) and t.get("hex") == a.tobytes().hex()
    check(ok, "numpy.save_file file: ours reads every dtype, shape, byte and the metadata")

    raw = [make_tensor("w.bf16", "BF16", (16, 8), rng), make_tensor("w.f8", "F8_E4M3", (8, 8), rng),
           make_tensor("w.f8e5", "F8_E5M2", (3,), rng), make_tensor("scale", "F32", (8,), rng)]
    spec, keep = specs(raw)
    path = tmp / "ref_raw.safetensors"
    serialize_file(spec, str(path), metadata={"quant": "fp8"})
    del keep
    got = ours_read(path)
    ok = got["metadata"] == {"quant": "fp8"} and set(got["tensors"]) == {t[0] for t in raw}
    for name, dtype, shape, data in raw:
        t = got["tensors"].get(name, {})
        ok = ok and t.get("dtype") == dtype and t.get("shape") == shape and t.get("hex") == data.hex()
    check(ok, "serialize_file file with BF16, F8_E4M3 and F8_E5M2: ours reads identical bytes")


def check_sharding(tmp, rng):
    # Sizes chosen so the split has a tensor above the limit and shards of 1 and 2 tensors.
    tensors = [make_tensor(f"model.layers.{i}.w", "F32", (n,), rng) for i, n in
               enumerate([100, 100, 400, 50, 200, 100, 10, 260])]
    max_bytes = 1000
    metadata = {"format": "pt"}
    out = tmp / "sharded"
    out.mkdir()
    ours_write(tensors, metadata, out, max_shard_bytes=max_bytes)
    by_name = {t[0]: t for t in tensors}
    split = split_state_dict_into_shards_factory(
        {t[0]: t for t in tensors}, get_storage_size=lambda t: len(t[3]),
        filename_pattern="model{suffix}.safetensors", max_shard_size=max_bytes)
    files = sorted(p.name for p in out.iterdir())
    check(split.is_sharded and files == sorted([*split.filename_to_tensors, "model.safetensors.index.json"]),
          f"sharding: same {len(split.filename_to_tensors)} shard files as huggingface_hub")
    for name, names in split.filename_to_tensors.items():
        shard = [by_name[n] for n in names]
        check((out / name).exists() and (out / name).read_bytes() == reference_bytes(shard, metadata),
              f"sharding: {name} holds {names}, byte-identical to safetensors.serialize")
    index = {"metadata": {"total_size": sum(len(t[3]) for t in tensors)}, "weight_map": split.tensor_to_filename}
    check((out / "model.safetensors.index.json").read_text(encoding="utf-8") ==
          json.dumps(index, indent=2, sort_keys=True) + "\n", "sharding: index text as Transformers writes it")
    for target in (out, out / "model.safetensors.index.json"):
        got = ours_read(target)
        check(set(got["tensors"]) == set(by_name) and got["total_bytes"] == index["metadata"]["total_size"] and all(
            got["tensors"][n]["hex"] == t[3].hex() for n, t in by_name.items()),
            f"sharding: Model::open({target.name}) reads every tensor back")

    # A sharded model as huggingface_hub writes it (json.dump(index, indent=2), unsorted) loads too.
    hub = tmp / "hub"
    hub.mkdir()
    arrays = {f"h.{i}": np.arange(i * 40, (i + 1) * 40, dtype=np.float32) for i in range(5)}
    split = split_state_dict_into_shards_factory(arrays, get_storage_size=lambda a: a.nbytes,
                                                 filename_pattern="model{suffix}.safetensors", max_shard_size=400)
    for name, names in split.filename_to_tensors.items():
        save_file({n: arrays[n] for n in names}, str(hub / name), metadata={"format": "np"})
    with open(hub / "model.safetensors.index.json", "w") as f:
        json.dump({"metadata": split.metadata, "weight_map": split.tensor_to_filename}, f, indent=2)
    got = ours_read(hub)
    check(len(got["files"]) == len(split.filename_to_tensors) and all(
        got["tensors"][k]["hex"] == a.tobytes().hex() for k, a in arrays.items()),
        f"huggingface_hub-style {len(split.filename_to_tensors)}-shard model: ours reads every tensor")


def mutate(base, header, rng):
    """One corrupted copy of `base` (a file whose header text is `header`)."""
    def assemble(h, fix=True):
        hb = h.encode("utf-8", "surrogatepass") if isinstance(h, str) else h
        n = len(hb) if fix else len(header.encode())
        return struct.pack("<Q", n) + hb + base[8 + len(header.encode()):]
    kind = rng.randrange(9)
    hb = header.encode()
    if kind == 0:
        return base[:rng.randrange(len(base))]
    if kind == 1:
        b = bytearray(base)
        for _ in range(rng.randint(1, 3)):
            b[rng.randrange(8 + len(hb))] = rng.choice([rng.randrange(256), rng.randrange(32, 127)])
        return bytes(b)
    if kind == 2:
        b = bytearray(base)
        b[:8] = struct.pack("<Q", rng.choice([0, 1, len(hb) - 1, len(hb) + 1, len(base), 100_000_000, 100_000_001,
                                              2**63, 2**64 - 1]))
        return bytes(b)
    if kind == 3:
        spans = [(i, j) for i, j in _digit_runs(header)]
        i, j = rng.choice(spans)
        other = rng.choice(spans)
        value = rng.choice(["0", "1", "-1", "1.0", "1e2", "00", "18446744073709551615", "18446744073709551616",
                            "9223372036854775808", header[other[0]:other[1]], str(rng.randrange(10**6))])
        return assemble(header[:i] + value + header[j:], fix=rng.random() < 0.8)
    if kind == 4:
        names = ["F64", "F32", "F16", "BF16", "F8_E4M3", "F8_E5M2", "F8_E8M0", "I64", "I32", "I16", "I8", "U8",
                 "BOOL", "U64", "U32", "U16", "C64", "F4", "f32", "", "Q4"]
        spots = [k for k in range(len(header)) if header.startswith('"dtype":"', k)]
        k = rng.choice(spots) + len('"dtype":"')
        end = header.index('"', k)
        return assemble(header[:k] + rng.choice(names) + header[end:])
    if kind == 5:
        k = rng.randrange(len(header) + 1)
        tok = rng.choice(["{", "}", "[", "]", ",", ":", '"', "\\", "\\u00e9", "\\ud800", "null", "1", " ", "\t",
                          '"x":1,', '"__metadata__":{},', '"__metadata__":null,', "\u00e9"])
        return assemble(header[:k] + tok + header[k:], fix=rng.random() < 0.8)
    if kind == 6:
        k = rng.randrange(len(header))
        return assemble(header[:k] + header[k + rng.randint(1, 8):], fix=rng.random() < 0.8)
    if kind == 7:
        # Duplicate one tensor entry under another tensor's name (rename collision).
        names = [m for m in json.loads(header) if m != "__metadata__"]
        a, b = rng.sample(names, 2)
        return assemble(header.replace(f'"{a}":', f'"{b}":', 1))
    return base + bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))


def _digit_runs(s):
    i = 0
    while i < len(s):
        if s[i].isdigit():
            j = i
            while j < len(s) and s[j].isdigit():
                j += 1
            yield i, j
            i = j
        else:
            i += 1


def check_same_verdicts(tmp, rng):
    tensors = [make_tensor("emb", "F32", (8, 4), rng), make_tensor("norm", "BF16", (4,), rng),
               make_tensor("ids", "I64", (3,), rng), make_tensor("mask", "BOOL", (5,), rng),
               make_tensor("zero", "F16", (0,), rng), make_tensor("q", "F8_E4M3", (2, 2), rng)]
    base = reference_bytes(tensors, {"format": "pt"})
    n = struct.unpack("<Q", base[:8])[0]
    header = base[8:8 + n].decode()
    mutants = tmp / "mutants"
    mutants.mkdir()
    paths, blobs = [], []
    for i in range(600):
        blob = mutate(base, header, rng)
        p = mutants / f"m{i:04d}.safetensors"
        p.write_bytes(blob)
        paths.append(p)
        blobs.append(blob)
    ours = [json.loads(line) for line in run(DUMP, "--check", *paths).decode().splitlines()]
    stricter = ("duplicate", "unknown or unsupported dtype", "above INT64_MAX")
    agree = stricter_count = 0
    disagreements = []
    for p, blob, o in zip(paths, blobs, ours):
        try:
            deserialize(blob)
            ref_ok = True
        except Exception:  # noqa: BLE001 - any rejection by the package
            ref_ok = False
        if o["ok"] == ref_ok:
            agree += 1
        elif ref_ok and any(s in o["error"] for s in stricter):
            stricter_count += 1
        else:
            disagreements.append(f"{p.name}: package {'loads' if ref_ok else 'rejects'}, ours "
                                 f"{'loads' if o['ok'] else 'says ' + o['error']}")
        if not o["ok"] and not o["error"].startswith(str(p) + ": "):
            disagreements.append(f"{p.name}: our error does not start with the path: {o['error']}")
    loads = sum(o["ok"] for o in ours)
    print(f"     600 mutants: we load {loads}, reject {600 - loads}; agree with the package on {agree}, "
          f"stricter on purpose on {stricter_count}")
    for d in disagreements[:20]:
        print("     " + d)
    check(not disagreements, "mutated files: the package and we accept and reject the same ones")


def main():
    print(f"safetensors {safetensors.__version__}")
    rng = random.Random(1234)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        check_ours_written(tmp, rng)
        check_reference_written(tmp, rng)
        check_sharding(tmp, rng)
        check_same_verdicts(tmp, rng)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
