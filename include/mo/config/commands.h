#pragma once
// Typed configs of the subcommands (budget's is in mo/budget/). YAML keys and flags share the field names
// (flags also answer to the dashed twin); bind_*() attaches each field to a Schema with its help.
#include <cstdint>
#include <string>
#include <vector>

#include "mo/config/schema.h"

namespace mo::config {

// The one overwrite flag of every command that writes (quantize, convert, eval, diagnose, bench).
inline constexpr const char* kForceHelp =
    "replace what an earlier run of model-optimizer wrote at the output path; never anything else, never the input";

struct QuantizeConfig {
  std::string model_path;             // HF model directory or .gguf file to quantize
  std::string output_path;            // new directory (or .gguf file); an existing path only with force
  bool force = false;                 // replace an earlier output of model-optimizer (kForceHelp)
  std::string quant_method = "awq";   // rtn | awq | gptq | fp8 | gguf
  std::int64_t bits = 4;              // 4 or 8
  std::int64_t group_size = 128;      // weights per scale; -1 = per output channel
  bool sym = true;                    // rtn/gptq: symmetric (vLLM's fast kernels); awq is always asymmetric
  std::string fp8_scale = "channel";  // fp8: channel | tensor
  std::string checkpoint_format =
      "auto";  // rtn/gptq: auto (gptq unless precisions are mixed, then compressed-tensors) | gptq | compressed-tensors
  std::string calibration_data = "general";            // JSON/JSONL file or a built-in set name
  std::int64_t num_samples = 128;                      // calibration samples used
  std::int64_t max_seq_len = 512;                      // tokens per calibration sample
  std::string calibration_field = "auto";              // auto | text | messages | prompt+completion | another key
  bool calibration_pack = true;                        // concatenate records into full-length samples (false: truncate each)
  std::int64_t seed = 0;                               // which calibration records/windows are taken
  double sensitivity_threshold = 0.98;                 // output cosine below this falls back to fallback_bits; 0 = off
  std::vector<std::string> skip_layers;                // names, globs or layer ranges kept unquantized
  std::int64_t fallback_bits = 8;                      // bits for layers found sensitive
  double damp_percent = 0.01;                          // GPTQ Hessian dampening
  bool desc_act = true;                                // GPTQ act-order (static groups: g_idx stays i / G, loads like plain GPTQ)
  std::string load_format = "auto";                    // auto | dummy (random weights of a preset's shape, for speed/memory runs)
  std::uint64_t max_shard_bytes = 2'000'000'000ull;    // safetensors shard size
  std::string gguf_type = "q4_k_m";                    // GGUF file type for quant_method gguf
  std::string imatrix = "auto";                        // auto | none | FILE
  bool eval = true;                                    // evaluate base vs quantized afterwards (report.md)
  std::string eval_text = "wikitext2";                 // perplexity/KL text: file or built-in set; "none" = skip
  std::int64_t eval_ctx = 512;                         // tokens per perplexity window
  std::int64_t eval_ppl_windows = 40;                  // perplexity windows; 0 = all
  std::vector<std::string> eval_tasks = {"arc_easy"};  // task files or built-in names
  std::int64_t eval_limit = 300;                       // items per task; 0 = all
  bool eval_latency = true;                            // measure TTFT and tokens/s
  std::string device = "auto";                         // cpu | cuda | auto
  std::int64_t threads = 0;                            // 0 = all cores
  bool json = false;
};
void bind(Schema& s, QuantizeConfig& c);

struct ServeConfig {
  std::string model_path;
  std::string host = "127.0.0.1";
  std::int64_t port = 8000;
  std::string served_model_name;  // empty = the model directory's name
  std::int64_t block_size = 16;   // tokens per KV block: 8, 16 or 32
  double gpu_memory_utilization = 0.90;
  double memory_limit = 0;  // GiB on CPU; 0 = physical memory
  std::int64_t max_num_seqs = 256;
  std::int64_t max_model_len = 0;
  std::int64_t max_num_batched_tokens = 2048;
  bool enable_chunked_prefill = true;
  bool enable_prefix_caching = true;
  std::string kv_cache_dtype = "auto";
  std::int64_t threads = 0;
  std::string api_key;                  // empty = no authentication
  double request_timeout = 600;         // seconds
  std::int64_t max_queue_len = 1024;    // waiting requests before 429
  std::int64_t max_connections = 1024;  // client connections served at once; idle and slow ones too
  double read_timeout = 60;             // seconds a client has to send its headers, and again its body
  std::string device = "auto";
  double shutdown_timeout = 30;         // seconds in-flight requests get to finish after SIGINT/SIGTERM
  std::int64_t default_max_tokens = 0;  // output cap when a request gives none; 0 = the rest of max_model_len (completions: 16)
  double default_temperature = 1.0;     // sampling defaults for parameters a request leaves out
  double default_top_p = 1.0;
  std::int64_t default_top_k = 0;
  double default_min_p = 0.0;
  double default_repetition_penalty = 1.0;
  std::int64_t seed = 0;  // sampling seed of requests that give none (each request gets seed + its number)
};
void bind(Schema& s, ServeConfig& c);

struct BenchConfig {
  std::string base_url = "http://127.0.0.1:8000/v1";
  std::string model;                     // empty = the first model /v1/models lists
  std::string endpoint = "completions";  // completions | chat
  std::string concurrency = "8";         // one level or a sweep, e.g. "1,4,16"
  double request_rate = 0;               // requests/s; 0 = closed loop at `concurrency`
  std::int64_t input_len = 512;
  std::int64_t output_len = 256;
  std::int64_t num_prompts = 200;
  bool stream = true;
  std::string dataset;  // JSONL/ShareGPT file; empty = synthetic prompts
  std::string api_key;
  std::string slo;      // e.g. "ttft=500ms,tpot=50ms"
  std::string out;      // results JSON path
  bool report = false;  // also write the Markdown report and the SVG plot beside `out` (NAME.md, NAME.svg)
  bool force = false;   // replace earlier results of model-optimizer (kForceHelp)
  std::int64_t seed = 0;
  bool json = false;
  std::string input_len_dist = "fixed";   // fixed | uniform | normal
  double input_len_spread = 0;            // uniform: +-spread*input_len; normal: sd = spread*input_len
  std::string output_len_dist = "fixed";  // fixed | uniform | normal
  double output_len_spread = 0;
  std::string arrival = "poisson";  // poisson | constant (with request_rate)
  std::int64_t warmup = 1;          // requests per level before measuring, not counted
  bool ignore_eos = true;           // ask the server to generate exactly max_tokens
  double timeout = 600;             // seconds per request
  bool progress = true;             // live progress line on stderr
  std::string action;               // "compare": compare two results files instead of running
  std::string base_results;         // compare: the reference results JSON
  std::string new_results;          // compare: the results JSON checked against it
  std::string max_regression;       // compare: "tpot_p50=5%,throughput=-5%"; crossing one exits 1
};
void bind(Schema& s, BenchConfig& c);

struct DiagnoseConfig {
  std::string original;             // the original model: HF directory or .gguf
  std::string quantized;            // its quantization: HF directory (AWQ/GPTQ/INT8/FP8) or .gguf
  std::string data = "general";     // samples: JSON/JSONL/text file or a built-in set (general | code | chat)
  std::string data_field = "auto";  // where a record's text is (as calibration_field)
  double threshold = 0.98;          // local cosine under which a linear / layer is flagged
  std::int64_t num_samples = 32;    // samples run through both models
  std::int64_t max_seq_len = 256;   // tokens per sample
  std::int64_t seed = 0;            // which records/windows are taken
  std::string output_path;          // directory for diagnose.md, diagnose.json, diagnose.svg; empty = print only
  bool force = false;               // replace earlier reports of model-optimizer there (kForceHelp)
  std::string device = "auto";
  std::int64_t threads = 0;  // 0 = all cores
  bool json = false;
};
void bind(Schema& s, DiagnoseConfig& c);

struct EvalConfig {
  std::string model_path;                // model to evaluate: HF directory or .gguf
  std::string base_model;                // compare against this model when set (KL, deltas)
  std::string text = "wikitext2";        // perplexity text: a file or a built-in set (wikitext2, tinystories); "none" = skip
  std::string ppl_method = "llama.cpp";  // llama.cpp | strided
  std::int64_t ctx = 512;                // tokens per perplexity window
  std::int64_t stride = 256;             // strided method: tokens between window starts
  std::int64_t ppl_windows = 0;          // perplexity windows run; 0 = all
  std::vector<std::string> tasks;        // multiple-choice JSONL files or built-in task names
  std::int64_t limit = 0;                // items per task; 0 = all
  bool latency = true;                   // measure TTFT and prefill/decode tokens/s
  std::int64_t latency_prompt_tokens = 128;
  std::int64_t latency_output_tokens = 64;
  std::int64_t latency_runs = 3;  // measured runs after one warm-up; the median is reported
  std::string output_path;        // directory for report.md and report.json; empty = print only
  bool force = false;             // replace earlier reports of model-optimizer there (kForceHelp)
  std::string device = "auto";
  std::int64_t threads = 0;  // 0 = all cores
  bool json = false;
};
void bind(Schema& s, EvalConfig& c);

struct GenerateConfig {
  std::string model_path;  // HF directory or .gguf file (a budget preset with load_format dummy)
  std::string prompt;      // empty = start from BOS alone
  bool chat = false;       // send the prompt as a user message through the chat template
  std::string system;      // system message for --chat
  std::int64_t max_tokens = 128;
  double temperature = 0;  // 0 = greedy
  std::int64_t top_k = 0;  // 0 = all tokens
  double top_p = 1.0;
  double min_p = 0.0;
  double repetition_penalty = 1.0;
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  std::vector<std::string> stop;  // stop strings
  bool ignore_eos = false;
  std::int64_t seed = 0;
  std::int64_t block_size = 16;        // KV-cache block size
  std::string kv_cache_dtype = "f16";  // f16 | f32
  std::string load_format = "auto";    // auto | dummy (random weights with a preset's shapes)
  std::string dummy_type = "f16";      // weight type for load_format dummy
  std::string device = "auto";
  std::int64_t threads = 0;
};
void bind(Schema& s, GenerateConfig& c);

struct ConvertConfig {
  std::string model_path;                 // input: HF directory or .gguf file
  std::string output_path;                // new directory (HF) or .gguf file; must not exist
  std::string output_format = "auto";     // auto (from output_path: .gguf or a directory) | hf | gguf
  std::string dtype = "auto";             // auto (F16 for quantized input, else as stored) | f32 | f16 | bf16
  bool force = false;                     // replace an earlier output of ours (never the input)
  std::int64_t max_shard_size_mb = 5000;  // safetensors shard size
};
void bind(Schema& s, ConvertConfig& c);

struct InspectConfig {
  std::string model_path;  // HF directory or .gguf file
  std::string tokenize;    // print the ids of this text
  std::string detokenize;  // print the text of these space-separated ids
  bool json = false;
};
void bind(Schema& s, InspectConfig& c);

}  // namespace mo::config
