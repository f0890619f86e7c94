#pragma once
// `skip_layers`: which linear modules stay unquantized. Each pattern is one of
//  - a module name as in the HF checkpoint: `lm_head`, `model.layers.3.mlp.down_proj`;
//  - a glob over those names (`*` any run of characters, `?` one): `model.layers.31.*`, `*.down_proj`;
//  - decoder layer indices: `12`, `29-31` (every linear of those layers);
//  - a name with an index range in place of the layer number: `model.layers.28-31.mlp.down_proj`
//    (the form `diagnose` advises).
#include <optional>
#include <string>
#include <vector>

namespace mo::quant {

class LayerSelector {
 public:
  LayerSelector() = default;
  // Throws UsageError naming `key`, the pattern and the accepted forms when a pattern is not one of them
  // ("garbage!!", "a-b", "3-") or its range is empty ("31-29").
  explicit LayerSelector(const std::vector<std::string>& patterns, const std::string& key = "skip_layers");
  // Throws UsageError when a layer index or range reaches past the model's last layer ("1-99" on 30 layers).
  void check_layer_count(int num_layers, const std::string& model) const;
  // The first pattern matching `module` (layer index -1 for modules outside the decoder layers).
  std::optional<std::string> match(const std::string& module, int layer) const;
  bool empty() const { return patterns_.empty(); }
  // Patterns that matched nothing so far (`lm_head` never counts: it is kept 16-bit anyway).
  std::vector<std::string> unused() const;
  // One warning per unused pattern, with the closest module names match() was asked about.
  std::vector<std::string> unused_warnings() const;

 private:
  struct Pattern {
    std::string text;
    int first = -1, last = -1;  // index range (whole layers, or the range inside a name)
    std::string glob;           // name glob ("" for pure index ranges); the range is spelled "#"
  };
  std::string key_ = "skip_layers";
  std::vector<Pattern> patterns_;
  mutable std::vector<bool> used_;
  mutable std::vector<std::pair<std::string, int>> seen_;  // modules match() was asked about, in order
};

bool glob_match(const std::string& pattern, const std::string& text);

// "model.layers.{layer}.self_attn.q_proj" etc.: the HF module name of a decoder layer's linear.
std::string hf_linear_module(int layer, const char* linear_name);

}  // namespace mo::quant
