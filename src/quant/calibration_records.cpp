#include "calibration_records.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <optional>
#include <string_view>

#include "mo/core/error.h"
#include "mo/core/mapped_file.h"
#include "mo/core/strings.h"

namespace mo::quant::detail {

namespace {

using nlohmann::json;

// nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 5: " prefix says nothing
// our own "<file>:<line>:" does not.
std::string parse_message(const json::exception& e) {
  std::string_view what = e.what();
  if (const auto p = what.find("] "); !what.empty() && what.front() == '[' && p != std::string_view::npos) what.remove_prefix(p + 2);
  if (const auto p = what.find(": "); what.substr(0, 15) == "parse error at " && p != std::string_view::npos) what.remove_prefix(p + 2);
  // "last read: '...'" quotes the input's bytes, which may be binary or broken UTF-8.
  std::string msg(what);
  for (char& c : msg)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x80) c = '?';
  return msg;
}

std::string field_list(const json& obj) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : obj.items()) keys.push_back(k);
  if (keys.empty()) return "no fields";
  if (keys.size() > 12) {
    keys.resize(12);
    keys.push_back("...");
  }
  return "fields: " + join(keys);
}

bool blank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c); });
}

// Renders messages with the model's template; without one, as ChatML with one warning for the whole file.
class ChatRenderer {
 public:
  explicit ChatRenderer(const tok::ModelChatTemplate& chat) : chat_(chat), chatml_(chat.tmpl.empty()) {
    opt_.add_generation_prompt = false;
    opt_.bos_token = chat.bos_token;
    opt_.eos_token = chat.eos_token;
  }

  std::string render(const std::vector<tok::ChatMessage>& messages, const std::string& where, std::vector<std::string>& warnings) {
    if (chatml_) {
      if (!warned_) warnings.push_back("the model has no chat template: messages records are rendered as ChatML");
      warned_ = true;
      return tok::render_chatml(messages, false);
    }
    try {
      return tok::render_chat_template(chat_.tmpl, messages, opt_);
    } catch (const tok::ChatTemplateError& e) {
      using Kind = tok::ChatTemplateError::Kind;
      // raise_exception() is the template refusing the data (roles that do not alternate): the user's
      // to fix. A runtime failure may be ours.
      if (e.kind() == Kind::kRaised) throw UsageError(where + ": the model's chat template rejects this record's messages: " + e.message());
      if (e.kind() == Kind::kRuntime || e.kind() == Kind::kLimit)
        throw Error(where + ": the model's chat template fails on this record's messages: " + e.what());
      // ChatML instead would calibrate on prompts the model was not trained on.
      throw UsageError(where + ": the model's chat template cannot be used: " + e.what());
    }
  }

 private:
  const tok::ModelChatTemplate& chat_;
  tok::ChatTemplateOptions opt_;
  bool chatml_;
  bool warned_ = false;
};

class Extractor {
 public:
  Extractor(std::string text_field, const tok::ModelChatTemplate& chat, CalibrationRecords& out)
      : field_(std::move(text_field)), renderer_(chat), out_(out) {}

  // `where`: "<file>:<line>" or "<file>: record N", the start of every message about this record.
  void add(const json& v, const std::string& where) {
    ++out_.total;
    std::optional<CalibrationRecord> r = extract(v, where);
    if (!r || blank(r->text)) {
      ++out_.empty;
      return;
    }
    out_.records.push_back(std::move(*r));
  }

 private:
  std::optional<CalibrationRecord> extract(const json& v, const std::string& where) {
    if (v.is_string()) return CalibrationRecord{v.get<std::string>(), false};
    if (!v.is_object()) throw UsageError(where + ": the record is " + article(v) + "; expected a string or an object with a text field");
    std::string field = field_;
    if (field == "auto") {
      if (v.contains("text"))
        field = "text";
      else if (v.contains("messages"))
        field = "messages";
      else if (v.contains("prompt") && v.contains("completion"))
        field = "prompt+completion";
      else if (v.contains("conversations"))
        field = "conversations";
      else
        throw UsageError(where + ": the record has none of text, messages, prompt+completion (" + field_list(v) +
                         "); set calibration_field to the field that holds the text");
    }
    if (field == "prompt+completion") {
      if (!v.contains("prompt") || !v.contains("completion"))
        throw UsageError(where + ": calibration_field prompt+completion needs both fields, but the record has " + field_list(v));
      return CalibrationRecord{string_field(v, "prompt", where) + string_field(v, "completion", where), false};
    }
    const auto it = v.find(field);
    if (it == v.end()) throw UsageError(where + ": the record has no field '" + field + "' (" + field_list(v) + ")");
    if (it->is_null()) return std::nullopt;
    if (it->is_array()) return CalibrationRecord{render(*it, field, where), true};
    return CalibrationRecord{string_field(v, field, where), false};
  }

  static std::string article(const json& v) {
    const std::string t = v.type_name();
    return (t == "object" || t == "array" ? "an " : "a ") + t;
  }

  static std::string string_field(const json& obj, const std::string& key, const std::string& where) {
    const json& v = obj.at(key);
    if (v.is_null()) return "";
    if (!v.is_string()) throw UsageError(where + ": field '" + key + "' is " + article(v) + "; expected a string");
    return v.get<std::string>();
  }

  // OpenAI content may be a list of parts; only the text parts carry calibration text.
  static std::string content_text(const json& c, const std::string& at, const std::string& where) {
    if (c.is_null()) return "";
    if (c.is_string()) return c.get<std::string>();
    if (c.is_array()) {
      std::string text;
      for (const auto& part : c)
        if (part.is_object() && part.contains("text") && part["text"].is_string()) text += part["text"].get<std::string>();
      return text;
    }
    throw UsageError(where + ": " + at + " is " + article(c) + "; expected a string");
  }

  // [{role, content}] as OpenAI writes it, or ShareGPT's [{from: human|gpt|system, value}].
  std::string render(const json& list, const std::string& field, const std::string& where) {
    std::vector<tok::ChatMessage> messages;
    for (std::size_t i = 0; i < list.size(); ++i) {
      const json& m = list[i];
      const std::string at = field + "[" + std::to_string(i) + "]";
      if (!m.is_object()) throw UsageError(where + ": " + at + " is " + article(m) + "; expected an object {role, content}");
      tok::ChatMessage msg;
      if (m.contains("role") && m["role"].is_string()) {
        msg.role = m["role"].get<std::string>();
        msg.content = m.contains("content") ? content_text(m["content"], at + ".content", where) : "";
      } else if (m.contains("from") && m["from"].is_string()) {
        const std::string from = m["from"].get<std::string>();
        msg.role = from == "human" ? "user" : from == "gpt" ? "assistant" : from;
        msg.content = m.contains("value") ? content_text(m["value"], at + ".value", where) : "";
      } else {
        throw UsageError(where + ": " + at + " has no string 'role' (" + field_list(m) + "); expected {role, content}");
      }
      messages.push_back(std::move(msg));
    }
    const bool any_text = std::any_of(messages.begin(), messages.end(), [](const auto& m) { return !blank(m.content); });
    return any_text ? renderer_.render(messages, where, out_.warnings) : "";
  }

  std::string field_;
  ChatRenderer renderer_;
  CalibrationRecords& out_;
};

// "3:7" (line:column, 1-based) of a byte index, for JSON documents that fail to parse.
std::string line_col(std::string_view text, std::size_t byte) {
  const std::string_view head = text.substr(0, std::min(byte, text.size()));
  const std::size_t line = 1 + static_cast<std::size_t>(std::count(head.begin(), head.end(), '\n'));
  const std::size_t nl = head.rfind('\n');
  const std::size_t col = nl == std::string_view::npos ? head.size() + 1 : head.size() - nl;
  return std::to_string(line) + ":" + std::to_string(col);
}

void read_jsonl(std::string_view text, const std::string& path, Extractor& ex) {
  std::size_t pos = 0, line = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view row = text.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    if (blank(row)) continue;
    const std::string where = path + ":" + std::to_string(line);
    json v;
    try {
      v = json::parse(row);
    } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e99999
      throw UsageError(where + ": invalid JSON (" + parse_message(e) + "); expected one JSON object or string per line");
    }
    ex.add(v, where);
  }
}

// Plain text as llama-imatrix users write it: one record per paragraph, paragraphs separated by blank
// lines; a paragraph keeps its inner line breaks (CRLF read as LF).
void read_paragraphs(std::string_view text, CalibrationRecords& out) {
  std::string paragraph;
  const auto flush = [&] {
    if (paragraph.empty()) return;
    ++out.total;
    out.records.push_back({std::move(paragraph), false});
    paragraph.clear();
  };
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (blank(line)) {
      flush();
      continue;
    }
    if (!paragraph.empty()) paragraph += '\n';
    paragraph += line;
  }
  flush();
}

}  // namespace

CalibrationRecords read_calibration_records(const std::string& path, const std::string& text_field, const tok::ModelChatTemplate& chat) {
  if (std::filesystem::is_directory(path)) throw UsageError(path + ": is a directory; expected a JSON, JSONL or text calibration file");
  const MappedFile file(path);
  std::string_view text(file.size() ? reinterpret_cast<const char*>(file.data()) : "", file.size());
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);

  CalibrationRecords out;
  Extractor ex(text_field, chat, out);
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  std::string ext = to_lower(std::filesystem::path(path).extension().string());
  const bool jsonl_name = ext == ".jsonl" || ext == ".ndjson";
  const bool text_name = ext == ".txt" || ext == ".text";
  // Plain text by name, or by content when the name does not promise JSON (a file called "corpus").
  const bool text_content = first != std::string_view::npos && text[first] != '[' && text[first] != '{' && text[first] != '"';

  if (first == std::string_view::npos) {
    throw UsageError(path + ": the file is empty; expected " +
                     (text_name ? std::string("plain text (paragraphs separated by blank lines)")
                                : std::string("a JSON array of strings or objects, or JSONL (one record per line)")));
  } else if (text_name || (text_content && !jsonl_name && ext != ".json")) {
    out.format = "text paragraphs";
    read_paragraphs(text, out);
  } else if (!jsonl_name && text[first] == '[') {
    out.format = "JSON array";
    json doc;
    try {
      doc = json::parse(text);
    } catch (const json::parse_error& e) {
      throw UsageError(path + ":" + line_col(text, e.byte == 0 ? 0 : e.byte - 1) + ": invalid JSON (" + parse_message(e) +
                       "); expected an array of strings or objects");
    } catch (const json::exception& e) {
      throw UsageError(path + ": invalid JSON (" + parse_message(e) + "); expected an array of strings or objects");
    }
    for (std::size_t i = 0; i < doc.size(); ++i) ex.add(doc[i], path + ": record " + std::to_string(i + 1));
  } else if (text[first] == '{' || text[first] == '"' || text[first] == '[') {
    // A .json name with JSONL inside is common enough to read it as JSONL; an object that fills the
    // whole file as one JSON value (not one line) is a layout we do not guess at.
    out.format = "JSONL";
    const std::size_t last = text.find_last_not_of(" \t\r\n");
    if (!jsonl_name && text.substr(first, last - first).find('\n') != std::string_view::npos) {
      try {
        const json doc = json::parse(text);
        throw UsageError(path + ": the top-level JSON value is " +
                         (doc.is_object() ? "an object (" + field_list(doc) + ")" : std::string("a ") + doc.type_name()) +
                         "; expected an array of strings or objects, or JSONL (one record per line)");
      } catch (const json::exception&) {}
    }
    read_jsonl(text, path, ex);
  } else {
    std::string start(text.substr(first, std::min<std::size_t>(20, text.size() - first)));
    for (char& c : start)
      if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    throw UsageError(path + ": not JSON or JSONL (it starts with \"" + start +
                     "\"); expected a JSON array of strings or objects, or JSONL (one record per line); name a plain-text file .txt");
  }
  if (out.total == 0 && out.format == "text paragraphs")
    throw UsageError(path + ": no paragraphs of text; expected paragraphs separated by blank lines");
  if (out.total == 0) throw UsageError(path + ": no records; expected a JSON array of strings or objects, or JSONL (one record per line)");
  return out;
}

}  // namespace mo::quant::detail
