#!/usr/bin/env python3
"""GGUF <-> Hugging Face tokenizer conversion (mo_tool_tokenizer_export) against the references.

- tokenizer.json written from each llama.cpp vocab GGUF, loaded by HF `tokenizers`, gives the ids of
  llama.cpp's test vectors (X.gguf.inp / X.gguf.out, encoded without special tokens).
- stories260K: the same ids as llama.cpp's SPM algorithm (re-implemented below, checked on the
  llama-spm vectors first) on the TinyStories sample.
- HF -> GGUF -> HF for hf/{llama2,llama3,qwen3}: the GGUF keys name the right model / pre-tokenizer,
  the GGUF (written by gguf-py) converted back gives the original tokenizer's ids, and for llama2
  llama.cpp's algorithm on the derived scores gives them too.
"""
import heapq
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import gguf
from tokenizers import Tokenizer

TOOL = Path(os.environ["MO_TOOLS_DIR"]) / "mo_tool_tokenizer_export"
DATA = Path(os.environ["MO_SHARED_DATA"])
VOCAB = DATA / "tokenizers" / "llama-cpp-vocab"
HF = DATA / "tokenizers" / "hf"
SEP = "\n__ggml_vocab_test__\n"

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)


def read_vectors(stem):
    """(text, ids) pairs, split as llama.cpp's tests/test-tokenizer-0.cpp does."""
    raw = (VOCAB / f"ggml-vocab-{stem}.gguf.inp").read_bytes().decode("utf-8")
    texts = raw.split(SEP)
    if texts and texts[-1] == "":
        texts.pop()
    lines = (VOCAB / f"ggml-vocab-{stem}.gguf.out").read_text(encoding="utf-8").split("\n")
    return [(t, [int(x) for x in o.split()]) for t, o in zip(texts, lines)]


def run_tool(*args):
    res = subprocess.run([str(TOOL), *map(str, args)], capture_output=True)
    if res.returncode != 0:
        raise RuntimeError(f"{TOOL.name} {' '.join(map(str, args))}: {res.stderr.decode()}")
    return res.stdout


def to_hf(gguf_path, out_dir):
    run_tool("to-hf", gguf_path, out_dir)
    return Tokenizer.from_file(str(Path(out_dir) / "tokenizer.json"))


def to_gguf_kv(tokenizer_json, config=None, vocab_size=0):
    args = ["to-gguf-kv", tokenizer_json] + ([config] if config else []) + ["--vocab-size", vocab_size]
    return json.loads(run_tool(*args))


def write_vocab_gguf(kv, path):
    """A vocab-only GGUF holding `kv`, written by llama.cpp's own gguf-py."""
    w = gguf.GGUFWriter(str(path), "llama")
    types = {"string": gguf.GGUFValueType.STRING, "u32": gguf.GGUFValueType.UINT32,
             "i32": gguf.GGUFValueType.INT32, "f32": gguf.GGUFValueType.FLOAT32, "bool": gguf.GGUFValueType.BOOL}
    for e in kv:
        if e["type"] == "array":
            w.add_key_value(e["key"], e["value"], gguf.GGUFValueType.ARRAY, types[e["elem_type"]])
        else:
            w.add_key_value(e["key"], e["value"], types[e["type"]])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()


def gguf_vocab(path):
    r = gguf.GGUFReader(str(path))
    f = r.fields

    def arr(k):
        return [f[k].contents(i) for i in range(len(f[k].data))] if k in f else None

    return arr("tokenizer.ggml.tokens"), arr("tokenizer.ggml.scores"), arr("tokenizer.ggml.token_type")


def llama_cpp_spm_encode(tokens, scores, text):
    """llama.cpp's llm_tokenizer_spm (no special tokens in the text, add_space_prefix on)."""
    if not text:
        return []
    vocab = {t: i for i, t in enumerate(tokens)}
    text = (" " + text).replace(" ", "\u2581")
    sym = list(text)  # symbols: UTF-8 characters, merged in place
    nxt = list(range(1, len(sym))) + [-1]
    prv = list(range(-1, len(sym) - 1))
    heap = []

    def add(left, right):
        if left < 0 or right < 0:
            return
        tid = vocab.get(sym[left] + sym[right])
        if tid is not None:
            heapq.heappush(heap, (-scores[tid], left, len(sym[left]) + len(sym[right])))

    for i in range(len(sym) - 1):
        add(i, i + 1)
    while heap:
        _, left, size = heapq.heappop(heap)
        right = nxt[left]
        if right < 0 or not sym[left] or not sym[right] or len(sym[left]) + len(sym[right]) != size:
            continue
        sym[left] += sym[right]
        sym[right] = ""
        nxt[left] = nxt[right]
        if nxt[right] >= 0:
            prv[nxt[right]] = left
        add(prv[left], left)
        add(left, nxt[left])
    ids = []
    i = 0
    while i >= 0:
        s = sym[i]
        if s in vocab:
            ids.append(vocab[s])
        else:
            ids.extend(vocab[f"<0x{b:02X}>"] for b in s.encode("utf-8"))
        i = nxt[i]
    return ids


def sample_texts():
    texts = [t for stem in ("llama-spm", "gpt-2", "deepseek-llm") for t, _ in read_vectors(stem)]
    texts.append((DATA / "text" / "tinystories-sample.txt").read_text(encoding="utf-8"))
    raw = (DATA / "text" / "wikitext2-test-raw.txt").read_text(encoding="utf-8").replace("\r\n", "\n")
    texts += [line for line in raw.split("\n")[:300] if line]
    return texts


def test_vectors(tmp):
    for stem in ("llama-spm", "phi-3", "gpt-2", "falcon", "mpt", "starcoder", "refact", "deepseek-llm", "deepseek-coder"):
        tok = to_hf(VOCAB / f"ggml-vocab-{stem}.gguf", tmp / stem)
        bad = [(t, ids, tok.encode(t, add_special_tokens=False).ids) for t, ids in read_vectors(stem)]
        bad = [b for b in bad if b[1] != b[2]]
        check(not bad, f"{stem}: tokenizer.json from the GGUF gives llama.cpp's ids on all test vectors"
              + (f" (first mismatch {bad[0][0]!r}: want {bad[0][1]}, got {bad[0][2]})" if bad else ""))


def test_stories(tmp):
    tokens, scores, _ = gguf_vocab(VOCAB / "ggml-vocab-llama-spm.gguf")
    bad = [t for t, ids in read_vectors("llama-spm") if llama_cpp_spm_encode(tokens, scores, t) != ids]
    check(not bad, "reference llama.cpp SPM algorithm reproduces the llama-spm test vectors")

    path = DATA / "models" / "stories260K.gguf"
    tokens, scores, _ = gguf_vocab(path)
    tok = to_hf(path, tmp / "stories")
    text = (DATA / "text" / "tinystories-sample.txt").read_text(encoding="utf-8")
    want = llama_cpp_spm_encode(tokens, scores, text)
    got = tok.encode(text, add_special_tokens=False).ids
    check(got == want, f"stories260K: HF ids on tinystories-sample.txt ({len(want)} tokens) equal llama.cpp's")
    lines = [line for line in text.split("\n") if line]
    bad = [line for line in lines if tok.encode(line, add_special_tokens=False).ids != llama_cpp_spm_encode(tokens, scores, line)]
    check(not bad, f"stories260K: each of {len(lines)} lines encodes as llama.cpp does")
    enc = tok.encode("Once upon a time")
    check(enc.ids[0] == 1 and enc.ids[1:] == llama_cpp_spm_encode(tokens, scores, "Once upon a time"),
          "stories260K: add_special_tokens puts BOS (1) first")
    check(tok.decode(got) == text, "stories260K: decoding the ids gives the text back")
    cfg = json.loads((tmp / "stories" / "tokenizer_config.json").read_text())
    check(cfg["bos_token"] == "<s>" and cfg["eos_token"] == "</s>" and cfg["tokenizer_class"] == "LlamaTokenizerFast",
          "stories260K: tokenizer_config.json names <s>, </s> and LlamaTokenizerFast")


def kv_dict(kv):
    return {e["key"]: e["value"] for e in kv}


def test_hf_round_trip(tmp):
    texts = sample_texts()
    cases = {"llama2": ("llama", "default", None), "llama3": ("gpt2", "llama-bpe", "llama-bpe"),
             "qwen3": ("gpt2", "qwen2", "qwen2")}
    for name, (model, pre, vectors) in cases.items():
        tj, cfg = HF / name / "tokenizer.json", HF / name / "tokenizer_config.json"
        original = json.loads(tj.read_text(encoding="utf-8"))
        kv = to_gguf_kv(tj, cfg)
        d = kv_dict(kv)
        n_vocab = len(original["model"]["vocab"]) + sum(
            1 for t in original["added_tokens"] if t["content"] not in original["model"]["vocab"])
        check(d["tokenizer.ggml.model"] == model and d["tokenizer.ggml.pre"] == pre,
              f"{name}: tokenizer.ggml.model {d['tokenizer.ggml.model']!r}, pre {d['tokenizer.ggml.pre']!r}")
        check(len(d["tokenizer.ggml.tokens"]) == n_vocab, f"{name}: {len(d['tokenizer.ggml.tokens'])} tokens, as in the files")
        if model == "gpt2":
            check(len(d["tokenizer.ggml.merges"]) == len(original["model"]["merges"]),
                  f"{name}: {len(d['tokenizer.ggml.merges'])} merges, as in tokenizer.json")
        padded = to_gguf_kv(tj, cfg, n_vocab + 7)
        toks = kv_dict(padded)["tokenizer.ggml.tokens"]
        check(len(toks) == n_vocab + 7 and toks[-1] == f"[PAD{n_vocab + 6}]", f"{name}: padded to vocab_size with [PAD<id>]")

        gguf_path = tmp / f"{name}.gguf"
        write_vocab_gguf(kv, gguf_path)
        back = to_hf(gguf_path, tmp / f"{name}-back")
        ref = Tokenizer.from_file(str(tj))
        bad = [t for t in texts if back.encode(t, add_special_tokens=False).ids != ref.encode(t, add_special_tokens=False).ids]
        check(not bad, f"{name}: HF -> GGUF -> HF gives the original tokenizer's ids on {len(texts)} texts"
              + (f" (first mismatch {bad[0][:60]!r})" if bad else ""))
        if vectors:
            bad = [t for t, ids in read_vectors(vectors) if back.encode(t, add_special_tokens=False).ids != ids]
            check(not bad, f"{name}: round-tripped tokenizer gives the {vectors} test vectors")
        if model == "llama":
            tokens, scores, _ = gguf_vocab(gguf_path)
            bad = [t for t in texts if llama_cpp_spm_encode(tokens, scores, t) != ref.encode(t, add_special_tokens=False).ids]
            check(not bad, f"{name}: llama.cpp's SPM algorithm on the derived scores gives the HF ids on {len(texts)} texts"
                  + (f" (first mismatch {bad[0][:60]!r})" if bad else ""))


def main():
    if not DATA.is_dir():  # the shared data is absent: skipped (77), as docs/building.md says
        print(f"skipped: {DATA} not found")
        return 77
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        test_vectors(tmp)
        test_stories(tmp)
        test_hf_round_trip(tmp)
    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
