#include "heap_counter.h"

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define MO_HEAP_COUNTER_OFF 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MO_HEAP_COUNTER_OFF 1
#endif

#ifndef MO_HEAP_COUNTER_OFF
// glibc's own allocator under its exported names: this file replaces malloc and its family for the whole
// mo_unit_tests program (glibc supports a program providing them), counts, and forwards to these. operator
// new, std::vector and the CPU backend's calloc all come through here.
extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void* __libc_valloc(std::size_t);
void* __libc_pvalloc(std::size_t);
void __libc_free(void*);
}
#endif

namespace {

// Signed: a block glibc allocated for itself past these functions may still be freed through them.
std::atomic<std::int64_t> g_in_use{0}, g_peak{0};

[[maybe_unused]] void* counted(void* p) {
  if (!p) return p;
  const auto size = static_cast<std::int64_t>(malloc_usable_size(p));
  const std::int64_t now = g_in_use.fetch_add(size, std::memory_order_relaxed) + size;
  std::int64_t peak = g_peak.load(std::memory_order_relaxed);
  while (now > peak && !g_peak.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {}
  return p;
}

[[maybe_unused]] void uncounted(void* p) {
  if (p) g_in_use.fetch_sub(static_cast<std::int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
}

}  // namespace

namespace mo::test {

#ifdef MO_HEAP_COUNTER_OFF
bool heap_counting() { return false; }
#else
bool heap_counting() { return true; }
#endif
std::int64_t heap_in_use() { return g_in_use.load(); }
std::int64_t heap_peak() { return g_peak.load(); }
void reset_heap_peak() { g_peak.store(g_in_use.load()); }

}  // namespace mo::test

#ifndef MO_HEAP_COUNTER_OFF
extern "C" {
void* malloc(std::size_t n) { return counted(__libc_malloc(n)); }
void* calloc(std::size_t n, std::size_t size) { return counted(__libc_calloc(n, size)); }
void* realloc(void* p, std::size_t n) {
  uncounted(p);
  void* q = __libc_realloc(p, n);
  if (!q && n != 0) counted(p);  // the old block is still there
  return counted(q);
}
void free(void* p) {
  uncounted(p);
  __libc_free(p);
}
void* memalign(std::size_t align, std::size_t n) { return counted(__libc_memalign(align, n)); }
void* aligned_alloc(std::size_t align, std::size_t n) { return counted(__libc_memalign(align, n)); }
int posix_memalign(void** out, std::size_t align, std::size_t n) {
  if (align < sizeof(void*) || (align & (align - 1)) != 0) return EINVAL;
  void* p = counted(__libc_memalign(align, n));
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
void* valloc(std::size_t n) { return counted(__libc_valloc(n)); }
void* pvalloc(std::size_t n) { return counted(__libc_pvalloc(n)); }
}
#endif
