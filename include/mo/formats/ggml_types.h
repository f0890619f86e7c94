#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace mo {

// ggml tensor types with llama.cpp's on-disk ids (ggml/include/ggml.h). Ids 4, 5, 31-33 and 36-38
// belong to removed types and are deliberately absent.
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

// The on-disk id of `t`, for code that keeps type ids as read from a file.
constexpr uint32_t ggml_id(GgmlType t) { return static_cast<uint32_t>(t); }

struct GgmlTypeInfo {
  const char* name;     // ggml's spelling, e.g. "q4_K"
  uint32_t block_size;  // weights per block
  uint32_t type_size;   // bytes per block
};

// nullptr for ids that are unknown or belong to removed types.
const GgmlTypeInfo* ggml_type_info(uint32_t type);
inline const GgmlTypeInfo* ggml_type_info(GgmlType type) { return ggml_type_info(static_cast<uint32_t>(type)); }

// Case-insensitive: "q4_k", "Q4_K" and "q4_K" all give 12.
std::optional<uint32_t> ggml_type_from_name(std::string_view name);

// Storage bits per weight including block scales, e.g. 4.5 for Q4_K. Throws Error on an unknown type.
double ggml_bits_per_weight(uint32_t type);

// Bytes taken by `n` consecutive weights. Throws Error on an unknown type or when `n` is not a
// multiple of the block size.
uint64_t ggml_row_bytes(uint32_t type, uint64_t n);

}  // namespace mo
