#include "mo/convert/tensor_convert.h"

#include <fmt/format.h>

#include <cstring>

#include "mo/core/error.h"
#include "mo/core/half.h"
#include "mo/formats/ggml_types.h"
#include "mo/io/gguf_dequant.h"

namespace mo::convert {

std::size_t float_type_size(std::uint32_t type) { return type == ggml_id(GgmlType::F32) ? 4 : 2; }

const char* torch_dtype_name(std::uint32_t type) {
  return type == ggml_id(GgmlType::F32) ? "float32" : type == ggml_id(GgmlType::F16) ? "float16" : "bfloat16";
}

std::uint32_t float_type_from_name(const std::string& name) {
  if (name == "f32") return ggml_id(GgmlType::F32);
  if (name == "f16") return ggml_id(GgmlType::F16);
  if (name == "bf16") return ggml_id(GgmlType::BF16);
  throw UsageError(fmt::format("dtype: expected f32, f16 or bf16, got '{}'", name));
}

std::vector<std::uint8_t> to_float_type(const model::StoredTensor& t, std::uint32_t target) {
  if (!t.ggml_type) throw Error(fmt::format("{}: tensors of type {} cannot be converted", t.file_name, t.dtype));
  if (*t.ggml_type == target) return {t.bytes.begin(), t.bytes.end()};
  if (!gguf::can_dequantize(*t.ggml_type)) throw Error(fmt::format("{}: type {} cannot be dequantized", t.file_name, t.dtype));
  const std::uint64_t n = t.n_elements(), row = t.ne.empty() ? n : t.ne[0];
  const std::uint64_t row_bytes = ggml_row_bytes(*t.ggml_type, row);
  std::vector<std::uint8_t> out(n * float_type_size(target));
  std::vector<float> buf(row);
  for (std::uint64_t r = 0; r < n / row; ++r) {
    gguf::dequantize_row(*t.ggml_type, t.bytes.data() + r * row_bytes, buf.data(), static_cast<std::int64_t>(row));
    std::uint8_t* dst = out.data() + r * row * float_type_size(target);
    for (std::uint64_t i = 0; i < row; ++i) {
      if (target == ggml_id(GgmlType::F32)) {
        std::memcpy(dst + 4 * i, &buf[i], 4);
      } else {
        std::uint16_t h = target == ggml_id(GgmlType::F16) ? f32_to_f16(buf[i]) : f32_to_bf16(buf[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
    }
  }
  return out;
}

}  // namespace mo::convert
