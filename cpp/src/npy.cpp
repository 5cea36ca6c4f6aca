#include "npy.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "braze's .npy reader copies little-endian data as is: a big-endian host needs byte swapping"
#endif

namespace braze::npy {
namespace {

const char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

// numpy's type codes ("<f4" without the byte order) and braze's dtype names.
const std::pair<const char*, const char*> kCodes[] = {
    {"f2", "float16"}, {"f4", "float32"}, {"f8", "float64"}, {"i1", "int8"},   {"i2", "int16"},
    {"i4", "int32"},   {"i8", "int64"},   {"u1", "uint8"},   {"u2", "uint16"}, {"u4", "uint32"},
    {"u8", "uint64"},  {"b1", "bool"}};

// The header is a Python dict literal: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class Header {
 public:
  Header(const std::string& path, const std::string& text) : path_(path), s_(text) {}

  void parse(std::string* descr, bool* fortran, std::vector<int64_t>* shape) {
    bool seen[3] = {false, false, false};
    expect('{');
    while (!consume('}')) {
      std::string key = string();
      expect(':');
      if (key == "descr") {
        space();
        if (peek() == '[') fail("structured dtypes are not supported");
        *descr = string(), seen[0] = true;
      } else if (key == "fortran_order") {
        *fortran = boolean(), seen[1] = true;
      } else if (key == "shape") {
        *shape = tuple(), seen[2] = true;
      } else {
        fail("unexpected key '" + key + "' in the header");
      }
      if (!consume(',')) {
        expect('}');
        break;
      }
    }
    if (!seen[0] || !seen[1] || !seen[2]) fail("the header lacks descr, fortran_order or shape");
  }

 private:
  const std::string& path_;
  const std::string& s_;
  size_t i_ = 0;

  [[noreturn]] void fail(const std::string& what) const { throw Error(path_ + ": " + what); }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }
  void space() {
    while (peek() == ' ') ++i_;
  }
  bool consume(char c) {
    space();
    return peek() == c ? (++i_, true) : false;
  }
  void expect(char c) {
    if (!consume(c)) fail("malformed header (expected '" + std::string(1, c) + "')");
  }

  std::string string() {
    space();
    char quote = peek();
    if (quote != '\'' && quote != '"') fail("malformed header (expected a quoted string)");
    size_t end = s_.find(quote, ++i_);
    if (end == std::string::npos) fail("malformed header (unterminated string)");
    std::string out = s_.substr(i_, end - i_);
    i_ = end + 1;
    return out;
  }

  bool boolean() {
    space();
    if (s_.compare(i_, 4, "True") == 0) return i_ += 4, true;
    if (s_.compare(i_, 5, "False") == 0) return i_ += 5, false;
    fail("malformed header (fortran_order is neither True nor False)");
  }

  std::vector<int64_t> tuple() {
    std::vector<int64_t> out;
    expect('(');
    while (!consume(')')) {
      space();
      int64_t n = 0;
      size_t start = i_;
      while (peek() >= '0' && peek() <= '9') {
        if (n > (INT64_MAX - 9) / 10) fail("malformed header (a dimension is too large)");
        n = n * 10 + (s_[i_++] - '0');
      }
      if (i_ == start) fail("malformed header (shape is not a tuple of sizes)");
      out.push_back(n);
      if (!consume(',')) {
        expect(')');
        break;
      }
    }
    return out;
  }
};

std::string dtype_of(const std::string& path, const std::string& descr) {
  for (const auto& [code, name] : kCodes) {
    if (descr.size() != 3 || descr.compare(1, 2, code) != 0) continue;
    bool one_byte = code[1] == '1';  // byte order means nothing for these: numpy writes '|'
    char order = descr[0];
    if (order == '<' || order == '=' || (one_byte && (order == '|' || order == '>'))) return name;
    if (order == '>')
      throw Error(path + ": big-endian data ('" + descr + "') is not supported; save it little-endian "
                  "(numpy: a.astype(a.dtype.newbyteorder('<')))");
  }
  throw Error(path + ": unsupported dtype '" + descr + "' (braze reads f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1)");
}

std::string descr_of(const std::string& dtype) {
  for (const auto& [code, name] : kCodes)
    if (dtype == name) return (code[1] == '1' ? "|" : "<") + std::string(code);
  throw Error("cannot write dtype '" + dtype + "' to .npy");
}

uint32_t little_endian(const unsigned char* p, int bytes) {
  uint32_t v = 0;
  for (int k = bytes - 1; k >= 0; --k) v = (v << 8) | p[k];
  return v;
}

}  // namespace

Tensor read(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw Error(path + ": cannot open (" + std::strerror(errno) + ")");
  std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());

  if (bytes.size() < kMagicSize + 4 || bytes.compare(0, kMagicSize, kMagic) != 0)
    throw Error(path + ": not a .npy file");
  int major = p[6], minor = p[7];
  if ((major != 1 && major != 2) || minor != 0)
    throw Error(path + ": .npy format " + std::to_string(major) + "." + std::to_string(minor) +
                " is not supported (1.0 and 2.0 are)");
  size_t len_bytes = major == 1 ? 2 : 4;
  size_t start = kMagicSize + 2 + len_bytes;
  if (bytes.size() < start) throw Error(path + ": truncated .npy header");
  size_t header_len = little_endian(p + 8, static_cast<int>(len_bytes));
  if (bytes.size() < start + header_len) throw Error(path + ": truncated .npy header");

  std::string descr;
  bool fortran = false;
  Tensor t;
  Header(path, bytes.substr(start, header_len)).parse(&descr, &fortran, &t.shape);
  if (fortran) throw Error(path + ": Fortran-ordered arrays are not supported; save a C-ordered one "
                           "(numpy: np.ascontiguousarray(a))");
  t.dtype = dtype_of(path, descr);

  size_t need = static_cast<size_t>(t.numel()) * dtype_size(t.dtype);
  size_t have = bytes.size() - start - header_len;
  if (have != need)
    throw Error(path + ": holds " + std::to_string(have) + " bytes of data, its header says " +
                std::to_string(need));
  t.bytes.assign(bytes.begin() + start + header_len, bytes.end());
  return t;
}

void write(const std::string& path, const Tensor& tensor) {
  if (tensor.bytes.size() != static_cast<size_t>(tensor.numel()) * dtype_size(tensor.dtype))
    throw Error(path + ": the array's bytes do not match its shape and dtype");
  std::string shape = "(";
  for (size_t i = 0; i < tensor.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(tensor.shape[i]);
  shape += tensor.shape.size() == 1 ? ",)" : ")";
  std::string header = "{'descr': '" + descr_of(tensor.dtype) + "', 'fortran_order': False, 'shape': " +
                       shape + ", }";
  // Format 1.0 (a header of these few keys always fits its 16-bit length), padded
  // with spaces and a newline so the data starts on a 64-byte boundary.
  const size_t prefix = kMagicSize + 4;
  header += std::string(63 - (prefix + header.size()) % 64, ' ') + "\n";
  std::string out(kMagic, kMagicSize);
  out += '\x01';
  out += '\0';
  out += static_cast<char>(header.size() & 0xFF);
  out += static_cast<char>(header.size() >> 8);
  out += header;

  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) throw Error(path + ": cannot write (" + std::strerror(errno) + ")");
  file.write(out.data(), static_cast<std::streamsize>(out.size()));
  file.write(reinterpret_cast<const char*>(tensor.bytes.data()),
             static_cast<std::streamsize>(tensor.bytes.size()));
  if (!file.flush()) throw Error(path + ": cannot write (" + std::strerror(errno) + ")");
}

}  // namespace braze::npy
