#include "mo/serve/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

namespace mo::serve {

TokenLogprob token_logprob(std::span<const float> row, std::int32_t id, int top_n) {
  float max = -std::numeric_limits<float>::infinity();
  for (float x : row) max = std::max(max, x);
  double sum = 0;
  for (float x : row) sum += std::exp(static_cast<double>(x) - max);
  const float log_z = max + static_cast<float>(std::log(sum));
  TokenLogprob t{.id = id, .logprob = row[static_cast<std::size_t>(id)] - log_z, .top = {}};
  const int n = std::min<int>(top_n, static_cast<int>(row.size()));
  if (n <= 0) return t;
  std::vector<std::int32_t> ids(row.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(),
                    [&](std::int32_t a, std::int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
  for (int i = 0; i < n; ++i) t.top.emplace_back(ids[i], row[ids[i]] - log_z);
  return t;
}

}  // namespace mo::serve
