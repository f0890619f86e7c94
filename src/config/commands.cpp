#include "mo/config/commands.h"

namespace mo::config {
namespace {
const std::vector<std::string> kDevices = {"auto", "cpu", "cuda"};
const std::vector<std::string> kKvDtypes = {"auto", "fp16", "bf16", "fp8", "int8"};
}  // namespace

void bind(Schema& s, QuantizeConfig& c) {
  s.add("model_path", &c.model_path, "HF model directory or .gguf file to quantize").placeholder("PATH");
  s.add("output_path", &c.output_path, "new output directory (or .gguf file); an existing path is refused").placeholder("PATH");
  s.add("quant_method", &c.quant_method, "quantization method").one_of({"rtn", "awq", "gptq", "fp8", "gguf"});
  s.add("bits", &c.bits, "weight bits").range(4, 8);
  s.add("group_size", &c.group_size, "weights per scale along the input dimension; -1 = per output channel").range(-1, 4096);
  s.add("sym", &c.sym, "symmetric INT4/INT8 (zero point fixed; rtn and gptq; awq always stores zero points)");
  s.add("fp8_scale", &c.fp8_scale, "FP8 weight scales per output channel or one per tensor").one_of({"channel", "tensor"});
  s.add("calibration_data", &c.calibration_data, "calibration samples: a JSON/JSONL file or a built-in set (general, code, chat)")
      .alias("custom_calibration").placeholder("FILE");
  s.add("num_samples", &c.num_samples, "calibration samples used").range(1, 100000);
  s.add("max_seq_len", &c.max_seq_len, "tokens per calibration sample").range(16, 1 << 20);
  s.add("calibration_field", &c.calibration_field, "record field holding the text: auto, text, messages, prompt+completion or another key");
  s.add("calibration_pack", &c.calibration_pack, "pack records into full-length samples (false: one record per sample, truncated)");
  s.add("seed", &c.seed, "seed for choosing calibration records and windows").range(0, 1LL << 62);
  s.add("sensitivity_threshold", &c.sensitivity_threshold, "output cosine similarity under which a layer falls back to fallback_bits; 0 = off").range(0, 1);
  s.add("skip_layers", &c.skip_layers, "layers kept unquantized: names, globs or index ranges (lm_head, model.layers.31.*, 29-31)");
  s.add("fallback_bits", &c.fallback_bits, "bits for layers the sensitivity check flags").range(4, 16);
  s.add("damp_percent", &c.damp_percent, "GPTQ dampening, a fraction of the mean Hessian diagonal").range(0, 1);
  s.add("desc_act", &c.desc_act, "GPTQ act-order: quantize columns by descending Hessian diagonal (default; --no-desc-act turns it off)");
  s.add("load_format", &c.load_format, "auto, or dummy: random weights with the shape of model_path (a preset name or config.json)")
      .one_of({"auto", "dummy"});
  s.add("gguf_type", &c.gguf_type, "GGUF file type for quant_method gguf")
      .one_of({"f16", "bf16", "q8_0", "q6_k", "q5_k_m", "q5_k_s", "q4_k_m", "q4_k_s", "q4_0", "q3_k_m", "q2_k"});
  s.add("imatrix", &c.imatrix, "importance matrix for k-quants: auto, none or a FILE").placeholder("auto|none|FILE");
  s.add("eval", &c.eval, "evaluate base and quantized models afterwards and write report.md");
  s.add("device", &c.device, "compute device").one_of(kDevices);
  s.add("threads", &c.threads, "CPU threads; 0 = all cores").range(0, 1024);
  s.add("json", &c.json, "print the summary as JSON");
}

void bind(Schema& s, ServeConfig& c) {
  s.add("model_path", &c.model_path, "model directory or .gguf file to serve").placeholder("PATH");
  s.add("host", &c.host, "address to listen on");
  s.add("port", &c.port, "TCP port").range(1, 65535);
  s.add("served_model_name", &c.served_model_name, "model name in the API; empty = the model's directory name");
  s.add("block_size", &c.block_size, "tokens per KV-cache block (8, 16 or 32)").range(8, 32);
  s.add("gpu_memory_utilization", &c.gpu_memory_utilization, "fraction of GPU memory (CPU: of memory_limit) for weights, KV cache and activations").range(0.05, 1);
  s.add("memory_limit", &c.memory_limit, "GiB of host memory on CPU; 0 = physical memory").range(0, 1 << 20);
  s.add("max_num_seqs", &c.max_num_seqs, "sequences running at once").range(1, 65536);
  s.add("max_model_len", &c.max_model_len, "tokens per sequence (prompt + output); 0 = the model's context length").range(0, 1 << 24);
  s.add("max_num_batched_tokens", &c.max_num_batched_tokens, "tokens in one engine step").range(1, 1 << 24);
  s.add("enable_chunked_prefill", &c.enable_chunked_prefill, "split long prompts across steps");
  s.add("enable_prefix_caching", &c.enable_prefix_caching, "reuse KV blocks of shared prompt prefixes");
  s.add("kv_cache_dtype", &c.kv_cache_dtype, "KV-cache element type").one_of(kKvDtypes);
  s.add("threads", &c.threads, "CPU threads; 0 = all cores").range(0, 1024);
  s.add("api_key", &c.api_key, "bearer token clients must send; empty = none");
  s.add("request_timeout", &c.request_timeout, "seconds before a request is aborted").range(1, 86400);
  s.add("max_queue_len", &c.max_queue_len, "waiting requests before new ones get 503").range(1, 1 << 20);
  s.add("device", &c.device, "compute device").one_of(kDevices);
}

void bind(Schema& s, BenchConfig& c) {
  s.add("base_url", &c.base_url, "OpenAI-compatible server, up to /v1").placeholder("URL");
  s.add("model", &c.model, "model name to request; empty = the first in /v1/models");
  s.add("endpoint", &c.endpoint, "API to load").one_of({"completions", "chat"});
  s.add("concurrency", &c.concurrency, "requests in flight; a list sweeps levels, e.g. 1,4,16");
  s.add("request_rate", &c.request_rate, "arrivals per second; 0 = closed loop at `concurrency`").range(0, 1e6);
  s.add("input_len", &c.input_len, "prompt tokens").range(1, 1 << 24);
  s.add("output_len", &c.output_len, "output tokens (max_tokens)").range(1, 1 << 24);
  s.add("num_prompts", &c.num_prompts, "requests measured").range(1, 10000000);
  s.add("stream", &c.stream, "stream responses (needed for TTFT and ITL)");
  s.add("dataset", &c.dataset, "JSONL or ShareGPT prompts; empty = synthetic").placeholder("FILE");
  s.add("api_key", &c.api_key, "bearer token");
  s.add("slo", &c.slo, "goodput SLOs, e.g. ttft=500ms,tpot=50ms");
  s.add("out", &c.out, "write all samples and the summary to this JSON file").placeholder("FILE");
  s.add("seed", &c.seed, "random seed for prompts and arrivals");
  s.add("json", &c.json, "print the summary as JSON");
}

void bind(Schema& s, DiagnoseConfig& c) {
  s.add("original", &c.original, "the original model").placeholder("PATH");
  s.add("quantized", &c.quantized, "the quantized model").placeholder("PATH");
  s.add("data", &c.data, "samples to run: JSON/JSONL/text file or a built-in set").placeholder("FILE");
  s.add("threshold", &c.threshold, "cosine similarity under which a layer is flagged").range(0, 1);
  s.add("num_samples", &c.num_samples, "samples used").range(1, 100000);
  s.add("output_path", &c.output_path, "directory for diagnose.md, diagnose.json and the plot").placeholder("DIR");
  s.add("device", &c.device, "compute device").one_of(kDevices);
  s.add("json", &c.json, "print the result as JSON");
}

void bind(Schema& s, EvalConfig& c) {
  s.add("model_path", &c.model_path, "model to evaluate").placeholder("PATH");
  s.add("base_model", &c.base_model, "base model to compare against").placeholder("PATH");
  s.add("text", &c.text, "perplexity text file; empty = built-in").placeholder("FILE");
  s.add("ctx", &c.ctx, "perplexity context length in tokens").range(8, 1 << 20);
  s.add("tasks", &c.tasks, "multiple-choice JSONL task files");
  s.add("limit", &c.limit, "items per task; 0 = all").range(0, 10000000);
  s.add("output_path", &c.output_path, "directory for report.md and report.json").placeholder("DIR");
  s.add("device", &c.device, "compute device").one_of(kDevices);
  s.add("json", &c.json, "print the results as JSON");
}

void bind(Schema& s, GenerateConfig& c) {
  s.add("model_path", &c.model_path, "model to run: HF directory or .gguf file (a budget preset with --load-format dummy)")
      .placeholder("MODEL").as_positional();
  s.add("prompt", &c.prompt, "prompt text; empty = start from BOS");
  s.add("chat", &c.chat, "send the prompt as a user message through the model's chat template");
  s.add("system", &c.system, "system message for --chat");
  s.add("max_tokens", &c.max_tokens, "tokens to generate at most").range(1, 1 << 24);
  s.add("temperature", &c.temperature, "sampling temperature; 0 = greedy").range(0, 2);
  s.add("top_k", &c.top_k, "keep the k most likely tokens; 0 = all").range(-1, 1 << 24);
  s.add("top_p", &c.top_p, "nucleus sampling mass").range(1e-9, 1);
  s.add("min_p", &c.min_p, "drop tokens below min_p x the top probability").range(0, 1);
  s.add("repetition_penalty", &c.repetition_penalty, "penalty for tokens already in prompt or output (1 = off)").range(1e-3, 10);
  s.add("presence_penalty", &c.presence_penalty, "subtracted from tokens present in the output").range(-2, 2);
  s.add("frequency_penalty", &c.frequency_penalty, "subtracted per occurrence in the output").range(-2, 2);
  s.add("stop", &c.stop, "stop strings (comma-separated on the command line)");
  s.add("ignore_eos", &c.ignore_eos, "keep generating past the end-of-sequence token");
  s.add("seed", &c.seed, "sampling seed (same seed, same output)").range(0, 9.2e18);
  s.add("block_size", &c.block_size, "tokens per KV-cache block (8, 16 or 32)").range(8, 32);
  s.add("kv_cache_dtype", &c.kv_cache_dtype, "KV-cache element type").one_of({"f16", "f32"});
  s.add("load_format", &c.load_format, "auto = read the model; dummy = random weights with a budget preset's shapes").one_of({"auto", "dummy"});
  s.add("dummy_type", &c.dummy_type, "weight type for --load-format dummy")
      .one_of({"f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k"});
  s.add("device", &c.device, "compute device (this version runs on the CPU)").one_of({"auto", "cpu"});
  s.add("threads", &c.threads, "CPU threads; 0 = all cores").range(0, 1024);
}

void bind(Schema& s, ConvertConfig& c) {
  s.add("model_path", &c.model_path, "input model: HF directory or .gguf file").placeholder("IN").as_positional();
  s.add("output_path", &c.output_path, "output: a new directory (HF) or .gguf file").placeholder("OUT").as_positional();
  s.add("output_format", &c.output_format, "what to write; auto = gguf when OUT ends in .gguf, else an HF directory").one_of({"auto", "hf", "gguf"});
  s.add("dtype", &c.dtype, "element type of the written weights; auto = as stored (f16 for quantized GGUF input)").one_of({"auto", "f32", "f16", "bf16"});
  s.add("force", &c.force, "replace OUT if it is an earlier output of model-optimizer (never the input)");
  s.add("max_shard_size_mb", &c.max_shard_size_mb, "largest safetensors shard in MB").range(1, 1 << 20);
}

void bind(Schema& s, InspectConfig& c) {
  s.add("model_path", &c.model_path, "model directory or .gguf file").placeholder("MODEL").as_positional();
  s.add("tokenize", &c.tokenize, "print the token ids of TEXT (one line, space-separated)").placeholder("TEXT");
  s.add("detokenize", &c.detokenize, "print the text of the space-separated token IDS").placeholder("IDS");
  s.add("json", &c.json, "print as JSON");
}

}  // namespace mo::config
