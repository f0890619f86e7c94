// What `bench` reads from a server's streaming response: SSE lines and their JSON chunks, fed in the
// pieces the first byte chooses (a server may split anywhere).
#include "fuzz_util.h"
#include "mo/bench/request.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t piece = data[0] % 23 + 1;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const auto start = mo::bench::Clock::now();
  mo::bench::StreamAccounting acc(start);
  for (std::size_t at = 0; at < body.size(); at += piece) acc.feed(body.substr(at, piece), mo::bench::Clock::now());
  mo::bench::RequestSample sample;
  acc.finish(sample, mo::bench::Clock::now(), 16);
  if (sample.ok == !sample.error.empty()) std::abort();  // a sample is either ok or says why not
  return 0;
}
