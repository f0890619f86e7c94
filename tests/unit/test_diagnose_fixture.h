#pragma once
// A test model for `diagnose`: a copy of an F32 GGUF whose decoder linears are round-to-nearest
// quantized (asymmetric, groups of 32) to a chosen bit width per layer and stored dequantized as F32,
// e.g. layer 2 at 2 bits and the rest at 8: the layer `diagnose` must single out.
#include <cstring>
#include <functional>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include "mo/io/gguf.h"
#include "mo/io/gguf_writer.h"
#include "mo/quant/rtn.h"

namespace mo::test {

inline void write_fake_quantized_gguf(const std::string& src, const std::string& dst, const std::function<int(int layer)>& bits_of) {
  const gguf::File in = gguf::read_metadata(src);
  gguf::Writer out(dst, in.version);
  for (const auto& [k, v] : in.metadata) out.set(k, v);
  static const std::regex linear(R"(blk\.(\d+)\.(attn_q|attn_k|attn_v|attn_output|ffn_gate|ffn_up|ffn_down)\.weight)");
  for (const auto& t : in.tensors) {
    const auto bytes = in.tensor_bytes(t);
    std::smatch m;
    if (!std::regex_match(t.name, m, linear)) {
      out.add_tensor(t.name, t.ne, t.type, bytes);
      continue;
    }
    if (t.type != 0) throw std::runtime_error(src + ": " + t.name + " is not F32");
    const std::int64_t cols = static_cast<std::int64_t>(t.ne[0]), rows = static_cast<std::int64_t>(t.n_elements()) / cols;
    std::vector<float> w(static_cast<std::size_t>(rows * cols));
    std::memcpy(w.data(), bytes.data(), bytes.size());
    mo::formats::QuantScheme scheme;
    scheme.bits = bits_of(std::stoi(m[1].str()));
    scheme.group_size = 32;
    scheme.sym = false;
    const std::vector<float> dq = quant::quantize_rtn(w.data(), rows, cols, scheme).dequantize();
    std::vector<std::uint8_t> raw(dq.size() * sizeof(float));
    std::memcpy(raw.data(), dq.data(), raw.size());
    out.add_tensor(t.name, t.ne, 0, std::move(raw));
  }
  out.write();
}

}  // namespace mo::test
