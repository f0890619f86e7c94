// Speed of Backend::linear on the Llama-2 7B and 13B projection shapes, per weight kind, at decode-like
// token counts (n = 1 and n = 8, the fused GEMV kernels on CUDA).
//   mo_tool_bench_linear [--device cuda|cpu] [-r reps] [--peak-gbs 4800] [--json FILE]
// Weights are random packed data (valid f16 scales, no NaN/Inf); each case is warmed up, then timed over
// `reps` calls between backend.synchronize() calls. Prints µs per call, GB/s of weight bytes read
// (DeviceLinear::bytes / time) and that as a percentage of --peak-gbs (4800 = H200 HBM3e).
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "mo/core/device.h"
#include "mo/core/error.h"
#include "mo/core/half.h"
#include "mo/core/thread_pool.h"
#include "mo/engine/backend.h"

namespace {

using mo::engine::Backend;
using mo::engine::DeviceBuffer;
using mo::engine::DeviceLinear;
using mo::engine::LinearKind;

// xorshift64*: fast enough for hundreds of MB of random weights.
struct Rng {
  std::uint64_t s = 0x9E3779B97F4A7C15ull;
  std::uint64_t next() {
    s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
    return s * 0x2545F4914F6CDD1Dull;
  }
  float uniform(float lo, float hi) { return lo + (hi - lo) * static_cast<float>(next() >> 40) / static_cast<float>(1ull << 24); }
};

std::vector<std::uint8_t> random_bytes(Rng& rng, std::size_t n) {
  std::vector<std::uint8_t> v(n);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const std::uint64_t r = rng.next();
    std::memcpy(v.data() + i, &r, 8);
  }
  for (; i < n; ++i) v[i] = static_cast<std::uint8_t>(rng.next());
  return v;
}

std::vector<std::uint16_t> random_halves(Rng& rng, std::size_t n, float lo, float hi) {
  std::vector<std::uint16_t> v(n);
  for (auto& h : v) h = mo::f32_to_f16(rng.uniform(lo, hi));
  return v;
}

// The case's buffers in the backend's memory, and the DeviceLinear over them.
struct Layer {
  DeviceLinear L;
  std::vector<DeviceBuffer> bufs;
  const void* add(Backend& b, const void* data, std::size_t bytes) {
    bufs.emplace_back(b, bytes);
    b.upload(bufs.back().as(), data, bytes);
    L.bytes += bytes;
    return bufs.back().as();
  }
};

// Random packed weights of `kind` (awq / gptq: 4-bit, group 128).
Layer make_layer(Backend& b, Rng& rng, LinearKind kind, std::int64_t rows, std::int64_t cols) {
  Layer l;
  DeviceLinear& L = l.L;
  L.kind = kind, L.rows = rows, L.cols = cols;
  const auto n = static_cast<std::size_t>(rows * cols);
  switch (kind) {
    case LinearKind::f16: {
      auto w = random_halves(rng, n, -0.05f, 0.05f);
      L.weight = l.add(b, w.data(), w.size() * 2);
      break;
    }
    case LinearKind::q8_0:
    case LinearKind::q4_k: {
      // Random quants with a valid f16 d (and dmin) at the front of every block.
      const std::size_t block = kind == LinearKind::q8_0 ? 34 : 144, per = kind == LinearKind::q8_0 ? 32 : 256;
      L.row_bytes = static_cast<std::size_t>(cols) / per * block;
      auto w = random_bytes(rng, L.row_bytes * static_cast<std::size_t>(rows));
      for (std::size_t off = 0; off < w.size(); off += block) {
        const std::uint16_t d = mo::f32_to_f16(rng.uniform(0.001f, 0.01f));
        std::memcpy(w.data() + off, &d, 2);
        if (kind == LinearKind::q4_k) std::memcpy(w.data() + off + 2, &d, 2);
      }
      L.weight = l.add(b, w.data(), w.size());
      break;
    }
    case LinearKind::awq:
    case LinearKind::gptq: {
      L.bits = 4, L.group_size = 128, L.groups = cols / 128;
      auto qw = random_bytes(rng, n / 2), qz = random_bytes(rng, static_cast<std::size_t>(L.groups * rows) / 2);
      auto sc = random_halves(rng, static_cast<std::size_t>(L.groups * rows), 0.001f, 0.01f);
      L.weight = l.add(b, qw.data(), qw.size());
      L.qzeros = static_cast<const std::int32_t*>(l.add(b, qz.data(), qz.size()));
      L.scales = static_cast<const std::uint16_t*>(l.add(b, sc.data(), sc.size() * 2));
      break;
    }
    default: throw mo::UsageError("bench_linear: unsupported kind");
  }
  return l;
}

struct Args {
  mo::Device device = mo::Device::cpu;
  int reps = 0;
  double peak_gbs = 4800;
  std::string json;
};

Args parse(int argc, char** argv) {
  Args a;
  a.device = mo::parse_device("auto");
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw mo::UsageError(k + " needs a value");
      return argv[++i];
    };
    if (k == "--device")
      a.device = mo::parse_device(value());
    else if (k == "-r" || k == "--reps")
      a.reps = std::stoi(value());
    else if (k == "--peak-gbs")
      a.peak_gbs = std::stod(value());
    else if (k == "--json")
      a.json = value();
    else
      throw mo::UsageError("usage: mo_tool_bench_linear [--device cuda|cpu] [-r reps] [--peak-gbs X] [--json FILE]");
  }
  if (a.reps <= 0) a.reps = a.device == mo::Device::cuda ? 100 : 3;
  return a;
}

int run(const Args& args) {
  mo::ThreadPool pool(0);
  auto backend = mo::engine::make_backend(args.device, pool);
  Backend& b = *backend;
  std::unique_ptr<std::ofstream> json;
  if (!args.json.empty()) {
    json = std::make_unique<std::ofstream>(args.json);
    if (!*json) throw mo::UsageError("cannot write " + args.json);
  }
  struct Shape {
    const char* model;
    const char* name;
    std::int64_t rows, cols;
  };
  const Shape shapes[] = {{"7B", "q/o", 4096, 4096},  {"7B", "gate/up", 11008, 4096},  {"7B", "down", 4096, 11008},
                          {"13B", "q/o", 5120, 5120}, {"13B", "gate/up", 13824, 5120}, {"13B", "down", 5120, 13824}};
  const LinearKind kinds[] = {LinearKind::f16, LinearKind::awq, LinearKind::gptq, LinearKind::q4_k, LinearKind::q8_0};
  fmt::print("device: {}, {} reps per case, peak {:.0f} GB/s\n", b.describe(), args.reps, args.peak_gbs);
  fmt::print("{:<10} {:<4} {:<8} {:>12} {:>3} {:>10} {:>9} {:>7}\n", "kind", "", "proj", "shape", "n", "us/call", "GB/s", "%peak");
  Rng rng;
  for (const LinearKind kind : kinds)
    for (const Shape& s : shapes) {
      Layer layer = make_layer(b, rng, kind, s.rows, s.cols);
      const std::string label = kind == LinearKind::awq || kind == LinearKind::gptq
                                    ? std::string(mo::engine::linear_kind_name(kind)) + "-g128"
                                    : mo::engine::linear_kind_name(kind);
      for (const std::int64_t n : {1, 8}) {
        std::vector<float> xh(static_cast<std::size_t>(n * s.cols));
        for (auto& v : xh) v = rng.uniform(-1.0f, 1.0f);
        DeviceBuffer x(b, xh.size() * sizeof(float)), y(b, static_cast<std::size_t>(n * s.rows) * sizeof(float));
        b.upload(x.as(), xh.data(), xh.size() * sizeof(float));
        const int warmup = args.device == mo::Device::cuda ? 10 : 1;
        for (int i = 0; i < warmup; ++i) b.linear(x.as<float>(), n, layer.L, y.as<float>());
        b.synchronize();
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < args.reps; ++i) b.linear(x.as<float>(), n, layer.L, y.as<float>());
        b.synchronize();
        const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / args.reps;
        const double gbs = static_cast<double>(layer.L.bytes) / (us * 1e3);
        const std::string shape = fmt::format("{}x{}", s.rows, s.cols);
        fmt::print("{:<10} {:<4} {:<8} {:>12} {:>3} {:>10.1f} {:>9.1f} {:>6.1f}%\n", label, s.model, s.name, shape, n, us, gbs,
                   100.0 * gbs / args.peak_gbs);
        std::fflush(stdout);
        if (json)
          *json << fmt::format(
              "{{\"kind\":\"{}\",\"model\":\"{}\",\"proj\":\"{}\",\"rows\":{},\"cols\":{},\"n\":{},\"bytes\":{},\"us\":{:.3f},"
              "\"gbs\":{:.3f},\"peak_gbs\":{:.1f},\"peak_frac\":{:.4f},\"device\":\"{}\"}}\n",
              label, s.model, s.name, s.rows, s.cols, n, layer.L.bytes, us, gbs, args.peak_gbs, gbs / args.peak_gbs, b.describe());
        if (json) json->flush();  // lines survive an interrupted run
      }
    }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const mo::UsageError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return mo::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return mo::kExitRuntime;
  }
}
