#include <fmt/format.h>

#include <filesystem>
#include <map>

#include "mo/core/error.h"
#include "mo/io/json_file.h"
#include "mo/io/safetensors.h"
#include "safetensors_json.h"

namespace mo::st {

namespace fs = std::filesystem;

namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

Model Model::open(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw UsageError("model not found: " + path);
  Model model;
  std::string index_path;
  if (fs::is_directory(path, ec)) {
    // Transformers looks for the single file first.
    const fs::path single = fs::path(path) / kSingleFileName;
    const fs::path index = fs::path(path) / kIndexFileName;
    if (fs::exists(single, ec)) {
      model.files_.push_back(File::open(single.string()));
    } else if (fs::exists(index, ec)) {
      index_path = index.string();
    } else {
      throw UsageError(fmt::format("{}: no {} or {} in this directory", path, kSingleFileName, kIndexFileName));
    }
  } else if (ends_with(path, ".json")) {
    index_path = path;
  } else {
    model.files_.push_back(File::open(path));
  }

  if (index_path.empty()) {
    for (const TensorView& v : model.files_.front().tensors()) model.tensors_.emplace(v.name, &v);
    return model;
  }

  const nlohmann::json index = io::read_json(index_path);
  const auto weight_map = index.is_object() ? index.find("weight_map") : index.end();
  if (!index.is_object() || weight_map == index.end() || !weight_map->is_object()) {
    throw Error(fmt::format("{}: expected a JSON object with a 'weight_map' object", index_path));
  }
  std::map<std::string, std::vector<std::string>> by_shard;  // shard file -> its tensors
  for (const auto& [name, shard] : weight_map->items()) {
    if (!shard.is_string() || shard.get_ref<const std::string&>().empty() || fs::path(shard.get_ref<const std::string&>()).is_absolute()) {
      throw Error(fmt::format("{}: weight_map: tensor {} maps to {}, expected a shard file name relative to the index", index_path,
                              detail::quote(name), shard.dump()));
    }
    by_shard[shard.get<std::string>()].push_back(name);
  }

  const fs::path dir = fs::path(index_path).parent_path();
  model.files_.reserve(by_shard.size());
  for (const auto& [shard, names] : by_shard) {
    const fs::path shard_path = dir / shard;
    if (!fs::is_regular_file(shard_path, ec)) {
      throw UsageError(fmt::format("{}: shard {} of tensor {} not found: {}", index_path, detail::quote(shard),
                                   detail::quote(names.front()), shard_path.string()));
    }
    model.files_.push_back(File::open(shard_path.string()));
  }
  // Views live in each File's heap-allocated vector, so pointers taken now survive moves of the Model.
  std::size_t i = 0;
  for (const auto& [shard, names] : by_shard) {
    const File& file = model.files_[i++];
    for (const std::string& name : names) {
      const TensorView* v = file.find(name);
      if (v == nullptr) {
        throw Error(fmt::format("{}: tensor {} is mapped to shard {}, which has no such tensor", index_path, detail::quote(name),
                                detail::quote(shard)));
      }
      model.tensors_.emplace(name, v);
    }
  }
  return model;
}

const TensorView* Model::find(std::string_view name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : it->second;
}

std::vector<std::string> Model::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, view] : tensors_) out.push_back(name);
  return out;
}

std::size_t Model::total_bytes() const {
  std::size_t total = 0;
  for (const auto& [name, view] : tensors_) total += view->nbytes;
  return total;
}

}  // namespace mo::st
