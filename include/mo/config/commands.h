#pragma once
// Typed configs of the subcommands whose modules are not built yet (budget's is in mo/budget/). YAML keys and flags share the field names
// (flags also answer to the dashed twin); bind_*() attaches each field to a Schema with its help.
#include <cstdint>
#include <string>
#include <vector>

#include "mo/config/schema.h"

namespace mo::config {

struct QuantizeConfig {
  std::string model_path;                        // HF model directory or .gguf file to quantize
  std::string output_path;                       // new directory (or .gguf file); never an existing path
  std::string quant_method = "awq";              // rtn | awq | gptq | fp8 | gguf
  std::int64_t bits = 4;                         // 4 or 8
  std::int64_t group_size = 128;                 // weights per scale; -1 = per output channel
  bool sym = true;                               // rtn/gptq: symmetric (vLLM's fast kernels); awq is always asymmetric
  std::string fp8_scale = "channel";             // fp8: channel | tensor
  std::string calibration_data = "general";      // JSON/JSONL file or a built-in set name
  std::int64_t num_samples = 128;                // calibration samples used
  std::int64_t max_seq_len = 512;                // tokens per calibration sample
  std::string calibration_field = "auto";        // auto | text | messages | prompt+completion | another key
  bool calibration_pack = true;                  // concatenate records into full-length samples (false: truncate each)
  std::int64_t seed = 0;                         // which calibration records/windows are taken
  double sensitivity_threshold = 0.98;           // output cosine below this falls back to fallback_bits; 0 = off
  std::vector<std::string> skip_layers;          // names, globs or layer ranges kept unquantized
  std::int64_t fallback_bits = 8;                // bits for layers found sensitive
  double damp_percent = 0.01;                    // GPTQ Hessian dampening
  bool desc_act = true;                          // GPTQ act-order (static groups: g_idx stays i / G, loads like plain GPTQ)
  std::string load_format = "auto";              // auto | dummy (random weights of a preset's shape, for speed/memory runs)
  std::uint64_t max_shard_bytes = 2'000'000'000ull; // safetensors shard size
  std::string gguf_type = "q4_k_m";              // GGUF file type for quant_method gguf
  std::string imatrix = "auto";                  // auto | none | FILE
  bool eval = true;                              // evaluate base vs quantized afterwards
  std::string device = "auto";                   // cpu | cuda | auto
  std::int64_t threads = 0;                      // 0 = all cores
  bool json = false;
};
void bind(Schema& s, QuantizeConfig& c);

struct ServeConfig {
  std::string model_path;
  std::string host = "127.0.0.1";
  std::int64_t port = 8000;
  std::string served_model_name;                 // empty = the model directory's name
  std::int64_t block_size = 16;                  // tokens per KV block: 8, 16 or 32
  double gpu_memory_utilization = 0.90;
  double memory_limit = 0;                       // GiB on CPU; 0 = physical memory
  std::int64_t max_num_seqs = 256;
  std::int64_t max_model_len = 0;
  std::int64_t max_num_batched_tokens = 2048;
  bool enable_chunked_prefill = true;
  bool enable_prefix_caching = true;
  std::string kv_cache_dtype = "auto";
  std::int64_t threads = 0;
  std::string api_key;                           // empty = no authentication
  double request_timeout = 600;                  // seconds
  std::int64_t max_queue_len = 1024;             // waiting requests before 503
  std::string device = "auto";
};
void bind(Schema& s, ServeConfig& c);

struct BenchConfig {
  std::string base_url = "http://127.0.0.1:8000/v1";
  std::string model;                             // empty = the first model /v1/models lists
  std::string endpoint = "completions";          // completions | chat
  std::string concurrency = "8";                 // one level or a sweep, e.g. "1,4,16"
  double request_rate = 0;                       // requests/s; 0 = closed loop at `concurrency`
  std::int64_t input_len = 512;
  std::int64_t output_len = 256;
  std::int64_t num_prompts = 200;
  bool stream = true;
  std::string dataset;                           // JSONL/ShareGPT file; empty = synthetic prompts
  std::string api_key;
  std::string slo;                               // e.g. "ttft=500ms,tpot=50ms"
  std::string out;                               // results JSON path
  std::int64_t seed = 0;
  bool json = false;
};
void bind(Schema& s, BenchConfig& c);

struct DiagnoseConfig {
  std::string original;
  std::string quantized;
  std::string data = "general";
  double threshold = 0.98;
  std::int64_t num_samples = 32;
  std::string output_path;
  std::string device = "auto";
  bool json = false;
};
void bind(Schema& s, DiagnoseConfig& c);

struct EvalConfig {
  std::string model_path;
  std::string base_model;                        // compare against this model when set
  std::string text;                              // perplexity text file; empty = built-in set
  std::int64_t ctx = 512;
  std::vector<std::string> tasks;                // multiple-choice JSONL files
  std::int64_t limit = 0;                        // items per task; 0 = all
  std::string output_path;
  std::string device = "auto";
  bool json = false;
};
void bind(Schema& s, EvalConfig& c);

struct GenerateConfig {
  std::string model_path;                        // HF directory or .gguf file (a budget preset with load_format dummy)
  std::string prompt;                            // empty = start from BOS alone
  bool chat = false;                             // send the prompt as a user message through the chat template
  std::string system;                            // system message for --chat
  std::int64_t max_tokens = 128;
  double temperature = 0;                        // 0 = greedy
  std::int64_t top_k = 0;                        // 0 = all tokens
  double top_p = 1.0;
  double min_p = 0.0;
  double repetition_penalty = 1.0;
  double presence_penalty = 0.0;
  double frequency_penalty = 0.0;
  std::vector<std::string> stop;                 // stop strings
  bool ignore_eos = false;
  std::int64_t seed = 0;
  std::int64_t block_size = 16;                  // KV-cache block size
  std::string kv_cache_dtype = "f16";            // f16 | f32
  std::string load_format = "auto";              // auto | dummy (random weights with a preset's shapes)
  std::string dummy_type = "f16";                // weight type for load_format dummy
  std::string device = "auto";
  std::int64_t threads = 0;
};
void bind(Schema& s, GenerateConfig& c);

struct ConvertConfig {
  std::string model_path;                        // input: HF directory or .gguf file
  std::string output_path;                       // new directory (HF) or .gguf file; must not exist
  std::string output_format = "auto";            // auto (from output_path: .gguf or a directory) | hf | gguf
  std::string dtype = "auto";                    // auto (F16 for quantized input, else as stored) | f32 | f16 | bf16
  bool force = false;                            // replace an earlier output of ours (never the input)
  std::int64_t max_shard_size_mb = 5000;         // safetensors shard size
};
void bind(Schema& s, ConvertConfig& c);

struct InspectConfig {
  std::string model_path;                        // HF directory or .gguf file
  std::string tokenize;                          // print the ids of this text
  std::string detokenize;                        // print the text of these space-separated ids
  bool json = false;
};
void bind(Schema& s, InspectConfig& c);

}  // namespace mo::config
