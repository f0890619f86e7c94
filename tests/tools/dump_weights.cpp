// What our loaders and packers compute, for tests/python/test_quant_packing.py.
//   mo_tool_dump_weights list MODEL                      JSON {linear: {"type", "rows", "cols"}} after bind_weights
//   mo_tool_dump_weights linear MODEL NAME OUT.f32       one linear ("blk.0.attn_q", "output") dequantized to f32
//   mo_tool_dump_weights pack FORMAT BITS SYM ACTORDER ROWS COLS GROUP SEED OUT.safetensors
//       random codes, zeros, scales and g_idx packed by mo::quant; FORMAT awq | gptq_v1 | gptq_v2. The file
//       holds the packed tensors (qweight, qzeros, scales, g_idx) and the inputs (ref_q U8 [rows, cols],
//       ref_zeros U8 [rows, groups], ref_scales F16 [rows, groups], ref_g_idx I32 [cols]).
//   mo_tool_dump_weights fp8_encode IN.f32 OUT.u8        formats::f32_to_e4m3 of each value
//   mo_tool_dump_weights fp8_decode OUT.f32              formats::e4m3_to_f32 of codes 0..255
//   mo_tool_dump_weights fp8_quantize IN.f32 ROWS COLS PER_CHANNEL OUT.safetensors   formats::quantize_fp8: q U8, scales F32
//   mo_tool_dump_weights config awq|gptq|fp8 [JSON options]   the quantization_config we write
//   mo_tool_dump_weights gptq W.f32 X.f32 ROWS COLS BITS GROUP SYM DESC_ACT STATIC OUT.safetensors
//       gptq_quantize of W [rows, cols] with the Hessian of X [n, cols]: q U8, scales F16, zeros U8, g_idx I32
// f32 files are raw little-endian floats. Errors go to stderr with exit code 1.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "mo/core/error.h"
#include "mo/core/log.h"
#include "mo/core/thread_pool.h"
#include "mo/engine/backend.h"
#include "mo/engine/ops/linear.h"
#include "mo/engine/weights.h"
#include "mo/formats/ggml_types.h"
#include "mo/io/gguf_dequant.h"
#include "mo/io/safetensors.h"
#include "mo/model/model_files.h"
#include "mo/model/tensor_names.h"
#include "mo/formats/fp8.h"
#include "mo/quant/gptq.h"
#include "mo/formats/hf_quant_config.h"
#include "mo/formats/pack.h"

namespace formats = mo::formats;

namespace {

using nlohmann::json;

std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw mo::UsageError(path + ": cannot open");
  std::vector<char> b{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

void write_bytes(const std::string& path, const void* data, std::size_t n) {
  std::ofstream out(path, std::ios::binary);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  if (!out) throw mo::Error(path + ": cannot write");
}

std::vector<std::pair<std::string, const mo::engine::Matrix*>> linears(const mo::engine::ModelWeights& w) {
  std::vector<std::pair<std::string, const mo::engine::Matrix*>> out = {{"output", &w.output}};
  for (std::size_t i = 0; i < w.layers.size(); ++i) {
    const auto& l = w.layers[i];
    const std::pair<const char*, const mo::engine::Matrix*> parts[] = {{"attn_q", &l.wq},      {"attn_k", &l.wk},       {"attn_v", &l.wv},
                                                                       {"attn_output", &l.wo}, {"ffn_gate", &l.w_gate}, {"ffn_up", &l.w_up},
                                                                       {"ffn_down", &l.w_down}};
    for (const auto& [n, m] : parts) out.emplace_back("blk." + std::to_string(i) + "." + n, m);
  }
  return out;
}

const char* type_name(std::uint32_t t) {
  if (t == mo::engine::kQ4zType) return "q4z";  // engine-internal AWQ / GPTQ INT4 blocks
  const auto* info = mo::ggml_type_info(t);
  return info ? info->name : "?";
}

int cmd_list(const std::string& model) {
  auto files = mo::model::ModelFiles::open(model);
  auto w = mo::engine::bind_weights(files);
  json out = json::object();
  for (const auto& [name, m] : linears(w)) out[name] = {{"type", type_name(m->type)}, {"rows", m->rows}, {"cols", m->cols}};
  std::cout << out.dump() << "\n";
  return 0;
}

int cmd_linear(const std::string& model, std::string name, const std::string& out_path) {
  auto files = mo::model::ModelFiles::open(model);
  auto w = mo::engine::bind_weights(files);
  // An HF module name ("model.layers.0.self_attn.q_proj") works too.
  if (auto g = mo::model::hf_to_gguf_name(name + ".weight")) name = g->substr(0, g->size() - 7);
  for (const auto& [n, m] : linears(w)) {
    if (n != name) continue;
    std::vector<float> v(static_cast<std::size_t>(m->rows * m->cols));
    for (std::int64_t r = 0; r < m->rows; ++r) mo::ops::matrix_row(*m, r, v.data() + r * m->cols);
    write_bytes(out_path, v.data(), v.size() * 4);
    std::cout << json{{"type", type_name(m->type)}, {"rows", m->rows}, {"cols", m->cols}}.dump() << "\n";
    return 0;
  }
  throw mo::UsageError("no linear named '" + name + "'");
}

mo::st::TensorData td(const std::string& name, mo::st::Dtype d, std::vector<std::int64_t> shape, const void* data, std::size_t nbytes) {
  return {name, d, std::move(shape), data, nbytes};
}

int cmd_pack(const std::vector<std::string>& a) {
  const std::string format = a[0];
  const int bits = std::stoi(a[1]);
  const bool sym = a[2] == "1", actorder = a[3] == "1";
  const std::int64_t rows = std::stoll(a[4]), cols = std::stoll(a[5]);
  const int group = std::stoi(a[6]);
  std::mt19937_64 rng(std::stoull(a[7]));
  const bool v1 = format != "gptq_v2";

  formats::QuantizedLinear q;
  q.rows = rows, q.cols = cols;
  q.scheme = {bits, group, sym};
  const std::int64_t G = q.scheme.effective_group(cols), ng = q.scheme.groups(cols);
  const unsigned levels = 1u << bits;
  q.q.resize(rows * cols);
  for (auto& c : q.q) c = static_cast<std::uint8_t>(rng() % levels);
  for (std::int64_t i = 0; i < rows * ng; ++i) {
    // v1 cannot store a zero of 0 (it writes zero-1); draw from [1, 2^bits) there.
    q.zeros.push_back(sym ? static_cast<std::uint8_t>(levels / 2)
                          : static_cast<std::uint8_t>(v1 ? 1 + rng() % (levels - 1) : rng() % levels));
    q.scales.push_back(static_cast<std::uint16_t>(0x1000 + rng() % 0x3000));  // positive normal f16 values
  }
  q.g_idx.resize(cols);
  for (std::int64_t c = 0; c < cols; ++c) q.g_idx[c] = static_cast<std::int32_t>(c / G);
  if (actorder) std::shuffle(q.g_idx.begin(), q.g_idx.end(), rng);

  std::vector<mo::st::TensorData> t;
  formats::AwqTensors awq;
  formats::GptqTensors gptq;
  using D = mo::st::Dtype;
  if (format == "awq") {
    awq = formats::pack_awq(q);
    t.push_back(td("qweight", D::I32, {cols, rows / 8}, awq.qweight.data(), awq.qweight.size() * 4));
    t.push_back(td("qzeros", D::I32, {cols / G, rows / 8}, awq.qzeros.data(), awq.qzeros.size() * 4));
    t.push_back(td("scales", D::F16, {cols / G, rows}, awq.scales.data(), awq.scales.size() * 2));
  } else {
    gptq = formats::pack_gptq(q, v1);
    const int pf = 32 / bits;
    t.push_back(td("qweight", D::I32, {cols / pf, rows}, gptq.qweight.data(), gptq.qweight.size() * 4));
    t.push_back(td("qzeros", D::I32, {ng, rows / pf}, gptq.qzeros.data(), gptq.qzeros.size() * 4));
    t.push_back(td("scales", D::F16, {ng, rows}, gptq.scales.data(), gptq.scales.size() * 2));
    t.push_back(td("g_idx", D::I32, {cols}, gptq.g_idx.data(), gptq.g_idx.size() * 4));
  }
  t.push_back(td("ref_q", D::U8, {rows, cols}, q.q.data(), q.q.size()));
  t.push_back(td("ref_zeros", D::U8, {rows, ng}, q.zeros.data(), q.zeros.size()));
  t.push_back(td("ref_scales", D::F16, {rows, ng}, q.scales.data(), q.scales.size() * 2));
  t.push_back(td("ref_g_idx", D::I32, {cols}, q.g_idx.data(), q.g_idx.size() * 4));
  mo::st::write_file(a[8], t);

  // The packers' own inverse must give the codes back too.
  const auto back = format == "awq" ? formats::unpack_awq(awq) : formats::unpack_gptq(gptq, group, sym, v1);
  if (back.q != q.q || back.zeros != q.zeros || back.scales != q.scales || back.g_idx != q.g_idx) throw mo::Error("unpack(pack(x)) != x");
  return 0;
}

int cmd_fp8_quantize(const std::vector<std::string>& a) {
  const auto w = read_floats(a[0]);
  const std::int64_t rows = std::stoll(a[1]), cols = std::stoll(a[2]);
  if (static_cast<std::int64_t>(w.size()) != rows * cols) throw mo::UsageError("size mismatch");
  const auto f = formats::quantize_fp8(w.data(), rows, cols, a[3] == "1");
  using D = mo::st::Dtype;
  const std::int64_t ns = static_cast<std::int64_t>(f.scales.size());
  mo::st::write_file(
      a[4], {td("q", D::U8, {rows, cols}, f.q.data(), f.q.size()), td("scales", D::F32, {ns}, f.scales.data(), f.scales.size() * 4)});
  return 0;
}

int cmd_gptq(const std::vector<std::string>& a) {
  const auto w = read_floats(a[0]), x = read_floats(a[1]);
  const std::int64_t rows = std::stoll(a[2]), cols = std::stoll(a[3]);
  if (static_cast<std::int64_t>(w.size()) != rows * cols || x.size() % cols != 0) throw mo::UsageError("size mismatch");
  mo::ThreadPool pool(1);
  const auto backend = mo::engine::make_cpu_backend(pool);
  mo::quant::HessianAccumulator h(*backend, cols);
  h.add(x.data(), static_cast<std::int64_t>(x.size()) / cols);
  mo::quant::GptqOptions o;
  o.desc_act = a[7] == "1";
  o.static_groups = a[8] == "1";
  const auto r = mo::quant::gptq_quantize(w.data(), rows, cols, h, {std::stoi(a[4]), std::stoi(a[5]), a[6] == "1"}, o);
  using D = mo::st::Dtype;
  const auto& q = r.q;
  const std::int64_t ng = static_cast<std::int64_t>(q.scales.size()) / rows;
  mo::st::write_file(
      a[9],
      {td("q", D::U8, {rows, cols}, q.q.data(), q.q.size()), td("scales", D::F16, {rows, ng}, q.scales.data(), q.scales.size() * 2),
       td("zeros", D::U8, {rows, ng}, q.zeros.data(), q.zeros.size()), td("g_idx", D::I32, {cols}, q.g_idx.data(), q.g_idx.size() * 4)});
  return 0;
}

int cmd_config(const std::string& kind, const json& opt) {
  json out;
  if (kind == "awq") {
    mo::formats::AwqConfigOptions o;
    o.group_size = opt.value("group_size", o.group_size);
    o.modules_to_not_convert = opt.value("modules_to_not_convert", o.modules_to_not_convert);
    out = mo::formats::awq_quantization_config(o);
  } else if (kind == "gptq" || kind == "gptq_file") {
    mo::formats::GptqConfigOptions o;
    o.bits = opt.value("bits", o.bits);
    o.group_size = opt.value("group_size", o.group_size);
    o.desc_act = opt.value("desc_act", o.desc_act);
    o.sym = opt.value("sym", o.sym);
    o.v2 = opt.value("v2", o.v2);
    for (const auto& r : opt.value("dynamic", json::array()))
      o.dynamic.push_back({r.at("pattern").get<std::string>(), r.value("skip", false), r.value("overrides", json::object())});
    out = kind == "gptq" ? mo::formats::gptq_quantization_config(o) : mo::formats::gptq_quantize_config_file(o);
  } else if (kind == "fp8") {
    mo::formats::Fp8ConfigOptions o;
    o.per_channel = opt.value("per_channel", o.per_channel);
    if (!opt.value("dynamic_activations", true)) o.activations = mo::formats::Fp8Activations::none;
    out = mo::formats::fp8_quantization_config(o);
  } else {
    throw mo::UsageError("unknown config kind '" + kind + "'");
  }
  // Round trip through our own parser, so the test sees what the loader understands of it too.
  const auto parsed = mo::formats::parse_quantization_config(out);
  std::cout << json{{"config", out}, {"parsed", parsed.describe()}}.dump() << "\n";
  return 0;
}

int run(const std::vector<std::string>& a) {
  if (a.size() == 2 && a[0] == "list") return cmd_list(a[1]);
  if (a.size() == 4 && a[0] == "linear") return cmd_linear(a[1], a[2], a[3]);
  if (a.size() == 10 && a[0] == "pack") return cmd_pack({a.begin() + 1, a.end()});
  if (a.size() == 3 && a[0] == "fp8_encode") {
    const auto v = read_floats(a[1]);
    std::vector<std::uint8_t> out;
    for (float x : v) out.push_back(formats::f32_to_e4m3(x));
    write_bytes(a[2], out.data(), out.size());
    return 0;
  }
  if (a.size() == 2 && a[0] == "fp8_decode") {
    std::vector<float> out;
    for (int c = 0; c < 256; ++c) out.push_back(formats::e4m3_to_f32(static_cast<std::uint8_t>(c)));
    write_bytes(a[1], out.data(), out.size() * 4);
    return 0;
  }
  if (a.size() == 11 && a[0] == "gptq") return cmd_gptq({a.begin() + 1, a.end()});
  if (a.size() == 6 && a[0] == "fp8_quantize") return cmd_fp8_quantize({a.begin() + 1, a.end()});
  if ((a.size() == 2 || a.size() == 3) && a[0] == "config") return cmd_config(a[1], a.size() == 3 ? json::parse(a[2]) : json::object());
  throw mo::UsageError("usage: see the comment at the top of tests/tools/dump_weights.cpp");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    mo::log::init();  // bind_weights logs its one line about the quantized representation to stderr
    return run({argv + 1, argv + argc});
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
