// run_diagnose on stories260K: against itself, and against a copy whose layer 2 is quantized to 2
// bits and every other layer to 8.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "mo/core/error.h"
#include "mo/diagnose/diagnose.h"
#include "mo/diagnose/report.h"
#include "mo/io/output_file.h"
#include "mo/quant/quantize.h"
#include "quant_test_support.h"
#include "test_diagnose_fixture.h"

namespace {

namespace fs = std::filesystem;
const std::string kData = MO_SHARED_DATA;
const std::string kStories = kData + "/models/stories260K.gguf";
const std::string kText = kData + "/text/tinystories-sample.txt";

mo::diagnose::DiagnoseOptions options(const std::string& quantized) {
  mo::diagnose::DiagnoseOptions o;
  o.original = kStories;
  o.quantized = quantized;
  o.data = kText;
  o.num_samples = 4;
  o.max_seq_len = 64;
  return o;
}

TEST(DiagnoseRun, IdenticalModelsHaveCosineOneEverywhereAndNothingFlagged) {
  if (!std::filesystem::exists(kStories)) GTEST_SKIP() << kStories << " not found";
  const auto r = mo::diagnose::run_diagnose(options(kStories));
  EXPECT_EQ(r.samples, 4);
  EXPECT_EQ(r.tokens, 4 * 64);
  ASSERT_EQ(r.layers.size(), 5u);
  for (const auto& l : r.layers) {
    EXPECT_NEAR(l.local.cosine, 1.0, 1e-9) << "layer " << l.layer;
    EXPECT_NEAR(l.cumulative.cosine, 1.0, 1e-9) << "layer " << l.layer;
    EXPECT_FALSE(l.flagged);
    ASSERT_EQ(l.linears.size(), 7u);
    for (const auto& x : l.linears) {
      EXPECT_NEAR(x.local.cosine, 1.0, 1e-9) << x.module;
      EXPECT_EQ(x.local.max_abs, 0.0) << x.module;
      EXPECT_FALSE(x.flagged) << x.module;
      EXPECT_GT(x.weights.variance, 0.0) << x.module;
    }
  }
  EXPECT_NEAR(r.output.kl_mean, 0.0, 1e-9);
  EXPECT_EQ(r.output.top1_agreement, 1.0);
  EXPECT_TRUE(r.advice.skip_layers.empty());
  EXPECT_NE(mo::diagnose::render_terminal(r).find("flagged (local cosine < 0.98): 0 linears in 0 layers"), std::string::npos);
}

TEST(DiagnoseRun, TwoBitLayerIsTheOnlyOneFlaggedLocallyAndTheAdviceNamesIt) {
  if (!std::filesystem::exists(kStories)) GTEST_SKIP() << kStories << " not found";
  const auto dir = std::filesystem::temp_directory_path() / ("mo_diag_run_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string fixture = (dir / "layer2-2bit.gguf").string();
  mo::test::write_fake_quantized_gguf(kStories, fixture, [](int layer) { return layer == 2 ? 2 : 8; });
  const auto r = mo::diagnose::run_diagnose(options(fixture));
  for (const auto& l : r.layers) {
    EXPECT_EQ(l.flagged, l.layer == 2) << "layer " << l.layer << " local cosine " << l.local.cosine;
    if (l.layer != 2) {
      for (const auto& x : l.linears) EXPECT_GT(x.local.cosine, 0.999) << x.module;
    }
  }
  EXPECT_LT(r.layers[2].local.cosine, 0.9);
  // Layers 0-1 are untouched at 8 bits, so the accumulated damage starts at layer 2.
  EXPECT_GT(r.layers[1].cumulative.cosine, 0.999);
  EXPECT_LT(r.layers[2].cumulative.cosine, r.layers[1].cumulative.cosine);
  EXPECT_GT(r.output.kl_mean, 0.0);
  // The advice names exactly the 2-bit layer's linears under the threshold, whichever they are.
  std::set<std::string> under;
  for (const auto& x : r.layers[2].linears)
    if (x.local.cosine < 0.98) under.insert(x.module);
  ASSERT_FALSE(under.empty());
  EXPECT_EQ(std::set<std::string>(r.advice.skip_layers.begin(), r.advice.skip_layers.end()), under);
  for (const auto& m : under) EXPECT_NE(r.advice.lines.back().find(m), std::string::npos) << m << ": " << r.advice.lines.back();

  const auto paths = mo::diagnose::write_reports((dir / "out").string(), r, false);
  std::ifstream md(paths.markdown);
  const std::string text((std::istreambuf_iterator<char>(md)), {});
  EXPECT_NE(text.find("| model.layers.2.self_attn.q_proj | f32 → f32 |"), std::string::npos) << text;
  for (const auto& m : under) EXPECT_NE(text.find("  - " + m + "\n"), std::string::npos) << m << "\n" << text;
  std::ifstream svg(paths.svg);
  const std::string plot((std::istreambuf_iterator<char>(svg)), {});
  // Our mark first (what --force looks for), then the plot.
  EXPECT_EQ(plot.rfind(std::string(mo::io::kFileMarkerComment) + "\n<svg", 0), 0u) << plot.substr(0, 200);
  EXPECT_NE(plot.find("threshold 0.98"), std::string::npos);
  std::filesystem::remove_all(dir);
}

// Issue 20: diagnose --device cuda runs both models, every linear and every sum on the device. Here that
// code path runs on the CPU backend in device layouts (both models uploaded, the original's f32 weights as
// f16, an f16 K/V) against the host path: the same flags, and cosines and KL within what f16 rounding moves.
TEST(DiagnoseRun, TheGpuCodePathOnTheCpuBackendGivesTheSameDiagnosis) {
  if (!std::filesystem::exists(kStories)) GTEST_SKIP() << kStories << " not found";
  quant_test::TempDir t;
  const std::string fixture = (t.path / "layer2-2bit.gguf").string();
  mo::test::write_fake_quantized_gguf(kStories, fixture, [](int layer) { return layer == 2 ? 2 : 8; });
  // An AWQ output: HF rope order against the GGUF original, scales folded into the norms and up_proj.
  const fs::path awq = t.path / "awq";
  mo::quant::quantize_model(quant_test::stories_config(mo::quant::Method::awq, awq, quant_test::write_calibration(t.path)));
  for (const std::string& quantized : {fixture, awq.string()}) {
    const auto a = mo::diagnose::run_diagnose(options(quantized));
    auto o = options(quantized);
    o.device_path_on_cpu = true;
    const auto b = mo::diagnose::run_diagnose(o);
    ASSERT_EQ(a.layers.size(), b.layers.size());
    double gap = 0;
    const auto near = [&](double x, double y, const std::string& what) {
      EXPECT_NEAR(y, x, 2e-3) << quantized << ": " << what;
      gap = std::max(gap, std::abs(x - y));
    };
    for (std::size_t l = 0; l < a.layers.size(); ++l) {
      near(a.layers[l].local.cosine, b.layers[l].local.cosine, "layer " + std::to_string(l) + " local");
      near(a.layers[l].cumulative.cosine, b.layers[l].cumulative.cosine, "layer " + std::to_string(l) + " cumulative");
      for (std::size_t i = 0; i < a.layers[l].linears.size(); ++i) {
        const auto &x = a.layers[l].linears[i], &y = b.layers[l].linears[i];
        near(x.local.cosine, y.local.cosine, x.module + " local");
        near(x.cumulative.cosine, y.cumulative.cosine, x.module + " cumulative");
        if (std::abs(x.local.cosine - 0.98) > 2e-3) {
          EXPECT_EQ(x.flagged, y.flagged) << x.module;
        }
      }
    }
    EXPECT_NEAR(b.output.kl_mean, a.output.kl_mean, 0.05 * a.output.kl_mean + 1e-4) << quantized;
    std::printf("%s: largest cosine gap %.2e; KL %.5f (host path) vs %.5f (GPU path on the CPU)\n", fs::path(quantized).filename().c_str(),
                gap, a.output.kl_mean, b.output.kl_mean);
  }
}

TEST(DiagnoseRun, ModelsOfDifferentShapesAreRefusedNamingTheQuantizedPath) {
  if (!std::filesystem::exists(kStories)) GTEST_SKIP() << kStories << " not found";
  const std::string smol = std::string(MO_SOURCE_DIR) + "/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(smol)) GTEST_SKIP() << smol << " not found";
  try {
    mo::diagnose::run_diagnose(options(smol));
    FAIL() << "expected a UsageError";
  } catch (const mo::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(smol + ": num_layers is 30, but the original"), std::string::npos) << e.what();
  }
}

}  // namespace
