#include "quantized_weights.h"

#include <fmt/format.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "mo/core/error.h"
#include "mo/core/half.h"
#include "mo/core/log.h"
#include "mo/formats/ggml_types.h"
#include "mo/model/tensor_names.h"
#include "mo/formats/fp8.h"
#include "mo/formats/gguf_blocks.h"
#include "mo/formats/pack.h"
#include "cpu/q4z.h"

namespace mo::engine::detail {
namespace {

namespace fs = std::filesystem;

// The config again, as ordered_json: GPTQ `dynamic` rules apply first-match-wins in file order, which
// nlohmann::json's sorted keys lose. Same files, in the same order, as ModelFiles::open reads.
nlohmann::ordered_json ordered_quantization_config(const model::ModelFiles& f) {
  const fs::path dir(f.path());
  try {
    std::ifstream in(dir / "config.json");
    const auto c = nlohmann::ordered_json::parse(in);
    if (auto it = c.find("quantization_config"); it != c.end() && it->is_object()) return *it;
    for (const char* name : {"quantize_config.json", "quant_config.json"}) {
      std::ifstream side(dir / name);
      if (!side) continue;
      auto q = nlohmann::ordered_json::parse(side);
      if (q.is_object() && !q.contains("quant_method")) q["quant_method"] = f.quantization_config().value("quant_method", "");
      return q;
    }
  } catch (const nlohmann::json::exception&) {}
  return nlohmann::ordered_json::parse(f.quantization_config().dump());
}

const model::StoredTensor& need(const model::ModelFiles& f, const std::string& name) {
  const auto* t = f.find(name);
  if (!t) throw Error(fmt::format("{}: tensor '{}' is missing", f.path(), name));
  return *t;
}

// The stored shape, outermost first (as the safetensors header and PyTorch write it).
std::vector<std::int64_t> shape_of(const model::StoredTensor& t) {
  std::vector<std::int64_t> s;
  for (auto it = t.ne.rbegin(); it != t.ne.rend(); ++it) s.push_back(static_cast<std::int64_t>(*it));
  return s;
}

void expect(const model::ModelFiles& f, const model::StoredTensor& t, const char* dtype, std::vector<std::int64_t> shape) {
  if (t.dtype != dtype || shape_of(t) != shape)
    throw Error(fmt::format("{}: tensor '{}': expected {} [{}], found {} [{}]", f.path(), t.file_name, dtype, fmt::join(shape, ", "),
                            t.dtype, fmt::join(shape_of(t), ", ")));
}

template <class T>
std::vector<T> copy_as(const model::StoredTensor& t) {
  std::vector<T> v(t.bytes.size() / sizeof(T));
  std::memcpy(v.data(), t.bytes.data(), v.size() * sizeof(T));
  return v;
}

// f32 values of a float tensor (F32, F16 or BF16; each converts exactly).
std::vector<float> floats_of(const model::ModelFiles& f, const model::StoredTensor& t) {
  const std::uint64_t n = t.n_elements();
  std::vector<float> v(n);
  if (t.dtype == "f32")
    std::memcpy(v.data(), t.bytes.data(), n * 4);
  else if (t.dtype == "f16" || t.dtype == "bf16") {
    const auto h = copy_as<std::uint16_t>(t);
    for (std::uint64_t i = 0; i < n; ++i) v[i] = t.dtype == "f16" ? f16_to_f32(h[i]) : bf16_to_f32(h[i]);
  } else {
    throw Error(fmt::format("{}: tensor '{}': expected a float type (F32, F16, BF16), found {}", f.path(), t.file_name, t.dtype));
  }
  return v;
}

formats::Fp8Linear fp8_linear(const model::ModelFiles& f, const model::StoredTensor& weight, const std::string& module, std::int64_t rows,
                              std::int64_t cols) {
  expect(f, weight, "F8_E4M3", {rows, cols});
  const auto& st = need(f, module + ".weight_scale");  // F32 [out, 1] / [1]; llm-compressor also writes BF16
  formats::Fp8Linear l;
  l.rows = rows, l.cols = cols;
  l.scales = floats_of(f, st);
  l.per_channel = l.scales.size() != 1;
  if (l.per_channel && l.scales.size() != static_cast<std::size_t>(rows))
    throw Error(fmt::format("{}: tensor '{}': expected {} per-channel scales or 1 per-tensor scale, found {}", f.path(), st.file_name, rows,
                            l.scales.size()));
  l.q.assign(weight.bytes.begin(), weight.bytes.end());
  return l;
}

// compressed-tensors pack-quantized: weight_packed [out, ceil(in/pf)], weight_scale [out, groups] (f16 is
// stored as is; BF16 / F32 scales, which other writers use, go through f32 to f16), weight_zero_point
// [ceil(out/pf), groups] when asymmetric, weight_shape {out, in} when present.
formats::QuantizedLinear ct_int_linear(const model::ModelFiles& f, const formats::ModuleQuant& mq, const model::StoredTensor& packed,
                                       const std::string& module, std::int64_t rows, std::int64_t cols) {
  const std::int64_t pf = 32 / mq.bits, G = mq.group_size == -1 ? cols : mq.group_size, groups = (cols + G - 1) / G;
  expect(f, packed, "I32", {rows, (cols + pf - 1) / pf});
  const auto& st = need(f, module + ".weight_scale");
  if (shape_of(st) != std::vector<std::int64_t>{rows, groups})
    throw Error(fmt::format("{}: tensor '{}': expected [{}, {}] scales ({} groups of {}), found [{}]", f.path(), st.file_name, rows, groups,
                            groups, G, fmt::join(shape_of(st), ", ")));
  if (const auto* ws = f.find(module + ".weight_shape")) {
    const bool i64 = ws->dtype == "I64";
    std::vector<std::int64_t> shape;
    if (i64)
      shape = copy_as<std::int64_t>(*ws);
    else if (ws->dtype == "I32")
      for (auto v : copy_as<std::int32_t>(*ws)) shape.push_back(v);
    if (shape != std::vector<std::int64_t>{rows, cols})
      throw Error(fmt::format("{}: tensor '{}': expected {{{}, {}}} (I64 or I32), found {} [{}]", f.path(), ws->file_name, rows, cols,
                              ws->dtype, fmt::join(shape, ", ")));
  }
  formats::CtPackedTensors t;
  t.weight_packed = copy_as<std::int32_t>(packed);
  if (st.dtype == "f16") {
    t.weight_scale = copy_as<std::uint16_t>(st);
  } else {
    for (float v : floats_of(f, st)) t.weight_scale.push_back(f32_to_f16(v));
  }
  if (!mq.sym) {
    const auto& zt = need(f, module + ".weight_zero_point");
    expect(f, zt, "I32", {(rows + pf - 1) / pf, groups});
    t.weight_zero_point = copy_as<std::int32_t>(zt);
  }
  t.in = cols, t.out = rows, t.groups = groups, t.bits = mq.bits;
  return formats::unpack_ct(t, mq.group_size, mq.sym);
}

// Codes, zeros, scales and g_idx of an AWQ or GPTQ linear, checked against the shapes the formats give.
formats::QuantizedLinear int_linear(const model::ModelFiles& f, const formats::HfQuantConfig& c, const formats::ModuleQuant& mq,
                                    const model::StoredTensor& qweight, const std::string& module, std::int64_t rows, std::int64_t cols) {
  const std::int64_t G = mq.group_size == formats::kGroupPerChannel ? cols : mq.group_size;
  const auto& zt = need(f, module + ".qzeros");
  const auto& st = need(f, module + ".scales");
  if (c.method == formats::QuantMethod::awq) {
    if (rows % 8 != 0 || cols % G != 0)
      throw Error(fmt::format("{}: {}: AWQ needs out % 8 == 0 and in % group_size == 0, shape [{}, {}], group {}", f.path(), module, rows,
                              cols, G));
    expect(f, qweight, "I32", {cols, rows / 8});
    expect(f, zt, "I32", {cols / G, rows / 8});
    expect(f, st, "f16", {cols / G, rows});
    return formats::unpack_awq({copy_as<std::int32_t>(qweight), copy_as<std::int32_t>(zt), copy_as<std::uint16_t>(st), cols, rows, G});
  }
  const int pf = 32 / mq.bits;
  const std::int64_t groups = (cols + G - 1) / G;
  if (rows % pf != 0 || cols % pf != 0)
    throw Error(
        fmt::format("{}: {}: GPTQ {}-bit needs in and out divisible by {}, shape [{}, {}]", f.path(), module, mq.bits, pf, rows, cols));
  expect(f, qweight, "I32", {cols / pf, rows});
  expect(f, zt, "I32", {groups, rows / pf});
  expect(f, st, "f16", {groups, rows});
  formats::GptqTensors t;
  t.qweight = copy_as<std::int32_t>(qweight);
  t.qzeros = copy_as<std::int32_t>(zt);
  t.scales = copy_as<std::uint16_t>(st);
  if (const auto* gi = f.find(module + ".g_idx")) {
    expect(f, *gi, "I32", {cols});
    t.g_idx = copy_as<std::int32_t>(*gi);
  }
  t.in = cols, t.out = rows, t.groups = groups, t.bits = mq.bits;
  return formats::unpack_gptq(t, mq.group_size, mq.sym, !c.gptq_v2);
}

// Why `q` cannot become Q8_0 blocks exactly; empty when it can.
std::string q8_0_obstacle(const formats::QuantizedLinear& q) {
  if (!q.contiguous_groups()) return "act-order g_idx";
  if (q.cols % 32 != 0) return "in_features not a multiple of 32";
  if (q.scheme.effective_group(q.cols) % 32 != 0) return "group size not a multiple of 32";
  const int ng = q.n_groups();
  for (std::int64_t r = 0; r < q.rows; ++r)
    for (std::int64_t c = 0; c < q.cols; ++c) {
      const int v = static_cast<int>(q.q[r * q.cols + c]) - static_cast<int>(q.zeros[r * ng + q.g_idx[c]]);
      if (v < -128 || v > 127) return "q - zero outside int8";
    }
  return {};
}

std::vector<std::uint8_t> to_q8_0(const formats::QuantizedLinear& q) {
  const std::int64_t blocks = q.cols / 32;
  const int ng = q.n_groups();
  std::vector<std::uint8_t> out(static_cast<std::size_t>(q.rows * blocks) * sizeof(formats::BlockQ8_0));
  auto* dst = reinterpret_cast<formats::BlockQ8_0*>(out.data());
  for (std::int64_t r = 0; r < q.rows; ++r)
    for (std::int64_t b = 0; b < blocks; ++b) {
      formats::BlockQ8_0& blk = dst[r * blocks + b];
      const std::size_t g = static_cast<std::size_t>(r) * ng + q.g_idx[b * 32];  // one group per block
      blk.d = q.scales[g];
      for (int j = 0; j < 32; ++j) blk.qs[j] = static_cast<std::int8_t>(static_cast<int>(q.q[r * q.cols + b * 32 + j]) - q.zeros[g]);
    }
  return out;
}

// Stored column order that makes every block of 32 one group: identity (empty) when groups are already
// contiguous, else the columns stably sorted by g_idx (act-order GPTQ); nullopt when some group's
// width is not a multiple of 32, so a block would straddle two groups.
std::optional<std::vector<std::int32_t>> q4z_order(const formats::QuantizedLinear& q) {
  if (q.contiguous_groups()) return std::vector<std::int32_t>{};
  std::vector<std::int32_t> order(static_cast<std::size_t>(q.cols));
  for (std::int64_t c = 0; c < q.cols; ++c) order[c] = static_cast<std::int32_t>(c);
  std::stable_sort(order.begin(), order.end(), [&](std::int32_t a, std::int32_t b) { return q.g_idx[a] < q.g_idx[b]; });
  for (std::int64_t b = 0; b < q.cols; b += 32)
    if (q.g_idx[order[b]] != q.g_idx[order[b + 31]]) return std::nullopt;
  return order;
}

// Why `q` cannot become Q4Z blocks exactly; empty when it can (then `order` is set).
std::string q4z_obstacle(const formats::QuantizedLinear& q, std::vector<std::int32_t>& order) {
  if (q.scheme.bits != 4) return "not 4-bit";
  if (q.cols % 32 != 0) return "in_features not a multiple of 32";
  const std::int64_t G = q.scheme.effective_group(q.cols);
  if (G % 32 != 0 && G != q.cols) return "group size not a multiple of 32";
  for (const std::uint8_t z : q.zeros)
    if (z > 16) return "zero point above 16";
  auto o = q4z_order(q);
  if (!o) return "act-order groups not made of whole blocks of 32";
  order = std::move(*o);
  return {};
}

// Q4Z blocks in the stored column order `order` (empty: natural order); each block repeats its group's scale and zero.
std::vector<std::uint8_t> to_q4z(const formats::QuantizedLinear& q, const std::vector<std::int32_t>& order) {
  const std::int64_t blocks = q.cols / 32;
  const int ng = q.n_groups();
  std::vector<std::uint8_t> out(static_cast<std::size_t>(q.rows) * ops::q4z::row_bytes(q.cols));
  auto* dst = reinterpret_cast<ops::q4z::BlockQ4Z*>(out.data());
  auto col = [&](std::int64_t i) { return order.empty() ? i : static_cast<std::int64_t>(order[i]); };
  for (std::int64_t r = 0; r < q.rows; ++r) {
    const std::uint8_t* qr = q.q.data() + r * q.cols;
    for (std::int64_t b = 0; b < blocks; ++b) {
      ops::q4z::BlockQ4Z& blk = dst[r * blocks + b];
      const std::size_t g = static_cast<std::size_t>(r) * ng + q.g_idx[col(b * 32)];
      blk.d = q.scales[g];
      blk.z = q.zeros[g];
      for (int j = 0; j < 16; ++j) blk.qs[j] = static_cast<std::uint8_t>((qr[col(b * 32 + j)] & 15) | (qr[col(b * 32 + j + 16)] & 15) << 4);
    }
  }
  return out;
}

// The stored tensors were read once to build the owned blocks: give their mapped pages back so resident
// memory stays near the file size (the device path faults them in again if it uploads them). PAGEOUT
// never loses data, whatever the memory is.
void release_pages(std::span<const std::uint8_t> s) {
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<std::uintptr_t>(s.data()) + page - 1) / page * page;
  const auto end = (reinterpret_cast<std::uintptr_t>(s.data()) + s.size()) / page * page;
#ifdef MADV_PAGEOUT
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_PAGEOUT);
#endif
}

std::vector<std::uint8_t> to_f32_bytes(const std::vector<float>& w) {
  std::vector<std::uint8_t> out(w.size() * 4);
  std::memcpy(out.data(), w.data(), out.size());
  return out;
}

Matrix owned_matrix(std::string name, std::uint32_t type, std::int64_t rows, std::int64_t cols, std::vector<std::uint8_t> bytes,
                    std::vector<std::vector<std::uint8_t>>& owned) {
  Matrix m;
  m.name = std::move(name);
  m.type = type;
  m.rows = rows;
  m.cols = cols;
  m.row_bytes = type == kQ4zType ? ops::q4z::row_bytes(cols) : ggml_row_bytes(type, static_cast<std::uint64_t>(cols));
  auto& buf = owned.emplace_back(std::move(bytes));
  m.bytes = {buf.data(), buf.size()};
  return m;
}

// The stored tensors (already shape-checked by int_linear) for the device kernels; g_idx is dropped
// when it is the plain k / G order, so the kernels take the faster contiguous-group path.
std::shared_ptr<const PackedIntLinear> packed_of(const model::ModelFiles& f, const formats::HfQuantConfig& c,
                                                 const formats::ModuleQuant& mq, const model::StoredTensor& qweight,
                                                 const std::string& module, std::int64_t cols, const formats::QuantizedLinear& q) {
  auto p = std::make_shared<PackedIntLinear>();
  p->awq = c.method == formats::QuantMethod::awq;
  p->bits = mq.bits;
  p->group_size = mq.group_size == formats::kGroupPerChannel ? cols : mq.group_size;
  p->groups = (cols + p->group_size - 1) / p->group_size;
  p->zero_minus_one = !p->awq && !c.gptq_v2;
  p->qweight = qweight.bytes;
  p->qzeros = need(f, module + ".qzeros").bytes;
  p->scales = need(f, module + ".scales").bytes;
  if (const auto* gi = f.find(module + ".g_idx"); gi && !q.contiguous_groups()) p->g_idx = gi->bytes;
  return p;
}

}  // namespace

QuantizedLinears::QuantizedLinears(const model::ModelFiles& files) : files_(files) {
  try {
    config_ = formats::parse_quantization_config(ordered_quantization_config(files));
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("{}: {}", files.path(), e.what()));
  }
}

std::optional<Matrix> QuantizedLinears::load(const std::string& base, std::int64_t rows, std::int64_t cols,
                                             std::vector<std::vector<std::uint8_t>>& owned) {
  const auto& f = files_;
  const auto hf_weight = model::gguf_to_hf_name(base + ".weight");
  if (!hf_weight) throw Error(fmt::format("{}: no HF module name for '{}'", f.path(), base));
  const std::string module = hf_weight->substr(0, hf_weight->size() - 7);  // drop ".weight"
  const bool fp8 = config_.method == formats::QuantMethod::fp8, ct_int = config_.method == formats::QuantMethod::ct_int;
  const model::StoredTensor* weight = f.find(base + ".weight");
  const std::string qweight_name = module + (ct_int ? ".weight_packed" : ".qweight");
  const model::StoredTensor* qweight = f.find(qweight_name);
  const bool stored_quantized = fp8 ? weight && weight->dtype == "F8_E4M3" : qweight != nullptr;
  // The LM head is quantized only when the checkpoint says so with its tensors (GPTQModel lm_head,
  // compressed-tensors without lm_head in `ignore`); AutoAWQ and most writers keep it float.
  const formats::ModuleQuant mq =
      base == "output" ? formats::ModuleQuant{stored_quantized, config_.bits, config_.group_size, config_.sym, config_.desc_act}
                       : config_.module(module);
  if (!mq.quantized) {
    if (stored_quantized)
      throw Error(fmt::format("{}: {} is stored quantized but quantization_config ({}) leaves it unquantized", f.path(), module,
                              config_.describe()));
    ++counts_["float (left unquantized by the checkpoint)"];
    return std::nullopt;
  }
  if (!stored_quantized)
    throw Error(fmt::format("{}: quantization_config ({}) quantizes {} but tensor '{}' is missing", f.path(), config_.describe(), module,
                            fp8 ? module + ".weight (F8_E4M3)" : qweight_name));

  if (fp8) {
    ++counts_["f32 (fp8 weights dequantized: fp8 value * scale)"];
    return owned_matrix(base + ".weight", ggml_id(GgmlType::F32), rows, cols,
                        to_f32_bytes(fp8_linear(f, *weight, module, rows, cols).dequantize()), owned);
  }
  const formats::QuantizedLinear q =
      ct_int ? ct_int_linear(f, mq, *qweight, module, rows, cols) : int_linear(f, config_, mq, *qweight, module, rows, cols);
  if (!mq.desc_act && !q.contiguous_groups()) ++g_idx_without_desc_act_;
  std::vector<std::int32_t> order;
  const std::string q4z_why = q4z_obstacle(q, order);
  // A 4-bit linear that misses Q4Z misses Q8_0 for the same reason; name the Q4Z one.
  const std::string obstacle = q4z_why.empty() ? std::string() : q.scheme.bits == 4 ? q4z_why : q8_0_obstacle(q);
  Matrix m;
  if (q4z_why.empty()) {
    ++counts_[order.empty() ? "q4z (4-bit blocks of 32: stored f16 scale, zero, nibbles: exact)"
                            : "q4z (act-order: input columns permuted to contiguous groups: exact)"];
    m = owned_matrix(base + ".weight", kQ4zType, rows, cols, to_q4z(q, order), owned);
    if (!order.empty()) m.in_perm = std::make_shared<const std::vector<std::int32_t>>(std::move(order));
  } else if (obstacle.empty()) {
    ++counts_["q8_0 (d = f16 scale, qs = q - zero: exact)"];
    m = owned_matrix(base + ".weight", ggml_id(GgmlType::Q8_0), rows, cols, to_q8_0(q), owned);
  } else {
    ++counts_[fmt::format("f32 ({}: exact dequantization)", obstacle)];
    m = owned_matrix(base + ".weight", ggml_id(GgmlType::F32), rows, cols, to_f32_bytes(q.dequantize()), owned);
  }
  if (ct_int) {
    // No device kernel reads pack-quantized words yet: the GPU path uploads the CPU form (q8_0, or f16).
    for (const char* t : {".weight_packed", ".weight_scale", ".weight_zero_point"})
      if (const auto* st = f.find(module + t)) release_pages(st->bytes);
    return m;
  }
  m.packed = packed_of(f, config_, mq, *qweight, module, cols, q);
  for (const auto& span : {m.packed->qweight, m.packed->qzeros, m.packed->scales}) release_pages(span);
  if (const auto* gi = f.find(module + ".g_idx")) release_pages(gi->bytes);
  return m;
}

void QuantizedLinears::log_summary() const {
  std::vector<std::string> parts;
  for (const auto& [what, n] : counts_) parts.push_back(fmt::format("{} {}", n, what));
  log::info("{}: {} checkpoint; linears: {}", files_.path(), config_.describe(), fmt::join(parts, ", "));
  // We follow g_idx as stored (as AutoGPTQ's reference dequantizer does); vLLM skips it unless desc_act.
  if (g_idx_without_desc_act_ > 0)
    log::warn("{}: {} linears have act-order g_idx but desc_act is false: vLLM ignores g_idx then and computes other weights",
              files_.path(), g_idx_without_desc_act_);
}

}  // namespace mo::engine::detail
