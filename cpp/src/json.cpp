#include "json.hpp"

#include <cmath>
#include <cstdlib>
#include <stdexcept>

namespace braze::json {

const Value* Value::find(const std::string& key) const {
  if (kind != Kind::Object) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &it->second;
}

bool Value::as_int(int64_t* out) const {
  // 2^63 is exact in a double; anything at or above it does not fit.
  if (kind != Kind::Number || std::trunc(number) != number || std::fabs(number) >= 9223372036854775808.0)
    return false;
  *out = static_cast<int64_t>(number);
  return true;
}

namespace {

constexpr int kMaxDepth = 200;  // deeper documents are refused instead of overflowing the stack

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  Value document() {
    Value v = value(0);
    skip_space();
    if (i_ != s_.size()) fail("unexpected text after the document");
    return v;
  }

 private:
  const std::string& s_;
  size_t i_ = 0;

  [[noreturn]] void fail(const std::string& what) const {
    size_t line = 1, column = 1;
    for (size_t k = 0; k < i_ && k < s_.size(); ++k) {
      if (s_[k] == '\n') ++line, column = 1;
      else ++column;
    }
    throw std::runtime_error("line " + std::to_string(line) + ", column " + std::to_string(column) +
                             ": " + what);
  }

  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }

  bool consume(char c) {
    skip_space();
    if (i_ < s_.size() && s_[i_] == c) return ++i_, true;
    return false;
  }

  void expect(char c) {
    if (!consume(c)) fail(std::string("expected '") + c + "'");
  }

  bool literal(const char* word) {
    size_t n = std::char_traits<char>::length(word);
    if (s_.compare(i_, n, word) != 0) return false;
    i_ += n;
    return true;
  }

  Value value(int depth) {
    if (depth > kMaxDepth) fail("nested too deeply");
    skip_space();
    if (i_ >= s_.size()) fail("unexpected end of the document");
    Value v;
    char c = s_[i_];
    if (c == '{') {
      v.kind = Value::Kind::Object;
      ++i_;
      if (consume('}')) return v;
      do {
        skip_space();
        if (i_ >= s_.size() || s_[i_] != '"') fail("expected a string key");
        std::string key = string();
        expect(':');
        v.object[key] = value(depth + 1);  // a repeated key keeps the last value, as Python does
      } while (consume(','));
      expect('}');
    } else if (c == '[') {
      v.kind = Value::Kind::Array;
      ++i_;
      if (consume(']')) return v;
      do v.array.push_back(value(depth + 1));
      while (consume(','));
      expect(']');
    } else if (c == '"') {
      v.kind = Value::Kind::String;
      v.string = string();
    } else if (literal("true")) {
      v.kind = Value::Kind::Bool;
      v.boolean = true;
    } else if (literal("false")) {
      v.kind = Value::Kind::Bool;
    } else if (literal("null")) {
      v.kind = Value::Kind::Null;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      v.kind = Value::Kind::Number;
      v.number = number();
    } else {
      fail(std::string("unexpected character '") + c + "'");
    }
    return v;
  }

  double number() {
    size_t start = i_;
    auto digits = [&] {
      size_t from = i_;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_;
      if (i_ == from) fail("malformed number");
    };
    if (s_[i_] == '-') ++i_;
    if (i_ < s_.size() && s_[i_] == '0') ++i_;  // no leading zeros
    else digits();
    if (i_ < s_.size() && s_[i_] == '.') ++i_, digits();
    if (i_ < s_.size() && (s_[i_] == 'e' || s_[i_] == 'E')) {
      ++i_;
      if (i_ < s_.size() && (s_[i_] == '+' || s_[i_] == '-')) ++i_;
      digits();
    }
    // strtod reads the same grammar; the C locale is assumed (no one changes it in braze-run).
    return std::strtod(s_.substr(start, i_ - start).c_str(), nullptr);
  }

  unsigned hex4() {
    if (i_ + 4 > s_.size()) fail("truncated \\u escape");
    unsigned u = 0;
    for (int k = 0; k < 4; ++k) {
      char h = s_[i_++];
      u <<= 4;
      if (h >= '0' && h <= '9') u |= h - '0';
      else if (h >= 'a' && h <= 'f') u |= h - 'a' + 10;
      else if (h >= 'A' && h <= 'F') u |= h - 'A' + 10;
      else fail("malformed \\u escape");
    }
    return u;
  }

  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string string() {
    ++i_;  // the opening quote
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail("unterminated string");
      char c = s_[i_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) fail("unterminated string");
      switch (char e = s_[i_++]) {
        case '"': case '\\': case '/': out += e; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00 && s_.compare(i_, 2, "\\u") == 0) {  // a surrogate pair
            size_t back = i_;
            i_ += 2;
            unsigned low = hex4();
            if (low >= 0xDC00 && low < 0xE000) cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            else i_ = back;
          }
          append_utf8(out, cp);  // (a lone surrogate is kept as is, like Python's json)
          break;
        }
        default: fail(std::string("unknown escape '\\") + e + "'");
      }
    }
  }
};

}  // namespace

Value parse(const std::string& text) { return Parser(text).document(); }

}  // namespace braze::json
