"""A GGUF file as plain Python data, written back byte by byte: tests build what gguf-py's writer refuses
(a tensor with a 0 dimension or no dimensions, an empty, NUL-holding or 1 MB tensor name) from a real model.

    m = GgufModel(STORIES)
    m.set("llama.block_count", u32(4))
    m.tensor("blk.0.attn_q.weight")[1] = [64, 0]   # [name, ne, ggml type, data bytes]
    m.write(out)
"""
import struct

from gguf import GGUFReader

ALIGN = 32


def _string(s):
    b = s if isinstance(s, bytes) else s.encode()
    return struct.pack("<Q", len(b)) + b


def u32(v):
    return struct.pack("<II", 4, v)


def i32(v):
    return struct.pack("<Ii", 5, v)


def f32(v):
    return struct.pack("<If", 6, v)


def string(s):
    return struct.pack("<I", 8) + _string(s)


def string_array(items):
    return struct.pack("<IIQ", 9, 8, len(items)) + b"".join(_string(s) for s in items)


def f32_array(items):
    return struct.pack("<IIQ", 9, 6, len(items)) + struct.pack(f"<{len(items)}f", *items)


def i32_array(items):
    return struct.pack("<IIQ", 9, 5, len(items)) + struct.pack(f"<{len(items)}i", *items)


class GgufModel:
    def __init__(self, path):
        r = GGUFReader(str(path))
        self.kv = {}  # key -> encoded value (type + payload)
        for key, field in r.fields.items():
            if key.startswith("GGUF."):
                continue
            raw = b"".join(bytes(p) for p in field.parts)
            self.kv[key] = raw[8 + len(key.encode()):]
        self.tensors = [[t.name, [int(n) for n in t.shape], int(t.tensor_type), t.data.tobytes()] for t in r.tensors]

    def set(self, key, value):
        self.kv[key] = value

    def drop(self, key):
        del self.kv[key]

    def tensor(self, name):
        return next(t for t in self.tensors if t[0] == name)

    def write(self, path):
        out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(self.tensors), len(self.kv)))
        for key, value in self.kv.items():
            out += _string(key) + value
        offset = 0
        for name, ne, ggml_type, data in self.tensors:
            out += _string(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne) + struct.pack("<IQ", ggml_type, offset)
            offset += (len(data) + ALIGN - 1) // ALIGN * ALIGN
        out += bytes(-len(out) % ALIGN)
        for _, _, _, data in self.tensors:
            out += data + bytes(-len(data) % ALIGN)
        with open(path, "wb") as f:
            f.write(out)
        return path
