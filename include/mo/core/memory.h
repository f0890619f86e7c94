#pragma once
#include <cstddef>

namespace mo {

// Peak resident memory of this process so far, in bytes (getrusage ru_maxrss).
std::size_t peak_rss_bytes();
// Current resident memory, in bytes (/proc/self/statm); 0 where unavailable.
std::size_t current_rss_bytes();
// Physical memory of the machine, in bytes.
std::size_t physical_memory_bytes();
// Memory the kernel says is available for new allocations (/proc/meminfo MemAvailable); 0 where unknown.
std::size_t available_memory_bytes();

}  // namespace mo
