#include "mo/formats/ggml_types.h"

#include <array>
#include <cctype>
#include <string>

#include "mo/core/error.h"

namespace mo {

namespace {

constexpr uint32_t kQK = 256;  // QK_K, weights per k-quant super-block

// Indexed by id; block sizes and byte counts match ggml.c's type_traits and ggml-common.h's block
// structs, cross-checked against gguf-py's GGML_QUANT_SIZES.
constexpr std::array<GgmlTypeInfo, 40> kTypes = [] {
  std::array<GgmlTypeInfo, 40> t{};
  t[0] = {"f32", 1, 4};
  t[1] = {"f16", 1, 2};
  t[2] = {"q4_0", 32, 18};
  t[3] = {"q4_1", 32, 20};
  t[6] = {"q5_0", 32, 22};
  t[7] = {"q5_1", 32, 24};
  t[8] = {"q8_0", 32, 34};
  t[9] = {"q8_1", 32, 40};
  t[10] = {"q2_K", kQK, 84};
  t[11] = {"q3_K", kQK, 110};
  t[12] = {"q4_K", kQK, 144};
  t[13] = {"q5_K", kQK, 176};
  t[14] = {"q6_K", kQK, 210};
  t[15] = {"q8_K", kQK, 292};
  t[16] = {"iq2_xxs", kQK, 66};
  t[17] = {"iq2_xs", kQK, 74};
  t[18] = {"iq3_xxs", kQK, 98};
  t[19] = {"iq1_s", kQK, 50};
  t[20] = {"iq4_nl", 32, 18};
  t[21] = {"iq3_s", kQK, 110};
  t[22] = {"iq2_s", kQK, 82};
  t[23] = {"iq4_xs", kQK, 136};
  t[24] = {"i8", 1, 1};
  t[25] = {"i16", 1, 2};
  t[26] = {"i32", 1, 4};
  t[27] = {"i64", 1, 8};
  t[28] = {"f64", 1, 8};
  t[29] = {"iq1_m", kQK, 56};
  t[30] = {"bf16", 1, 2};
  t[34] = {"tq1_0", kQK, 54};
  t[35] = {"tq2_0", kQK, 66};
  t[39] = {"mxfp4", 32, 17};
  return t;
}();

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

const GgmlTypeInfo& require_type(uint32_t type) {
  const GgmlTypeInfo* info = ggml_type_info(type);
  if (info == nullptr) throw Error("unknown ggml type " + std::to_string(type));
  return *info;
}

}  // namespace

const GgmlTypeInfo* ggml_type_info(uint32_t type) {
  if (type >= kTypes.size() || kTypes[type].name == nullptr) return nullptr;
  return &kTypes[type];
}

std::optional<uint32_t> ggml_type_from_name(std::string_view name) {
  for (uint32_t id = 0; id < kTypes.size(); ++id) {
    if (kTypes[id].name != nullptr && iequals(kTypes[id].name, name)) return id;
  }
  return std::nullopt;
}

double ggml_bits_per_weight(uint32_t type) {
  const GgmlTypeInfo& info = require_type(type);
  return 8.0 * info.type_size / info.block_size;
}

uint64_t ggml_row_bytes(uint32_t type, uint64_t n) {
  const GgmlTypeInfo& info = require_type(type);
  if (n % info.block_size != 0) {
    throw Error(std::to_string(n) + " weights of type " + info.name + " are not a multiple of its block size " +
                std::to_string(info.block_size));
  }
  const uint64_t blocks = n / info.block_size;
  if (blocks > UINT64_MAX / info.type_size) throw Error(std::to_string(n) + " weights overflow a 64-bit byte count");
  return blocks * info.type_size;
}

}  // namespace mo
