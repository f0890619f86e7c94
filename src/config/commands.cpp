#include "mo/config/commands.h"

namespace mo::config {
namespace {
const std::vector<std::string> kDevices = {"auto", "cpu", "cuda"};
const std::vector<std::string> kKvDtypes = {"auto", "fp16", "bf16", "fp8", "int8"};
}  // namespace

void bind(Schema& s, QuantizeConfig& c) {
  s.add("model_path", &c.model_path, "HF model directory or .gguf file to quantize").placeholder("PATH");
  s.add("output_path", &c.output_path, "new output directory (or .gguf file); an existing path is refused unless --force")
      .placeholder("PATH");
  s.add("force", &c.force, kForceHelp);
  s.add("quant_method", &c.quant_method, "quantization method").one_of({"rtn", "awq", "gptq", "fp8", "gguf"});
  s.add("bits", &c.bits, "weight bits").range(4, 8);
  s.add("group_size", &c.group_size, "weights per scale along the input dimension; -1 = per output channel").range(-1, 4096);
  s.add("sym", &c.sym, "symmetric INT4/INT8 (zero point fixed; rtn and gptq; awq always stores zero points)");
  s.add("fp8_scale", &c.fp8_scale, "FP8 weight scales per output channel or one per tensor").one_of({"channel", "tensor"});
  s.add("checkpoint_format", &c.checkpoint_format,
        "rtn/gptq output layout: auto = GPTQ when every linear has one precision, compressed-tensors pack-quantized when they differ "
        "(Transformers' GPTQ loader ignores per-module overrides)")
      .one_of({"auto", "gptq", "compressed-tensors"});
  s.add("calibration_data", &c.calibration_data,
        "calibration samples: a JSON/JSONL file, a text file (one sample per paragraph) or a built-in set (general, code, chat)")
      .alias("custom_calibration")
      .placeholder("FILE");
  s.add("num_samples", &c.num_samples, "calibration samples used").range(1, 100000);
  s.add("max_seq_len", &c.max_seq_len, "tokens per calibration sample").range(16, 1 << 20);
  s.add("calibration_field", &c.calibration_field, "record field holding the text: auto, text, messages, prompt+completion or another key");
  s.add("calibration_pack", &c.calibration_pack, "pack records into full-length samples (false: one record per sample, truncated)");
  s.add("seed", &c.seed, "seed for choosing calibration records and windows").range(0, 1LL << 62);
  s.add("sensitivity_threshold", &c.sensitivity_threshold,
        "output cosine similarity under which a layer falls back to fallback_bits; 0 = off")
      .range(0, 1);
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
  s.add("eval_text", &c.eval_text, "evaluation perplexity/KL text: a file or a built-in set (wikitext2, tinystories); none = skip");
  s.add("eval_ctx", &c.eval_ctx, "evaluation perplexity window in tokens").range(8, 1 << 20);
  s.add("eval_ppl_windows", &c.eval_ppl_windows, "evaluation perplexity windows; 0 = all").range(0, 10000000);
  s.add("eval_tasks", &c.eval_tasks, "evaluation tasks: JSONL files or built-in names (arc_easy, piqa, ...)");
  s.add("eval_limit", &c.eval_limit, "items per evaluation task; 0 = all").range(0, 10000000);
  s.add("eval_latency", &c.eval_latency, "measure TTFT and tokens/s of both models");
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
  s.add("gpu_memory_utilization", &c.gpu_memory_utilization,
        "fraction of GPU memory (CPU: of memory_limit) for weights, KV cache and activations")
      .range(0.05, 1);
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
  s.add("max_queue_len", &c.max_queue_len, "waiting requests before new ones get 429").range(1, 1 << 20);
  s.add("max_connections", &c.max_connections,
        "client connections served at once, each on its own thread (more wait; when all are taken, connections still waiting for their "
        "headers after 0.5 s are closed to make room)")
      .range(4, 1 << 16);
  s.add("read_timeout", &c.read_timeout, "seconds a client has to send a request's headers, and again its body; then it is disconnected")
      .range(1, 3600);
  s.add("device", &c.device, "compute device").one_of(kDevices);
  s.add("shutdown_timeout", &c.shutdown_timeout, "seconds in-flight requests get to finish after SIGINT/SIGTERM").range(0, 3600);
  s.add("default_max_tokens", &c.default_max_tokens,
        "output tokens when a request sets no max_tokens; 0 = up to max_model_len (completions: 16)")
      .range(0, 1 << 24);
  s.add("default_temperature", &c.default_temperature, "temperature when a request sets none").range(0, 2);
  s.add("default_top_p", &c.default_top_p, "top_p when a request sets none").range(1e-6, 1);
  s.add("default_top_k", &c.default_top_k, "top_k when a request sets none; 0 = all tokens").range(-1, 1 << 24);
  s.add("default_min_p", &c.default_min_p, "min_p when a request sets none").range(0, 1);
  s.add("default_repetition_penalty", &c.default_repetition_penalty, "repetition_penalty when a request sets none").range(0.01, 100);
  s.add("seed", &c.seed, "seed of requests that set none (request k uses seed + k)");
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
  s.add("out", &c.out, "write all samples and the summary to this JSON file (a new file, or with --force earlier results)")
      .placeholder("FILE");
  s.add("report", &c.report, "with --out: also write the Markdown report NAME.md and the plot NAME.svg beside it");
  s.add("force", &c.force, kForceHelp);
  s.add("seed", &c.seed, "random seed for prompts and arrivals");
  s.add("json", &c.json, "print the results JSON (summaries, no samples) instead of the table");
  s.add("input_len_dist", &c.input_len_dist, "prompt length distribution").one_of({"fixed", "uniform", "normal"});
  s.add("input_len_spread", &c.input_len_spread, "uniform: +-spread*input_len; normal: sd = spread*input_len").range(0, 10);
  s.add("output_len_dist", &c.output_len_dist, "output length distribution").one_of({"fixed", "uniform", "normal"});
  s.add("output_len_spread", &c.output_len_spread, "uniform: +-spread*output_len; normal: sd = spread*output_len").range(0, 10);
  s.add("arrival", &c.arrival, "arrival process with request_rate").one_of({"poisson", "constant"});
  s.add("warmup", &c.warmup, "requests per level sent before measuring, not counted").range(0, 100000);
  s.add("ignore_eos", &c.ignore_eos, "send ignore_eos so the server generates exactly max_tokens (vLLM, SGLang, llama-server)");
  s.add("timeout", &c.timeout, "seconds before a request counts as failed").range(0.1, 86400);
  s.add("progress", &c.progress, "live progress line on stderr");
  s.add("action", &c.action, "'compare': compare base_results with new_results instead of running a load")
      .placeholder("compare")
      .as_positional();
  s.add("base_results", &c.base_results, "compare: reference results JSON (from --out)").placeholder("BASE.json").as_positional();
  s.add("new_results", &c.new_results, "compare: results JSON checked against base_results").placeholder("NEW.json").as_positional();
  s.add("max_regression", &c.max_regression, "compare: limits such as tpot_p50=5%,throughput=-5%; crossing one exits 1");
}

void bind(Schema& s, DiagnoseConfig& c) {
  s.add("original", &c.original, "the original model").placeholder("PATH");
  s.add("quantized", &c.quantized, "the quantized model").placeholder("PATH");
  s.add("data", &c.data, "samples to run: JSON/JSONL/text file or a built-in set (general, code, chat)").placeholder("FILE");
  s.add("data_field", &c.data_field, "where a record's text is: auto | text | messages | prompt+completion | another key");
  s.add("threshold", &c.threshold, "cosine similarity under which a layer is flagged").range(0, 1);
  s.add("num_samples", &c.num_samples, "samples used").range(1, 100000);
  s.add("max_seq_len", &c.max_seq_len, "tokens per sample").range(2, 1 << 20);
  s.add("seed", &c.seed, "which records/windows of the data are taken").range(0, 1LL << 62);
  s.add("output_path", &c.output_path, "directory for diagnose.md, diagnose.json and diagnose.svg").placeholder("DIR");
  s.add("force", &c.force, kForceHelp);
  s.add("device", &c.device, "compute device").one_of(kDevices);
  s.add("threads", &c.threads, "CPU threads; 0 = all cores").range(0, 1024);
  s.add("json", &c.json, "print the result as JSON");
}

void bind(Schema& s, EvalConfig& c) {
  s.add("model_path", &c.model_path, "model to evaluate: HF directory or .gguf file").placeholder("MODEL").as_positional();
  s.add("base_model", &c.base_model, "base model to compare against (KL divergence, deltas)").placeholder("PATH");
  s.add("text", &c.text, "perplexity text: a file or a built-in set (wikitext2, tinystories); none = skip").placeholder("FILE");
  s.add("ppl_method", &c.ppl_method, "perplexity method: llama.cpp (comparable with llama-perplexity) or strided (Hugging Face)")
      .one_of({"llama.cpp", "strided"});
  s.add("ctx", &c.ctx, "perplexity context length in tokens").range(8, 1 << 20);
  s.add("stride", &c.stride, "strided method: tokens between window starts").range(1, 1 << 20);
  s.add("ppl_windows", &c.ppl_windows, "perplexity windows run; 0 = all").range(0, 10000000);
  s.add("tasks", &c.tasks, "multiple-choice JSONL task files or built-in names (arc_easy, piqa, copa, boolq, winogrande, lambada_openai)");
  s.add("limit", &c.limit, "items per task; 0 = all").range(0, 10000000);
  s.add("latency", &c.latency, "measure TTFT, prefill and decode tokens/s");
  s.add("latency_prompt_tokens", &c.latency_prompt_tokens, "prompt tokens of the latency runs").range(1, 1 << 20);
  s.add("latency_output_tokens", &c.latency_output_tokens, "output tokens of the latency runs").range(2, 1 << 20);
  s.add("latency_runs", &c.latency_runs, "measured latency runs after one warm-up (median reported)").range(1, 1000);
  s.add("output_path", &c.output_path, "directory for report.md and report.json; empty = print only").placeholder("DIR");
  s.add("force", &c.force, kForceHelp);
  s.add("device", &c.device, "compute device").one_of(kDevices);
  s.add("threads", &c.threads, "CPU threads; 0 = all cores").range(0, 1024);
  s.add("json", &c.json, "print the results as JSON");
}

void bind(Schema& s, GenerateConfig& c) {
  s.add("model_path", &c.model_path, "model to run: HF directory or .gguf file (a budget preset with --load-format dummy)")
      .placeholder("MODEL")
      .as_positional();
  s.add("prompt", &c.prompt, "prompt text, kept as given (spaces and newlines included); empty = start from BOS").keep_spaces();
  s.add("chat", &c.chat, "send the prompt as a user message through the model's chat template");
  s.add("system", &c.system, "system message for --chat").keep_spaces();
  s.add("max_tokens", &c.max_tokens, "tokens to generate at most").range(1, 1 << 24);
  s.add("temperature", &c.temperature, "sampling temperature; 0 = greedy").range(0, 2);
  s.add("top_k", &c.top_k, "keep the k most likely tokens; 0 = all").range(-1, 1 << 24);
  s.add("top_p", &c.top_p, "nucleus sampling mass").range(1e-9, 1);
  s.add("min_p", &c.min_p, "drop tokens below min_p x the top probability").range(0, 1);
  s.add("repetition_penalty", &c.repetition_penalty, "penalty for tokens already in prompt or output (1 = off)").range(1e-3, 10);
  s.add("presence_penalty", &c.presence_penalty, "subtracted from tokens present in the output").range(-2, 2);
  s.add("frequency_penalty", &c.frequency_penalty, "subtracted per occurrence in the output").range(-2, 2);
  s.add("stop", &c.stop, "stop strings (comma-separated on the command line), kept as given").keep_spaces();
  s.add("ignore_eos", &c.ignore_eos, "keep generating past the end-of-sequence token");
  s.add("seed", &c.seed, "sampling seed (same seed, same output)").range(0, 9.2e18);
  s.add("block_size", &c.block_size, "tokens per KV-cache block (8, 16 or 32)").range(8, 32);
  s.add("kv_cache_dtype", &c.kv_cache_dtype, "KV-cache element type").one_of({"f16", "f32"});
  s.add("load_format", &c.load_format, "auto = read the model; dummy = random weights with a budget preset's shapes")
      .one_of({"auto", "dummy"});
  s.add("dummy_type", &c.dummy_type, "weight type for --load-format dummy")
      .one_of({"f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "awq"});
  s.add("device", &c.device, "compute device: cuda runs the model on the GPU, auto = cuda when one is visible").one_of(kDevices);
  s.add("threads", &c.threads, "CPU threads; 0 = all cores").range(0, 1024);
}

void bind(Schema& s, ConvertConfig& c) {
  s.add("model_path", &c.model_path, "input model: HF directory or .gguf file").placeholder("IN").as_positional();
  s.add("output_path", &c.output_path, "output: a new directory (HF) or .gguf file").placeholder("OUT").as_positional();
  s.add("output_format", &c.output_format, "what to write; auto = gguf when OUT ends in .gguf, else an HF directory")
      .one_of({"auto", "hf", "gguf"});
  s.add("dtype", &c.dtype, "element type of the written weights; auto = as stored (f16 for quantized GGUF input)")
      .one_of({"auto", "f32", "f16", "bf16"});
  s.add("force", &c.force, kForceHelp);
  s.add("max_shard_size_mb", &c.max_shard_size_mb, "largest safetensors shard in MB").range(1, 1 << 20);
}

void bind(Schema& s, InspectConfig& c) {
  s.add("model_path", &c.model_path, "model directory or .gguf file").placeholder("MODEL").as_positional();
  s.add("tokenize", &c.tokenize, "print the token ids of TEXT, kept as given (one line, space-separated)")
      .placeholder("TEXT")
      .keep_spaces();
  s.add("detokenize", &c.detokenize, "print the text of the space-separated token IDS").placeholder("IDS");
  s.add("json", &c.json, "print as JSON");
}

}  // namespace mo::config
