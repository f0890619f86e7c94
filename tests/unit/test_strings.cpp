#include <gtest/gtest.h>

#include "mo/core/strings.h"

namespace {

TEST(Strings, ClosestMatchFindsTyposButNotStrangers) {
  std::vector<std::string> keys = {"max_model_len", "max_num_seqs", "block_size", "port"};
  EXPECT_EQ(mo::closest_match("max_modle_len", keys), "max_model_len");
  EXPECT_EQ(mo::closest_match("max-model-len", keys), "max_model_len");
  EXPECT_EQ(mo::closest_match("blocksize", keys), "block_size");
  EXPECT_EQ(mo::closest_match("temperature", keys), std::nullopt);
}

TEST(Strings, FormatsBytesAndCounts) {
  EXPECT_EQ(mo::format_bytes(819200), "800.00 KiB");
  EXPECT_EQ(mo::format_bytes(1.5 * (1ull << 30)), "1.50 GiB");
  EXPECT_EQ(mo::format_bytes(512), "512 B");
  EXPECT_EQ(mo::format_count(524288), "524,288");
  EXPECT_EQ(mo::format_count(-1234567), "-1,234,567");
  EXPECT_EQ(mo::format_count(12), "12");
}

}  // namespace
