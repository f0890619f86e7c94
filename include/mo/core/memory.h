#pragma once
#include <cstddef>

namespace mo {

// Peak resident memory of this process so far, in bytes (getrusage ru_maxrss).
std::size_t peak_rss_bytes();
// Current resident memory, in bytes (/proc/self/statm); 0 where unavailable.
std::size_t current_rss_bytes();

}  // namespace mo
