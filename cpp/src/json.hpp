// A tiny JSON reader: just enough for manifest.json (RFC 8259, no extensions).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace braze::json {

class Value {
 public:
  enum class Kind { Null, Bool, Number, String, Array, Object };

  Kind kind = Kind::Null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Value> array;
  std::map<std::string, Value> object;

  bool is_null() const { return kind == Kind::Null; }
  // A member of an object, or nullptr when absent (or when this is not an object).
  const Value* find(const std::string& key) const;
  // A number that is a whole int64, or false.
  bool as_int(int64_t* out) const;
};

// Parses a whole document; throws std::runtime_error("line L, column C: ...").
Value parse(const std::string& text);

}  // namespace braze::json
