#include "dfuse/cli_json.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "dfuse/core/error.h"

namespace dfuse::cli {

std::string json_quote(std::string_view s) {
  constexpr std::pair<char, std::string_view> kShortEscapes[] = {
      {'"', "\\\""}, {'\\', "\\\\"}, {'\b', "\\b"}, {'\f', "\\f"}, {'\n', "\\n"}, {'\r', "\\r"}, {'\t', "\\t"}};
  constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\"";
  for (char c : s) {
    auto it = std::find_if(std::begin(kShortEscapes), std::end(kShortEscapes),
                           [c](const auto& escape) { return escape.first == c; });
    if (it != std::end(kShortEscapes)) {
      out += it->second;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += "\\u00";
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    } else {
      out += c;
    }
  }
  out += '"';
  return out;
}

JsonWriter& JsonWriter::begin_object() { return open(true); }
JsonWriter& JsonWriter::end_object() { return close(true); }
JsonWriter& JsonWriter::begin_array() { return open(false); }
JsonWriter& JsonWriter::end_array() { return close(false); }

JsonWriter& JsonWriter::key(std::string_view name) {
  if (scopes_.empty() || !scopes_.back().is_object || after_key_) {
    throw InvalidArgument("JsonWriter: key \"" + std::string(name) + "\" outside an object member position");
  }
  if (!scopes_.back().empty) text_ += ',';
  scopes_.back().empty = false;
  newline();
  text_ += json_quote(name);
  text_ += ": ";
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::value(std::string_view s) { return raw(json_quote(s)); }
JsonWriter& JsonWriter::value(bool b) { return raw(b ? "true" : "false"); }
JsonWriter& JsonWriter::null() { return raw("null"); }

JsonWriter& JsonWriter::value(double d) {
  if (!std::isfinite(d)) return null();
  char buffer[32];
  // Shortest text that reads back as the same double.
  auto result = std::to_chars(buffer, buffer + sizeof buffer, d);
  return raw(std::string_view(buffer, result.ptr - buffer));
}

JsonWriter& JsonWriter::field(std::string_view name, const std::vector<std::string>& list) {
  key(name).begin_array();
  for (const auto& item : list) value(item);
  return end_array();
}

JsonWriter& JsonWriter::raw(std::string_view token) {
  begin_value();
  text_ += token;
  if (scopes_.empty()) text_ += '\n';
  return *this;
}

JsonWriter& JsonWriter::open(bool is_object) {
  begin_value();
  text_ += is_object ? '{' : '[';
  scopes_.push_back({is_object, true});
  return *this;
}

JsonWriter& JsonWriter::close(bool is_object) {
  if (scopes_.empty() || scopes_.back().is_object != is_object || after_key_) {
    throw InvalidArgument(std::string("JsonWriter: unbalanced ") + (is_object ? "end_object" : "end_array"));
  }
  const bool empty = scopes_.back().empty;
  scopes_.pop_back();
  if (!empty) newline();
  text_ += is_object ? '}' : ']';
  if (scopes_.empty()) text_ += '\n';
  return *this;
}

// Places a value: directly after its key in an object, on a fresh line after a comma in an
// array, or alone at the top level.
void JsonWriter::begin_value() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (scopes_.empty()) {
    if (!text_.empty()) throw InvalidArgument("JsonWriter: a second top-level value");
    return;
  }
  if (scopes_.back().is_object) throw InvalidArgument("JsonWriter: an object member without a key");
  if (!scopes_.back().empty) text_ += ',';
  scopes_.back().empty = false;
  newline();
}

void JsonWriter::newline() {
  text_ += '\n';
  text_.append(2 * scopes_.size(), ' ');
}

}  // namespace dfuse::cli
