// quantize --quant_method gguf end to end on stories260K (hidden 64 and FFN 172: every row-length
// fallback), the importance matrix files, and llama.cpp's per-tensor mixing rules for each file type.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mo/model/gguf_tensor_type.h"
#include "mo/formats/gguf_file_types.h"
#include "mo/model/model_presets.h"
#include "mo/convert/convert.h"
#include "mo/core/error.h"
#include "mo/core/thread_pool.h"
#include "mo/engine/generator.h"
#include "mo/formats/ggml_types.h"
#include "mo/io/gguf.h"
#include "mo/model/model_files.h"
#include "mo/quant/imatrix.h"
#include "mo/quant/quantize.h"
#include "mo/tokenizer/tokenizer.h"
#include "quant_test_support.h"

namespace formats = mo::formats;

namespace fs = std::filesystem;
using mo::quant::QuantizeOptions;

namespace {

using namespace quant_test;

// `imatrix` as --imatrix takes it: auto, none or a file.
QuantizeOptions config(const std::string& type, const fs::path& out, const std::string& imatrix, const std::string& calib = "") {
  using mo::quant::ImatrixSource;
  QuantizeOptions c;
  c.model_path = kStories;
  c.output_path = out.string();
  c.method = mo::quant::Method::gguf;
  c.gguf_type = type;
  c.imatrix = imatrix == "auto" ? ImatrixSource::automatic : imatrix == "none" ? ImatrixSource::none : ImatrixSource::file;
  if (c.imatrix == ImatrixSource::file) c.imatrix_file = imatrix;
  c.calibration_data = calib;
  c.num_samples = 8;
  c.max_seq_len = 64;
  return c;
}

std::map<std::string, nlohmann::json> decisions(const std::string& gguf) {
  std::map<std::string, nlohmann::json> out;
  std::ifstream in(gguf + ".decisions.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    out[j["tensor"].get<std::string>()] = j;
  }
  return out;
}

std::string tensor_type(const mo::gguf::File& f, const std::string& name) {
  const auto* t = f.find_tensor(name);
  return t ? mo::ggml_type_info(t->type)->name : "missing";
}

}  // namespace

TEST(GgufExport, EveryFileTypeWritesAFileOurEngineLoadsAndGeneratesFrom) {
  if (!fs::exists(kStories)) GTEST_SKIP() << kStories << " not found";
  TempDir t("mo-gguf-export-test-");
  const std::string calib = write_calibration(t.path);
  const auto base = greedy(kStories, 20);
  // The fewest of 20 greedy tokens each type must share with the f32 original: float copies
  // agree fully; at 64-wide rows every block type falls back to q4_0..q8_0, which keep most.
  const std::map<std::string, int> min_agree = {{"f16", 20},    {"bf16", 20},   {"q8_0", 20}, {"q6_k", 10},  {"q5_k_m", 10}, {"q5_k_s", 10},
                                                {"q4_k_m", 10}, {"q4_k_s", 10}, {"q4_0", 10}, {"q3_k_m", 5}, {"q2_k", 5}};
  ASSERT_EQ(min_agree.size(), mo::formats::gguf_file_type_names().size());
  for (const auto& type : mo::formats::gguf_file_type_names()) {
    const fs::path out = t.path / (type + ".gguf");
    mo::quant::QuantizeReport r = mo::quant::quantize_model(config(type, out, "auto", calib));
    const mo::gguf::File f = mo::gguf::read_metadata(out.string());
    EXPECT_EQ(f.get_int("general.file_type"), mo::formats::gguf_file_type_id(type)) << type;
    EXPECT_EQ(f.get_string("model-optimizer.gguf_type"), type);
    EXPECT_EQ(f.get_string("model-optimizer.source"), fs::absolute(kStories).string());
    EXPECT_EQ(f.get_string("general.architecture"), "llama");
    EXPECT_EQ(f.get_int("llama.block_count"), 5);
    EXPECT_NE(f.find("tokenizer.ggml.tokens"), nullptr);
    EXPECT_EQ(f.find("general.quantization_version") != nullptr, type != "f16" && type != "bf16") << type;
    EXPECT_EQ(tensor_type(f, "blk.0.attn_norm.weight"), "f32");
    EXPECT_EQ(r.decisions.size(), 37u) << type;  // 5 layers x 7 linears, token_embd, output
    const auto tokens = greedy(out.string(), 20);
    std::printf("%-7s %6.1f KiB, %2d of 20 greedy tokens agree with the f32 original; %s\n", type.c_str(), r.output_bytes / 1024.0,
                agreeing(base, tokens), r.summary.c_str());
    EXPECT_EQ(tokens.size(), 20u) << type;
    EXPECT_GE(agreeing(base, tokens), min_agree.at(type)) << type;
  }
}

TEST(GgufExport, The172WideFfnAndThe64WideRowsFallBackAsLlamaCppDoes) {
  if (!fs::exists(kStories)) GTEST_SKIP() << kStories << " not found";
  TempDir t("mo-gguf-export-test-");
  const fs::path out = t.path / "q4_k_m.gguf";
  mo::quant::quantize_model(config("q4_k_m", out, "none"));
  const mo::gguf::File f = mo::gguf::read_metadata(out.string());
  auto d = decisions(out.string());
  ASSERT_EQ(d.size(), 37u);
  // ffn_down rows are 172 long: neither 256 (q4_K/q6_K) nor 32 (q5_0/q8_0) divides them.
  EXPECT_EQ(tensor_type(f, "blk.1.ffn_down.weight"), "f16");
  EXPECT_EQ(d["blk.1.ffn_down.weight"]["module"], "model.layers.1.mlp.down_proj");
  EXPECT_NE(d["blk.1.ffn_down.weight"]["reason"].get<std::string>().find("row length 172 not divisible by 256 (q4_K)"), std::string::npos);
  // With 5 layers use_more_bits() picks layers 2 and 4: the mix asks q6_K, which falls back too.
  EXPECT_NE(d["blk.2.ffn_down.weight"]["reason"].get<std::string>().find("raises ffn_down in layer 2 to q6_K"), std::string::npos)
      << d["blk.2.ffn_down.weight"].dump();
  EXPECT_EQ(tensor_type(f, "blk.0.attn_q.weight"), "q5_0");
  EXPECT_NE(d["blk.0.attn_q.weight"]["reason"].get<std::string>().find("row length 64 not divisible by 256 (q4_K): falls back to q5_0"),
            std::string::npos);
  EXPECT_EQ(tensor_type(f, "blk.2.attn_v.weight"), "q8_0");  // q6_K by the mix, then the fallback
  EXPECT_EQ(tensor_type(f, "blk.1.attn_v.weight"), "q5_0");
  EXPECT_EQ(tensor_type(f, "output.weight"), "q8_0");
  EXPECT_EQ(tensor_type(f, "token_embd.weight"), "q5_0");
  EXPECT_EQ(d["blk.0.attn_q.weight"]["requested"], "q4_K");
  EXPECT_EQ(f.get_string("model-optimizer.imatrix"), "none");
}

TEST(GgufExport, AnHfDirectoryGivesTheSameTensorsAsTheGgufItCameFrom) {
  if (!fs::exists(kStories)) GTEST_SKIP() << kStories << " not found";
  TempDir t("mo-gguf-export-test-");
  // HF keeps Q/K rows in rotate-half order: the export must permute them back before quantizing.
  mo::convert::ConvertOptions co;
  co.output_format = "hf";
  co.dtype = "f32";
  mo::convert::convert_model(kStories, (t.path / "hf").string(), co);
  const fs::path from_gguf = t.path / "a.gguf", from_hf = t.path / "b.gguf";
  mo::quant::quantize_model(config("q4_k_m", from_gguf, "none"));
  QuantizeOptions c = config("q4_k_m", from_hf, "none");
  c.model_path = (t.path / "hf").string();
  mo::quant::quantize_model(c);
  const mo::gguf::File a = mo::gguf::read_metadata(from_gguf.string()), b = mo::gguf::read_metadata(from_hf.string());
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (const auto& ta : a.tensors) {
    const auto* tb = b.find_tensor(ta.name);
    ASSERT_NE(tb, nullptr) << ta.name;
    EXPECT_EQ(ta.type, tb->type) << ta.name;
    auto x = a.tensor_bytes(ta), y = b.tensor_bytes(*tb);
    EXPECT_TRUE(x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size()) == 0) << ta.name;
  }
  EXPECT_EQ(b.get_int("llama.attention.head_count_kv"), 4);
  EXPECT_EQ(b.find("tokenizer.ggml.tokens")->as_array().size(), 512u);
  EXPECT_EQ(greedy(from_hf.string(), 20), greedy(from_gguf.string(), 20));
}

TEST(GgufExport, SkipLayersKeepF16AndRefusesExistingOutputs) {
  if (!fs::exists(kStories)) GTEST_SKIP() << kStories << " not found";
  TempDir t("mo-gguf-export-test-");
  const fs::path out = t.path / "skip.gguf";
  QuantizeOptions c = config("q8_0", out, "none");
  c.skip_layers = {"model.layers.4.*", "lm_head"};
  mo::quant::QuantizeReport r = mo::quant::quantize_model(c);
  const mo::gguf::File f = mo::gguf::read_metadata(out.string());
  EXPECT_EQ(tensor_type(f, "blk.4.attn_q.weight"), "f16");
  EXPECT_EQ(tensor_type(f, "blk.4.ffn_up.weight"), "f16");
  EXPECT_EQ(tensor_type(f, "blk.3.attn_q.weight"), "q8_0");
  EXPECT_EQ(tensor_type(f, "output.weight"), "f16");
  auto d = decisions(out.string());
  EXPECT_EQ(d["blk.4.attn_k.weight"]["reason"], "skip_layers 'model.layers.4.*': kept f16");
  EXPECT_EQ(d["output.weight"]["reason"], "skip_layers 'lm_head': kept f16");

  try {
    mo::quant::quantize_model(c);
    FAIL() << "overwrote an existing output";
  } catch (const mo::UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("already exists"), std::string::npos) << e.what();
  }
  c.output_path = (t.path / "model.bin").string();
  EXPECT_THROW(mo::quant::quantize_model(c), mo::UsageError);
  c.output_path = (t.path / "x.gguf").string();
  c.gguf_type = "q4_k_xl";
  EXPECT_THROW(mo::quant::quantize_model(c), mo::UsageError);
  EXPECT_FALSE(fs::exists(t.path / "x.gguf"));
}

TEST(GgufExport, ImatrixFromOurEngineRoundTripsThroughTheGgufAndLegacyForms) {
  if (!fs::exists(kStories)) GTEST_SKIP() << kStories << " not found";
  TempDir t("mo-gguf-export-test-");
  auto files = mo::model::ModelFiles::open(kStories);
  mo::engine::Engine engine(mo::engine::bind_weights(files), mo::default_pool());
  const std::vector<std::vector<std::int32_t>> samples = {{1, 400, 20, 35, 77, 9}, {1, 5, 6, 7}};
  mo::quant::Imatrix m = mo::quant::collect_imatrix(engine, samples, "two samples");
  ASSERT_EQ(m.entries.size(), 35u);
  const auto& q = m.entries.at("blk.2.attn_q.weight");
  EXPECT_EQ(q.counts, std::vector<float>{10.0f});  // 6 + 4 tokens
  EXPECT_EQ(q.in_sum2.size(), 64u);
  EXPECT_EQ(q.in_sum2, m.entries.at("blk.2.attn_v.weight").in_sum2);  // q/k/v share their input
  EXPECT_EQ(m.entries.at("blk.2.ffn_down.weight").in_sum2.size(), 172u);
  // Layer 0's q input is rms_norm(embedding) * attn_norm: check one column by hand.
  {
    const auto& hp = engine.hparams();
    double expect = 0;
    for (const auto& s : samples) {
      std::vector<float> h(s.size() * hp.hidden_size);
      engine.embed(s, h.data());
      for (std::size_t tk = 0; tk < s.size(); ++tk) {
        double ss = 0;
        for (int j = 0; j < hp.hidden_size; ++j) ss += double(h[tk * hp.hidden_size + j]) * h[tk * hp.hidden_size + j];
        const double x =
            h[tk * hp.hidden_size + 3] / std::sqrt(ss / hp.hidden_size + hp.rms_norm_eps) * engine.weights().layers[0].attn_norm[3];
        expect += x * x;
      }
    }
    EXPECT_NEAR(m.entries.at("blk.0.attn_q.weight").in_sum2[3], expect, 1e-4 * expect);
  }

  const std::string path = (t.path / "imatrix.gguf").string();
  mo::quant::write_imatrix(m, path);
  const mo::gguf::File f = mo::gguf::read_metadata(path);
  EXPECT_EQ(f.get_string("general.type"), "imatrix");
  EXPECT_EQ(f.get_int("imatrix.chunk_count"), 2);
  EXPECT_EQ(f.get_int("imatrix.chunk_size"), 6);
  // Name order, each entry's sums then its counts, as llama-imatrix writes them.
  ASSERT_EQ(f.tensors.size(), 70u);
  EXPECT_EQ(f.tensors[0].name, "blk.0.attn_k.weight.in_sum2");
  EXPECT_EQ(f.tensors[1].name, "blk.0.attn_k.weight.counts");
  EXPECT_EQ(f.tensors[1].ne, (std::vector<std::uint64_t>{1, 1}));
  EXPECT_EQ(f.find_tensor("blk.0.ffn_down.weight.in_sum2")->ne, (std::vector<std::uint64_t>{172, 1}));
  mo::quant::Imatrix back = mo::quant::read_imatrix(path);
  EXPECT_EQ(back.datasets, std::vector<std::string>{"two samples"});
  ASSERT_EQ(back.entries.size(), m.entries.size());
  for (const auto& [name, e] : m.entries) {
    EXPECT_EQ(back.entries.at(name).in_sum2, e.in_sum2) << name;
    EXPECT_EQ(back.entries.at(name).counts, e.counts) << name;
  }
  const auto imp = back.importance("blk.0.attn_q.weight");
  EXPECT_FLOAT_EQ(imp[3], m.entries.at("blk.0.attn_q.weight").in_sum2[3] / 10.0f);

  // The legacy .dat form: values already averaged and multiplied by the call count.
  const std::string dat = (t.path / "imatrix.dat").string();
  {
    std::ofstream o(dat, std::ios::binary);
    auto i32 = [&](std::int32_t v) { o.write(reinterpret_cast<const char*>(&v), 4); };
    const std::string name = "blk.0.attn_q.weight";
    const float vals[2] = {6.0f, 3.0f};
    i32(1), i32(static_cast<std::int32_t>(name.size())), o.write(name.data(), static_cast<std::streamsize>(name.size()));
    i32(3), i32(2), o.write(reinterpret_cast<const char*>(vals), sizeof(vals));
    i32(3), i32(4), o.write("wiki", 4);
  }
  mo::quant::Imatrix legacy = mo::quant::read_imatrix(dat);
  EXPECT_TRUE(legacy.legacy);
  EXPECT_EQ(legacy.importance("blk.0.attn_q.weight"), (std::vector<float>{2.0f, 1.0f}));
  EXPECT_EQ(legacy.datasets, std::vector<std::string>{"wiki"});
  EXPECT_THROW(mo::quant::read_imatrix((t.path / "none.dat").string()), mo::UsageError);

  // A file given as --imatrix weights the k-quant search: the bytes differ from no imatrix.
  const fs::path with = t.path / "with.gguf", without = t.path / "without.gguf";
  mo::quant::quantize_model(config("q4_0", with, path));
  mo::quant::quantize_model(config("q4_0", without, "none"));
  const mo::gguf::File fw = mo::gguf::read_metadata(with.string()), fo = mo::gguf::read_metadata(without.string());
  EXPECT_EQ(fw.get_string("quantize.imatrix.file"), path);
  EXPECT_EQ(fw.get_int("quantize.imatrix.entries_count"), 35);
  auto a = fw.tensor_bytes(*fw.find_tensor("blk.2.attn_q.weight")), b = fo.tensor_bytes(*fo.find_tensor("blk.2.attn_q.weight"));
  ASSERT_EQ(a.size(), b.size());
  EXPECT_NE(std::memcmp(a.data(), b.data(), a.size()), 0);
  EXPECT_EQ(tensor_type(fw, "token_embd.weight"), "q4_0");

  // An imatrix computed by `auto` is kept next to the output; given back as a file it gives the same bytes.
  const std::string calib = write_calibration(t.path);
  const fs::path by_auto = t.path / "auto.gguf", by_file = t.path / "file.gguf";
  mo::quant::quantize_model(config("q4_k_s", by_auto, "auto", calib));
  const std::string kept = by_auto.string() + ".imatrix.gguf";
  ASSERT_TRUE(fs::exists(kept));
  EXPECT_EQ(mo::quant::read_imatrix(kept).entries.size(), 35u);
  mo::quant::quantize_model(config("q4_k_s", by_file, kept));
  const mo::gguf::File x = mo::gguf::read_metadata(by_auto.string()), y = mo::gguf::read_metadata(by_file.string());
  for (const auto& tx : x.tensors) {
    auto bx = x.tensor_bytes(tx), by = y.tensor_bytes(*y.find_tensor(tx.name));
    EXPECT_TRUE(bx.size() == by.size() && std::memcmp(bx.data(), by.data(), bx.size()) == 0) << tx.name;
  }
  EXPECT_FALSE(fs::exists(by_file.string() + ".imatrix.gguf"));
}

TEST(GgufMix, EveryFileTypeFollowsLlamaCppsRulesOnLlama2_7b) {
  auto s = mo::model::load_model_shape("llama-2-7b");  // 32 layers, no GQA
  auto type = [&](const std::string& format, const std::string& name, bool imatrix = false) {
    for (const auto& t : s.tensors)
      if (t.name == name) return std::string(mo::ggml_type_info(mo::model::gguf_tensor_type(format, t, s.hp, imatrix))->name);
    return std::string("no tensor");
  };
  EXPECT_EQ(type("f16", "blk.0.attn_q.weight"), "f16");
  EXPECT_EQ(type("bf16", "output.weight"), "bf16");
  EXPECT_EQ(type("bf16", "blk.0.ffn_norm.weight"), "f32");
  EXPECT_EQ(type("q2_k", "blk.9.attn_q.weight"), "q2_K");
  EXPECT_EQ(type("q2_k", "blk.9.attn_v.weight"), "q3_K");  // q4_K only with GQA >= 4
  EXPECT_EQ(type("q2_k", "blk.9.ffn_down.weight"), "q3_K");
  EXPECT_EQ(type("q2_k", "blk.9.attn_output.weight"), "q3_K");
  EXPECT_EQ(type("q3_k_m", "blk.1.attn_v.weight"), "q5_K");
  EXPECT_EQ(type("q3_k_m", "blk.2.attn_v.weight"), "q4_K");
  EXPECT_EQ(type("q3_k_m", "blk.1.ffn_down.weight"), "q5_K");  // first sixteenth
  EXPECT_EQ(type("q3_k_m", "blk.2.ffn_down.weight"), "q4_K");
  EXPECT_EQ(type("q3_k_m", "blk.2.attn_output.weight"), "q4_K");
  EXPECT_EQ(type("q3_k_m", "blk.2.ffn_up.weight"), "q3_K");
  EXPECT_EQ(type("q4_k_s", "blk.3.attn_v.weight"), "q5_K");
  EXPECT_EQ(type("q4_k_s", "blk.4.attn_v.weight"), "q4_K");
  EXPECT_EQ(type("q4_k_s", "blk.3.ffn_down.weight"), "q5_K");
  EXPECT_EQ(type("q4_k_s", "blk.4.ffn_down.weight"), "q4_K");
  EXPECT_EQ(type("q5_k_s", "blk.0.ffn_down.weight"), "q5_K");
  EXPECT_EQ(type("q5_k_s", "output.weight"), "q6_K");
  EXPECT_EQ(type("q4_0", "blk.0.ffn_down.weight"), "q4_0");
  EXPECT_EQ(type("q4_0", "blk.0.ffn_down.weight", true), "q4_1");  // llama.cpp's guard when an imatrix is given
  EXPECT_EQ(type("q4_0", "blk.4.ffn_down.weight", true), "q4_0");

  // Whole-file sizes against TheBloke's published llama-2-7b GGUFs (GB, tensor data within ~1 MB).
  auto gb = [&](const std::string& format) {
    std::uint64_t bytes = 0;
    for (const auto& t : s.tensors) bytes += mo::ggml_row_bytes(mo::model::gguf_tensor_type(format, t, s.hp), t.cols) * t.rows;
    return bytes / 1e9;
  };
  EXPECT_NEAR(gb("q3_k_m"), 3.30, 0.01);
  EXPECT_NEAR(gb("q4_k_s"), 3.86, 0.01);
  EXPECT_NEAR(gb("q5_k_s"), 4.65, 0.01);
  EXPECT_NEAR(gb("q4_k_m"), 4.08, 0.01);
}
