#include "manifest.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cpu.hpp"
#include "json.hpp"

namespace braze {
namespace {

const char* const kRebuild = "rebuild it with `braze compile`";

// Errors about the manifest's content all read "DIR: corrupt manifest.json (WHAT)".
struct Reader {
  std::string dir;

  [[noreturn]] void corrupt(const std::string& what) const {
    throw ArtifactError(dir + ": corrupt manifest.json (" + what + ")");
  }

  const json::Value& member(const json::Value& obj, const std::string& key, json::Value::Kind kind,
                            const std::string& where) const {
    const json::Value* v = obj.find(key);
    if (!v || v->kind != kind) corrupt(where + key + " is missing or has the wrong type");
    return *v;
  }

  std::string string(const json::Value& obj, const std::string& key, const std::string& where = "") const {
    return member(obj, key, json::Value::Kind::String, where).string;
  }

  std::vector<TensorInfo> tensors(const json::Value& root, const std::string& key,
                                  const std::string& prefix = "") const {
    std::vector<TensorInfo> out;
    const json::Value& list = member(root, key, json::Value::Kind::Array, prefix);
    for (size_t i = 0; i < list.array.size(); ++i) {
      std::string where = prefix + key + "[" + std::to_string(i) + "].";
      const json::Value& item = list.array[i];
      TensorInfo info;
      info.name = string(item, "name", where);
      info.dtype = string(item, "dtype", where);
      int64_t bytes = 8;  // a bound on the tensor's size, kept far from overflowing
      for (const json::Value& dim : member(item, "shape", json::Value::Kind::Array, where).array) {
        int64_t n;
        if (!dim.as_int(&n) || n < 0) corrupt(where + "shape has a size that is not a whole number >= 0");
        if (n > 0 && bytes > (int64_t{1} << 62) / n) corrupt(where + "shape is too large");
        bytes *= n > 0 ? n : 1;
        info.shape.push_back(n);
      }
      try {
        dtype_size(info.dtype);
      } catch (const Error& e) {
        corrupt(where + "dtype: " + e.what());
      }
      out.push_back(std::move(info));
    }
    return out;
  }

  // "requires": {"arch": "x86_64", "features": ["avx2", ...]}, absent in manifests before it.
  void requirements(const json::Value& root, Manifest* m) const {
    const json::Value* req = root.find("requires");
    if (!req || req->is_null()) return;
    if (req->kind != json::Value::Kind::Object) corrupt("requires is not an object");
    m->required_arch = string(*req, "arch", "requires.");
    for (const json::Value& f : member(*req, "features", json::Value::Kind::Array, "requires.").array) {
      if (f.kind != json::Value::Kind::String) corrupt("requires.features holds a value that is not a name");
      m->required_features.push_back(f.string);
    }
  }
};

// Code for another architecture, or using an instruction this CPU lacks, must
// not reach the loader: it would stop the process with SIGILL.
void check_cpu(const std::string& dir, const Manifest& m) {
  if (m.required_arch.empty()) return;
  std::string problem;
  if (m.required_arch != host_arch()) {
    problem = "this machine is " + std::string(host_arch());
  } else {
    for (const std::string& f : m.required_features)
      if (!host_has(f)) problem += (problem.empty() ? "this CPU lacks " : ", ") + f;
  }
  if (problem.empty()) return;
  std::string portable = portable_target();
  throw ArtifactError(dir + ": built for target " + m.target_name + " (" + m.required_arch + "), " + problem +
                      "; rebuild it with `braze compile` for a target this machine runs: " +
                      (portable.empty() ? "" : "`--target " + portable + "` (portable) or ") +
                      "`--target cpu` (this machine)");
}

}  // namespace

Manifest read_manifest(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw ArtifactError(dir + ": no such artifact (expected a folder written by `braze compile`)");
  std::ifstream file(dir + "/manifest.json", std::ios::binary);
  if (!file) throw ArtifactError(dir + ": incomplete artifact, manifest.json is missing");
  std::stringstream text;
  text << file.rdbuf();

  Reader r{dir};
  json::Value root;
  try {
    root = json::parse(text.str());
  } catch (const std::exception& e) {
    r.corrupt(e.what());
  }
  int64_t format = 0;
  const json::Value* f = root.find("format");
  if (!f || !f->as_int(&format) || format != kFormat)
    throw ArtifactError(dir + ": not a braze artifact of format " + std::to_string(kFormat));

  Manifest m;
  m.braze_version = r.string(root, "braze");
  m.tvm_version = r.string(root, "tvm");
  if (m.tvm_version != tvm_version())
    throw ArtifactError(dir + ": built with tvm " + m.tvm_version + ", this runtime links tvm " +
                        tvm_version() + "; " + kRebuild);
  if (const json::Value* model = root.find("model"); model && model->kind == json::Value::Kind::String)
    m.model = model->string;

  const json::Value& target = r.member(root, "target", json::Value::Kind::Object, "");
  m.target_name = r.string(target, "name", "target.");
  m.target_kind = r.string(target, "kind", "target.");
  if (const json::Value* mcpu = target.find("mcpu"); mcpu && mcpu->kind == json::Value::Kind::String)
    m.target_mcpu = mcpu->string;
  if (m.target_kind != "llvm")
    throw ArtifactError(dir + ": built for target " + m.target_name + " (" + m.target_kind +
                        "), this runtime runs CPU (llvm) artifacts only; rebuild it with "
                        "`braze compile --target cpu`");
  r.requirements(root, &m);
  check_cpu(dir, m);

  if (const json::Value* t = root.find("threads"); t && !t->is_null()) {
    int64_t n;
    if (!t->as_int(&n) || n < 0 || n > 4096) r.corrupt("threads is not a thread count");
    m.threads = static_cast<int>(n);
  }
  m.inputs = r.tensors(root, "inputs");
  m.outputs = r.tensors(root, "outputs");
  if (const json::Value* gears = root.find("gears"); gears && !gears->is_null()) {
    if (gears->kind != json::Value::Kind::Array) r.corrupt("gears is not a list");
    for (size_t i = 0; i < gears->array.size(); ++i) {
      const json::Value& item = gears->array[i];
      std::string where = "gears[" + std::to_string(i) + "].";
      if (item.kind != json::Value::Kind::Object) r.corrupt(where + " is not an object");
      Gear gear{r.string(item, "name", where), r.string(item, "function", where),
                r.tensors(item, "inputs", where), r.tensors(item, "outputs", where)};
      if (gear.inputs.size() != m.inputs.size()) r.corrupt(where + "inputs differ from the model's inputs");
      m.gears.push_back(std::move(gear));
    }
  }
  return m;
}

}  // namespace braze
