#!/usr/bin/env python3
"""Writes the seed corpora of tests/fuzz (small, valid inputs of each parser; the fuzzers mutate them).
Files named regression-* are inputs that once failed a target, added by hand; this script leaves them.
Run with the test venv (.cache/venv/bin/python tests/fuzz/make_corpus.py); the output is committed."""
import json
import struct
import sys
from pathlib import Path

import gguf
import numpy as np
from safetensors.numpy import save
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

OUT = Path(__file__).resolve().parent / "corpus"
SENTENCES = ["Once upon a time there was a little girl.", "She loved to play outside in the park!", "def f(x): return x + 1",
             "Hello world, 123 ünïcödé"]


def put(target, name, data):
    d = OUT / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def tiny_gguf(path, dtype=np.float32, bpe=False, template=None):
    """A one-layer Llama: hidden 8, 2 heads / 1 KV head, FFN 12, vocab 16."""
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny")
    w.add_context_length(64)
    w.add_embedding_length(8)
    w.add_block_count(1)
    w.add_feed_forward_length(12)
    w.add_head_count(2)
    w.add_head_count_kv(1)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_file_type(1 if dtype == np.float16 else 0)
    if bpe:
        tokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [chr(c) for c in range(ord("a"), ord("m"))] + ["Ġ"]
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("smollm")
        w.add_token_list(tokens)
        w.add_token_types([3, 3, 3] + [1] * (len(tokens) - 3))
        w.add_token_merges(["a b", "c d"])
        w.add_bos_token_id(0)
        w.add_eos_token_id(2)
    else:
        tokens = ["<unk>", "<s>", "</s>"] + ["▁" + c for c in "abcdefgh"] + ["a", "b", "c", "<0x0A>", "<0xC3>"]
        w.add_tokenizer_model("llama")
        w.add_token_list(tokens)
        w.add_token_scores([0.0] * 3 + [-float(i) for i in range(len(tokens) - 3)])
        w.add_token_types([2, 3, 3] + [1] * (len(tokens) - 5) + [6, 6])
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_add_bos_token(True)
    if template:
        w.add_chat_template(template)
    rng = np.random.default_rng(0)
    v = len(tokens)

    def t(name, *shape):
        w.add_tensor(name, (rng.standard_normal(shape) * 0.1).astype(dtype if len(shape) > 1 else np.float32))

    t("token_embd.weight", v, 8)
    t("output_norm.weight", 8)
    t("output.weight", v, 8)
    t("blk.0.attn_norm.weight", 8)
    t("blk.0.attn_q.weight", 8, 8)
    t("blk.0.attn_k.weight", 4, 8)
    t("blk.0.attn_v.weight", 4, 8)
    t("blk.0.attn_output.weight", 8, 8)
    t("blk.0.ffn_norm.weight", 8)
    t("blk.0.ffn_gate.weight", 12, 8)
    t("blk.0.ffn_up.weight", 12, 8)
    t("blk.0.ffn_down.weight", 8, 12)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def gguf_seeds(tmp):
    chatml = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}" \
             "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    for name, kw in (("spm_f32.gguf", {}), ("spm_f16.gguf", {"dtype": np.float16}), ("bpe_chatml.gguf", {"bpe": True, "template": chatml})):
        tiny_gguf(tmp / name, **kw)
        put("gguf", name, (tmp / name).read_bytes())
        put("convert", name, (tmp / name).read_bytes())


def safetensors_seeds():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    put("safetensors", "f32_f16.safetensors", save({"a": a, "b": a.astype(np.float16), "s": np.array(3, dtype=np.int32)}, {"format": "pt"}))
    put("safetensors", "qweight.safetensors", save({"q.qweight": np.zeros((1, 8), np.int32), "q.scales": np.ones((1, 8), np.float16),
                                                    "q.qzeros": np.zeros((1, 1), np.int32)}))
    put("safetensors", "empty.safetensors", save({}))
    header = json.dumps({"x": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}).encode()
    put("safetensors", "bf16.safetensors", struct.pack("<Q", len(header)) + header + b"\x80\x3f\x00\x40")


def config_seeds():
    llama = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 576, "intermediate_size": 1536,
             "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3, "vocab_size": 49152,
             "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "rope_theta": 100000, "tie_word_embeddings": True,
             "hidden_act": "silu", "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16"}
    put("hf_config", "llama.json", json.dumps(llama, indent=1))
    put("hf_config", "llama3_rope.json", json.dumps({**llama, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                                              "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}))
    put("hf_config", "qwen2.json", json.dumps({**llama, "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "eos_token_id": [2, 3]}))
    put("hf_config", "awq.json", json.dumps({**llama, "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128,
                                                                             "zero_point": True, "version": "gemm"}}))
    put("hf_config", "gptq.json", json.dumps({**llama, "quantization_config": {
        "quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": True, "sym": True, "checkpoint_format": "gptq",
        "dynamic": {"+:model\\.layers\\.0\\.mlp\\.down_proj": {"bits": 8, "group_size": -1}}}}))
    wq = {"num_bits": 8, "type": "float", "symmetric": True, "group_size": None, "strategy": "channel", "dynamic": False}
    put("hf_config", "fp8.json", json.dumps({**llama, "quantization_config": {
        "quant_method": "compressed-tensors", "format": "float-quantized", "quantization_status": "compressed", "ignore": ["lm_head"],
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": wq,
                                      "input_activations": {**wq, "strategy": "token", "dynamic": True}}}}}))


def tokenizer_seeds():
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(SENTENCES, trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                                          initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    put("tokenizer_json", "byte_level_bpe.json", bpe.to_str())
    spm = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>"))
    spm.pre_tokenizer = pre_tokenizers.Metaspace()
    spm.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    spm.train_from_iterator(SENTENCES, trainers.BpeTrainer(vocab_size=120, special_tokens=["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]))
    put("tokenizer_json", "sentencepiece_bpe.json", spm.to_str())
    wp = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    wp.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    wp.train_from_iterator(SENTENCES, trainers.WordPieceTrainer(vocab_size=100, special_tokens=["[UNK]", "[CLS]", "[SEP]"]))
    put("tokenizer_json", "wordpiece.json", wp.to_str())


def template_seeds():
    put("chat_template", "filters.jinja", "{{ bos_token }}{% for m in messages | selectattr('role', 'ne', 'system') %}"
                                          "{{ (m.content | trim | upper)[:10] ~ '|' }}{{ loop.index }}{% endfor %}{{ messages | tojson(indent=2) }}")
    put("chat_template", "set_namespace.jinja", "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + m.content | length %}"
                                                "{% if m.role == 'user' %}U{% elif m.role == 'assistant' %}A{% else %}S{% endif %}{% endfor %}"
                                                "{{ ns.n }}{{ raise_exception('x') if ns.n < 0 else '' }}{{ range(3) | list }}{{ {'a': 1}.items() | list }}")


def calibration_seeds():
    put("calibration", "text.jsonl", "".join(json.dumps({"text": s}) + "\n" for s in SENTENCES))
    put("calibration", "messages.jsonl", json.dumps({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]}) + "\n"
                                         + json.dumps({"prompt": "2+2=", "completion": "4"}) + "\n")
    put("calibration", "array.json", json.dumps([{"text": s} for s in SENTENCES]))
    put("calibration", "paragraphs.txt", "\n\n".join(SENTENCES) + "\n")


def yaml_seeds():
    put("yaml_config", "quantize.yaml", "model_path: m.gguf\noutput_path: out\nquant_method: awq\nbits: 4\ngroup_size: 128\n"
                                        "calibration_data: general\nnum_samples: 128\nmax_seq_len: 512\nskip_layers: [0, 1]\n")
    put("yaml_config", "serve.yaml", "model_path: m.gguf\nhost: 127.0.0.1\nport: 8000\nmax_num_seqs: 16\nmax_model_len: 2048\n"
                                     "enable_prefix_caching: true\ndefault_temperature: 0.7\n")
    put("yaml_config", "bench.yaml", "base_url: http://127.0.0.1:8000/v1\nendpoint: chat\nconcurrency: [1, 4]\nnum_prompts: 16\n"
                                     "input_len: 128\noutput_len: 64\nstream: true\nslo: ttft=500ms,tpot=50ms\n")


def request_seeds():
    chat = {"model": "stories260K", "messages": [{"role": "system", "content": "Be brief"}, {"role": "user", "content": "Hi"}],
            "max_tokens": 4, "temperature": 0.7, "top_p": 0.9, "top_k": 40, "stream": True, "stream_options": {"include_usage": True},
            "logprobs": True, "top_logprobs": 2, "stop": ["\n"], "seed": 7, "n": 2}
    completion = {"model": "stories260K", "prompt": ["Once upon", "a time"], "max_tokens": 1, "echo": True, "logprobs": 1,
                  "repetition_penalty": 1.1, "min_p": 0.05, "ignore_eos": True, "stop": "."}
    put("openai_request", "chat.json", json.dumps(chat))
    put("openai_request", "completion.json", json.dumps(completion))
    put("openai_request", "token_ids.json", json.dumps({"prompt": [1, 2, 3], "max_tokens": 0, "echo": True, "logprobs": 0}))
    for name, body, path in (("chat.http", chat, "/v1/chat/completions"), ("completion.http", completion, "/v1/completions")):
        data = json.dumps(body)
        put("http_server", name, f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\nContent-Type: application/json\r\n"
                                 f"Content-Length: {len(data)}\r\n\r\n{data}")
    data = json.dumps(completion)
    chunked = f"{len(data):x}\r\n{data}\r\n0\r\n\r\n"
    put("http_server", "chunked.http", "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked)
    put("http_server", "get.http", "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\n\r\nGET /health HTTP/1.1\r\n\r\n")
    put("http_server", "metrics.http", "GET /metrics HTTP/1.1\r\nHost: x\r\nRange: bytes=0-10\r\n\r\n")


def http_head_seeds():
    """Request heads for fuzz_http_head (its first byte picks the read size) and fuzz_http_framing (to its echo route);
    those serve refuses are http_server seeds too."""
    post = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\nContent-Type: application/json\r\n"
    body = json.dumps({"prompt": "Once", "max_tokens": 1})
    length = f"Content-Length: {len(body)}\r\n"
    heads = {
        "get": "GET /health HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n",
        "length": post + length + "\r\n" + body,
        "chunked": post + "Transfer-Encoding: chunked\r\n\r\n" + f"{len(body):x};ext=1\r\n{body}\r\n0\r\n\r\n",
        "many_fields": "GET /v1/models HTTP/1.1\r\nHost: x\r\n" + "X-a: b\r\n" * 120 + "\r\n",
        "space_before_colon": post + "Transfer-Encoding : chunked\r\n" + length + "\r\n" + body,
        "plus_length": post + f"Content-Length: +{len(body)}\r\n\r\n" + body,
        "chunk_without_crlf": post + "Transfer-Encoding: chunked\r\n\r\n" + f"{len(body):x}\r\n{body}XYZ0\r\n\r\n",
        "nul": post + "X-a: b\0c\r\n" + length + "\r\n" + body,
        "obs_fold": post + "X-a: b\r\n c\r\n" + length + "\r\n" + body,
        "key_nul": "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\0\r\n\r\n",
    }
    for name, text in heads.items():
        put("http_head", name + ".http", "\x05" + text)
        put("http_framing", name + ".http", text.replace("/v1/completions", "/echo"))
        if name not in ("get", "length", "chunked"):
            put("http_server", "framing_" + name + ".http", text)


def sse_seeds():
    chunk = lambda text, **kw: "data: " + json.dumps({"choices": [{"index": 0, "text": text, **kw}]}) + "\n\n"
    stream = chunk("Once") + chunk(" upon") + chunk("", finish_reason="length") + \
        "data: " + json.dumps({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 2}}) + "\n\ndata: [DONE]\n\n"
    put("bench_sse", "completion.sse", "\x05" + stream)
    put("bench_sse", "chat_crlf.sse", "\x10" + ": keep-alive\r\nevent: message\r\ndata: " +
        json.dumps({"choices": [{"delta": {"content": "Hi"}, "finish_reason": "stop"}]}) + "\r\n\r\ndata: [DONE]\r\n\r\n")
    put("bench_sse", "error.sse", "\x01data: " + json.dumps({"error": {"message": "boom", "type": "server_error"}}) + "\n\n")



def imatrix_seeds(tmp):
    """An importance matrix in llama.cpp's GGUF format (name.in_sum2 [cols, n_mat], name.counts [1, n_mat]) and
    in its first, binary format."""
    w = gguf.GGUFWriter(str(tmp / "im.gguf"), "imatrix")
    w.add_string("general.type", "imatrix")
    w.add_array("imatrix.datasets", ["calib.txt"])
    w.add_uint32("imatrix.chunk_count", 4)
    w.add_uint32("imatrix.chunk_size", 512)
    w.add_tensor("blk.0.attn_q.weight.in_sum2", np.arange(8, dtype=np.float32).reshape(1, 8))
    w.add_tensor("blk.0.attn_q.weight.counts", np.array([[4.0]], dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    put("imatrix", "gguf.imatrix", (tmp / "im.gguf").read_bytes())
    name = b"blk.0.ffn_down.weight"
    legacy = struct.pack("<i", 1) + struct.pack("<i", len(name)) + name + struct.pack("<ii", 4, 4) + np.ones(4, np.float32).tobytes()
    put("imatrix", "legacy.dat", legacy + struct.pack("<ii", 4, 9) + b"calib.txt")


def task_seeds():
    put("task_file", "choices.jsonl", json.dumps({"query": "Question: 2+2?\nAnswer:", "choices": ["3", "4"], "gold": 1}) + "\n"
                                      + json.dumps({"query": "Pick one\n", "choices": ["a", "b", "c"], "gold": 0}) + "\n")
    put("task_file", "options.jsonl", json.dumps({"context_options": ["The cat sat", "The dog sat"], "continuation": "on the mat.",
                                                  "gold": 0}) + "\n")
    put("task_file", "completion.jsonl", json.dumps({"context": "Once upon a", "continuation": "time"}) + "\n")


def dataset_seeds():
    put("bench_dataset", "prompts.jsonl", "".join(json.dumps({"prompt": s}) + "\n" for s in SENTENCES))
    put("bench_dataset", "sharegpt.json", json.dumps([{"conversations": [{"from": "human", "value": s}, {"from": "gpt", "value": "ok"}]}
                                                      for s in SENTENCES]))


def tiny_quantized_dirs():
    """One-layer Llama checkpoints (hidden 32, 2 heads / 1 KV head, FFN 64, vocab 16, group 32) in AutoAWQ's GEMM and
    AutoGPTQ's v1 layouts, bundled for fuzz_hf_quantized: u32 config length, config.json, then model.safetensors."""
    rng = np.random.default_rng(0)
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32, "intermediate_size": 64,
           "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 16,
           "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False,
           "torch_dtype": "float16"}
    linears = {"self_attn.q_proj": (32, 32), "self_attn.k_proj": (16, 32), "self_attn.v_proj": (16, 32), "self_attn.o_proj": (32, 32),
               "mlp.gate_proj": (64, 32), "mlp.up_proj": (64, 32), "mlp.down_proj": (32, 64)}
    base = {"model.embed_tokens.weight": rng.standard_normal((16, 32)).astype(np.float16),
            "lm_head.weight": rng.standard_normal((16, 32)).astype(np.float16),
            "model.norm.weight": np.ones(32, np.float16),
            "model.layers.0.input_layernorm.weight": np.ones(32, np.float16),
            "model.layers.0.post_attention_layernorm.weight": np.ones(32, np.float16)}
    g = 32
    awq, gptq = dict(base), dict(base)
    for name, (out, inp) in linears.items():
        p = f"model.layers.0.{name}."
        q = rng.integers(0, 16, size=(inp, out), dtype=np.uint32)
        awq[p + "qweight"] = np.zeros((inp, out // 8), np.uint32)
        for i, o in enumerate([0, 2, 4, 6, 1, 3, 5, 7]):  # AutoAWQ's interleaved nibbles
            awq[p + "qweight"] |= q[:, o::8] << (4 * i)
        awq[p + "qweight"] = awq[p + "qweight"].view(np.int32)
        awq[p + "qzeros"] = np.full((inp // g, out // 8), 0x88888888, np.uint32).view(np.int32)
        awq[p + "scales"] = np.full((inp // g, out), 0.01, np.float16)
        qg = np.zeros((inp // 8, out), np.uint32)
        for r in range(8):
            qg |= q[r::8, :] << (4 * r)
        gptq[p + "qweight"] = qg.view(np.int32)
        gptq[p + "qzeros"] = np.full((inp // g, out // 8), 0x77777777, np.uint32).view(np.int32)
        gptq[p + "scales"] = np.full((inp // g, out), 0.01, np.float16)
        gptq[p + "g_idx"] = (np.arange(inp) // g).astype(np.int32)
    for name, tensors, qc in (
            ("awq.bundle", awq, {"quant_method": "awq", "bits": 4, "group_size": g, "zero_point": True, "version": "gemm"}),
            ("gptq.bundle", gptq, {"quant_method": "gptq", "bits": 4, "group_size": g, "desc_act": False, "sym": True,
                                   "checkpoint_format": "gptq"})):
        config = json.dumps({**cfg, "quantization_config": qc}).encode()
        put("hf_quantized", name, struct.pack("<I", len(config)) + config + save(tensors))


def safetensors_index_seeds():
    index = {"metadata": {"total_size": 40}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
                                                            "c": "model-00002-of-00002.safetensors"}}
    put("safetensors_index", "two_shards.json", json.dumps(index))

def main():
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        gguf_seeds(Path(tmp))
        imatrix_seeds(Path(tmp))
    safetensors_seeds()
    config_seeds()
    tokenizer_seeds()
    template_seeds()
    calibration_seeds()
    yaml_seeds()
    request_seeds()
    http_head_seeds()
    sse_seeds()
    task_seeds()
    dataset_seeds()
    tiny_quantized_dirs()
    safetensors_index_seeds()
    for d in sorted(OUT.iterdir()):
        print(f"{d.name}: {len(list(d.iterdir()))} seeds, {sum(f.stat().st_size for f in d.iterdir())} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
