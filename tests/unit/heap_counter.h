#pragma once
// Bytes the process holds in malloc blocks (operator new included), and their peak since a reset, for tests
// that measure what a piece of work allocates (heap_counter.cpp replaces malloc and its family in
// mo_unit_tests to count them). Memory malloc keeps for reuse, thread stacks and mapped files are not
// counted. Not available under sanitizers, which bring their own allocator.
#include <cstdint>

namespace mo::test {

bool heap_counting();        // false under sanitizers: nothing is counted
std::int64_t heap_in_use();  // bytes, now
std::int64_t heap_peak();    // bytes, the most since reset_heap_peak()
void reset_heap_peak();      // the peak starts again from what is in use now

}  // namespace mo::test
