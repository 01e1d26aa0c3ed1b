// A small JSON writer for the CLI's machine-readable output (dfuse list --json, bench --json).
#pragma once

#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace dfuse::cli {

// `s` as a quoted JSON string: quotes, backslashes and control characters escaped, other bytes
// (UTF-8 included) passed through.
std::string json_quote(std::string_view s);

// Writes one JSON value, indented two spaces per level. Commas and indentation follow from the
// call sequence: key() before each member of an object, values alone inside arrays.
class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view name);
  JsonWriter& value(std::string_view s);
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(bool b);
  // NaN and infinities have no JSON spelling: they are written as null.
  JsonWriter& value(double d);
  template <std::integral T>
  JsonWriter& value(T n) {
    return raw(std::to_string(n));
  }
  JsonWriter& null();
  template <typename T>
  JsonWriter& field(std::string_view name, const T& v) {
    return key(name).value(v);
  }
  JsonWriter& field(std::string_view name, const std::vector<std::string>& list);

  // The text so far, with a final newline once the outermost value is complete.
  const std::string& str() const { return text_; }

 private:
  JsonWriter& raw(std::string_view token);
  JsonWriter& open(bool is_object);
  JsonWriter& close(bool is_object);
  void begin_value();
  void newline();

  struct Scope {
    bool is_object;
    bool empty;
  };
  std::string text_;
  std::vector<Scope> scopes_;  // the open objects and arrays, innermost last
  bool after_key_ = false;
};

}  // namespace dfuse::cli
