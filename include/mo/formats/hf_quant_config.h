#pragma once
// The `quantization_config` object of an HF config.json for the checkpoints we write — AWQ GEMM
// (AutoAWQ), GPTQ v1/v2 (AutoGPTQ / GPTQModel) and FP8 in compressed-tensors' "float-quantized" form —
// spelled the way vLLM and Transformers read them, and the parser the engine loads checkpoints with.
//
// Tensors per quantized linear `<module>` (e.g. "model.layers.0.self_attn.q_proj"):
//   AWQ:  <module>.qweight I32 [in, out/8], .qzeros I32 [in/G, out/8], .scales F16 [in/G, out]
//   GPTQ: <module>.qweight I32 [in*bits/32, out], .qzeros I32 [groups, out*bits/32], .scales F16
//         [groups, out], .g_idx I32 [in]
//   FP8:  <module>.weight F8_E4M3 [out, in], .weight_scale F32 [out, 1] (channel) or [1] (tensor)
//   compressed-tensors pack-quantized (INT4/INT8): <module>.weight_packed I32 [out, ceil(in*bits/32)],
//         .weight_scale F16 [out, groups], .weight_shape I64 [2] = {out, in}, and (asymmetric only)
//         .weight_zero_point I32 [ceil(out*bits/32), groups]
// Unquantized linears keep <module>.weight in the model's float type. (mo/formats/pack.h has the bit layouts.)
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace mo::formats {

// AWQ GEMM: {"quant_method": "awq", "bits": 4, "group_size": G, "zero_point": true, "version": "gemm",
// "modules_to_not_convert": [..] | null}. vLLM leaves a linear unquantized when its name contains any
// entry of modules_to_not_convert (a substring test, so "mlp" covers every MLP projection). vLLM tests
// its fused names (qkv_proj, gate_up_proj): name whole blocks ("model.layers.3.mlp.", with the final dot
// so layer 30 is not caught) or unfused modules (o_proj, down_proj).
struct AwqConfigOptions {
  int group_size = 128;                             // -1: one group per output row
  std::vector<std::string> modules_to_not_convert;  // empty: written as null
};
nlohmann::json awq_quantization_config(const AwqConfigOptions& o);

// One GPTQModel `dynamic` rule, keyed "+:<regex>" (override) or "-:<regex>" (skip). vLLM tests each
// rule with Python's re.match (anchored at the start, not the end) against the module name as vLLM
// sees it, first match wins. Two caveats for writers: vLLM fuses q/k/v into "qkv_proj" and gate/up into
// "gate_up_proj", so a rule must not split those groups; and nlohmann::json keeps keys sorted, so the
// written order is "+:" rules before "-:" rules — give rules that do not overlap.
struct GptqDynamicRule {
  std::string pattern;                                  // Python regex, without the "+:" / "-:" prefix
  bool skip = false;                                    // "-:": the module stays an unquantized `weight`
  nlohmann::json overrides = nlohmann::json::object();  // "+:": any of bits, group_size, desc_act, sym
};

// The pattern of a rule for one HF module: escaped, anchored at the end, and also matching the name vLLM
// gives the fused layer it belongs to — "model\.layers\.3\.self_attn\.(?:q_proj|qkv_proj)$". vLLM applies
// the first matching rule to the whole fused layer, so q/k/v (and gate/up) must get the same rule.
std::string gptq_dynamic_pattern(const std::string& module);

// GPTQ: {"quant_method": "gptq", "bits", "group_size", "damp_percent", "desc_act", "static_groups", "sym",
// "true_sequential", "lm_head", "checkpoint_format": "gptq" | "gptq_v2", "dynamic"?: {..}}.
// desc_act must be true when any g_idx is not i / group_size: vLLM ignores g_idx otherwise.
struct GptqConfigOptions {
  int bits = 4;          // 4 or 8
  int group_size = 128;  // -1: one group per output row
  double damp_percent = 0.01;
  bool desc_act = false;  // act-order: g_idx is a permutation-derived map
  bool static_groups = false;
  bool sym = true;
  bool true_sequential = true;
  bool lm_head = false;                  // lm_head quantized too (GPTQModel); AutoGPTQ never does
  bool v2 = false;                       // checkpoint_format "gptq_v2": qzeros hold the true zero (v1 holds zero-1)
  std::vector<GptqDynamicRule> dynamic;  // empty: no "dynamic" key
};
nlohmann::json gptq_quantization_config(const GptqConfigOptions& o);
// quantize_config.json beside config.json (AutoGPTQ and GPTQModel write both; older loaders read only
// this file): the same keys plus "meta": {"quantizer": ["model-optimizer:<version>"]}.
nlohmann::json gptq_quantize_config_file(const GptqConfigOptions& o);

// FP8 E4M3 weights in compressed-tensors' "float-quantized" form (llm-compressor's FP8 / FP8_DYNAMIC
// schemes), loaded by vLLM as CompressedTensorsW8A8Fp8 (dynamic activations) or W8A16Fp8 (none).
enum class Fp8Activations {
  none,               // weight-only (input_activations null): fp8 weights, 16-bit activations
  dynamic_per_token,  // input_activations {strategy token, dynamic true}: scales computed at run time
};
struct Fp8ConfigOptions {
  bool per_channel = true;  // weight_scale [out, 1]; false: one scale per tensor, shape [1]
  Fp8Activations activations = Fp8Activations::dynamic_per_token;
  std::vector<std::string> ignore = {"lm_head"};  // module names, or "re:<regex>"
};
nlohmann::json fp8_quantization_config(const Fp8ConfigOptions& o);

// Integer weights in compressed-tensors' "pack-quantized" form (llm-compressor's W4A16 / W8A16 schemes,
// vLLM's CompressedTensorsWNA16, Transformers' compressed-tensors quantizer): one config group per
// precision, each naming its modules exactly, so every loader that matches per module (vLLM, Transformers)
// gets each linear's own bits and group size. Weight-only: input_activations null.
struct CtIntGroup {
  int bits = 4;                      // 4 or 8
  int group_size = 128;              // -1: one scale per output channel (strategy "channel")
  bool sym = true;                   // false: weight_zero_point tensors
  std::vector<std::string> targets;  // HF module names, matched exactly
};
struct CtPackedConfigOptions {
  std::vector<CtIntGroup> groups;                 // written as group_0, group_1, ... in this order
  std::vector<std::string> ignore = {"lm_head"};  // unquantized linears
};
nlohmann::json ct_pack_quantized_config(const CtPackedConfigOptions& o);

enum class QuantMethod { awq, gptq, fp8, ct_int };
const char* quant_method_name(QuantMethod m);  // "awq", "gptq", "fp8", "compressed-tensors"

// How one linear is stored.
struct ModuleQuant {
  bool quantized = false;
  int bits = 0;        // 4, 8 (fp8: 8)
  int group_size = 0;  // -1: one group per row (fp8: -1 per channel, 0 per tensor)
  bool sym = true;
  bool desc_act = false;
};

// A parsed quantization_config we can load. Module names are HF names ("model.layers.3.mlp.up_proj",
// "lm_head").
struct HfQuantConfig {
  QuantMethod method = QuantMethod::gptq;
  int bits = 4;
  int group_size = 128;
  bool sym = true;
  bool desc_act = false;
  std::string version;   // AWQ: "gemm"
  bool gptq_v2 = false;  // checkpoint_format "gptq_v2"
  bool lm_head = false;  // GPTQ: lm_head is quantized
  bool fp8_per_channel = true;
  bool fp8_dynamic_activations = false;
  std::vector<GptqDynamicRule> dynamic;             // in file order when parsed from ordered_json
  std::vector<std::string> modules_to_not_convert;  // AWQ: skipped when the name contains one
  std::vector<std::string> modules_to_quantize;     // GPTQ modules_in_block_to_quantize (substring); empty: all
  std::vector<std::string> ignore;                  // compressed-tensors: exact name or "re:<regex>"
  std::vector<std::string> targets;                 // compressed-tensors: "Linear", names or "re:<regex>"
  struct CtGroup {
    std::vector<std::string> targets;
    ModuleQuant scheme;
  };
  std::vector<CtGroup> ct_groups;  // pack-quantized: the first group a module matches applies

  ModuleQuant module(const std::string& name) const;
  std::string describe() const;  // "gptq 4-bit g128 sym v1", for log lines and errors
};

// Throws UsageError naming the key for what we cannot load: another quant_method, AWQ other than 4-bit
// GEMM with zero points, GPTQ other than 4/8 bits or checkpoint_format gptq/gptq_v2, compressed-tensors
// other than static symmetric FP8 weights per channel or per tensor in the float-quantized format, or
// static 4/8-bit integer weights per group or channel in the pack-quantized format.
HfQuantConfig parse_quantization_config(const nlohmann::ordered_json& q);
HfQuantConfig parse_quantization_config(const nlohmann::json& q);  // `dynamic` rules in sorted key order

// Python re.match: `pattern` matches at the start of `text`. Throws UsageError when it does not compile.
bool regex_match_prefix(const std::string& pattern, const std::string& text);

}  // namespace mo::formats
