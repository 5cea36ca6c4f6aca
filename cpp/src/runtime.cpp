// The Model behind braze/runtime.hpp: TVM's Relax VM through the tvm_ffi API
// (the wheel's tvm/runtime headers are incomplete, see docs/deploy.md).
#include "braze/runtime.hpp"

#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/dtype.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/module.h>
#include <tvm/ffi/function.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include "elf.hpp"
#include "manifest.hpp"

namespace ffi = tvm::ffi;

namespace braze {

const char* version() { return BRAZE_VERSION; }
const char* tvm_version() { return BRAZE_TVM_VERSION; }

size_t dtype_size(const std::string& dtype) {
  static const std::pair<const char*, size_t> sizes[] = {
      {"float16", 2}, {"float32", 4}, {"float64", 8}, {"int8", 1},   {"int16", 2},  {"int32", 4},
      {"int64", 8},   {"uint8", 1},   {"uint16", 2},  {"uint32", 4}, {"uint64", 8}, {"bool", 1}};
  for (const auto& [name, size] : sizes)
    if (dtype == name) return size;
  throw Error("unsupported dtype '" + dtype + "'");
}

static int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t TensorInfo::numel() const { return product(shape); }
int64_t Tensor::numel() const { return product(shape); }

Tensor Tensor::zeros(const std::vector<int64_t>& shape, const std::string& dtype) {
  return Tensor{shape, dtype, std::vector<unsigned char>(product(shape) * dtype_size(dtype))};
}

namespace {

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// TVM's messages can span lines (and what() carries a traceback): keep the first line.
std::string tvm_message(const std::exception& e) {
  std::string text = e.what();
  if (auto* err = dynamic_cast<const ffi::Error*>(&e)) text = err->kind() + ": " + err->message();
  size_t start = text.find_first_not_of("\n ");
  if (start == std::string::npos) return "unknown error";
  return text.substr(start, text.find('\n', start) - start);
}

// TVM sizes its thread pool once, when it starts, from TVM_NUM_THREADS (half the
// cores when unset) and can only narrow it later: start it with every core,
// as braze's Python runtime does. Its idle spin is braze's short one unless
// the environment says otherwise.
void prepare_thread_pool() {
  static std::once_flag once;
  std::call_once(once, [] {
    unsigned cores = std::thread::hardware_concurrency();
    ::setenv("TVM_NUM_THREADS", std::to_string(cores ? cores : 1).c_str(), /*overwrite=*/0);
    ::setenv("TVM_THREAD_POOL_SPIN_COUNT", std::to_string(kSpinShort).c_str(), /*overwrite=*/0);
  });
}

// Set by the first run: TVM has read the spin count by then.
bool pool_started = false;

ffi::Function global(const char* name) {
  std::optional<ffi::Function> f = ffi::Function::GetGlobal(name);
  if (!f) throw Error(std::string("TVM's runtime has no function ") + name + " (is libtvm_runtime linked?)");
  return *f;
}

// Input buffers, 64-byte aligned like TVM's own allocations.
struct AlignedAlloc {
  void AllocData(DLTensor* t) {
    size_t n = (ffi::GetDataSize(*t) + 63) / 64 * 64;
    t->data = std::aligned_alloc(64, n ? n : 64);
    if (!t->data) throw std::bad_alloc();
  }
  void FreeData(DLTensor* t) { std::free(t->data); }
};

// The library, its Relax VM and the VM's main function.
struct Vm {
  ffi::Module lib, vm;
  ffi::Function main;
};

Vm load_vm(const std::string& lib_path) {
  prepare_thread_pool();
  try {
    ffi::Module lib = ffi::Module::LoadFromFile(lib_path);
    ffi::Optional<ffi::Function> load_exec = lib->GetFunction("vm_load_executable");
    if (!load_exec.has_value()) throw Error("it holds no Relax VM executable");
    ffi::Module vm = load_exec.value()().cast<ffi::Module>();
    ffi::Optional<ffi::Function> init = vm->GetFunction("vm_initialization");
    ffi::Optional<ffi::Function> main = vm->GetFunction("main");
    if (!init.has_value() || !main.has_value()) throw Error("its VM has no main function");
    // One CPU device with TVM's pooled allocator (2), as relax.VirtualMachine does.
    init.value()(static_cast<int>(kDLCPU), 0, 2);
    return Vm{lib, vm, main.value()};
  } catch (const std::exception& e) {
    throw ArtifactError(lib_path + ": the compiled library is corrupt and cannot be loaded (" +
                        tvm_message(e) + "); rebuild it with `braze compile`");
  }
}

}  // namespace

void set_threads(int n) {
  if (n < 1) throw Error("the thread count must be at least 1, not " + std::to_string(n));
  prepare_thread_pool();
  try {
    global("runtime.config_threadpool")(/*big cores*/ 1, n);
  } catch (const ffi::Error& e) {
    throw Error("cannot set " + std::to_string(n) + " threads: " + tvm_message(e));
  }
}

int threads() {
  prepare_thread_pool();
  return global("runtime.NumThreads")().cast<int>();
}

int parse_spin(const std::string& text) {
  if (text == "off") return kSpinOff;
  if (text == "short") return kSpinShort;
  if (text == "long") return kSpinLong;
  size_t used = 0;
  long n = -1;
  try {
    n = std::stol(text, &used);
  } catch (const std::exception&) {
  }
  if (text.empty() || used != text.size() || n < 0 || n > 1000000000)
    throw Error("spin takes off, short, long or a whole number of spin iterations, not '" + text + "'");
  return static_cast<int>(n);
}

int spin() {
  prepare_thread_pool();
  const char* value = std::getenv("TVM_THREAD_POOL_SPIN_COUNT");
  return value ? parse_spin(value) : kSpinShort;
}

void set_spin(int count) {
  if (count < 0) throw Error("the spin count must be at least 0, not " + std::to_string(count));
  int current = spin();
  if (pool_started && count != current)
    throw Error("cannot change the spin count to " + std::to_string(count) +
                ": a model has already run in this process with " + std::to_string(current) +
                " (TVM reads it once per process); set it before the first run");
  ::setenv("TVM_THREAD_POOL_SPIN_COUNT", std::to_string(count).c_str(), /*overwrite=*/1);
}

struct Model::Impl {
  std::string dir;
  Manifest manifest;
  Vm vm;
  std::vector<ffi::Tensor> args;  // one buffer per input, reused by every run
  std::vector<bool> is_set;
  std::vector<ffi::Tensor> results;

  // The input's spec for this shape: the model's, or with gears that of a gear
  // taking this shape (so that an input can be set before the others).
  const TensorInfo* spec_for(size_t i, const std::vector<int64_t>& shape) const {
    if (shape == manifest.inputs[i].shape) return &manifest.inputs[i];
    for (const Gear& g : manifest.gears)
      if (g.inputs[i].shape == shape) return &g.inputs[i];
    return nullptr;
  }

  std::string gear_list() const {
    std::vector<std::string> out;
    for (const Gear& g : manifest.gears) {
      std::vector<std::string> shapes;
      for (const TensorInfo& t : g.inputs) shapes.push_back(t.name + " " + shape_str(t.shape));
      out.push_back(g.name + " (" + join(shapes) + ")");
    }
    std::string text;
    for (size_t i = 0; i < out.size(); ++i) text += (i ? "; " : "") + out[i];
    return text;
  }

  // The VM function for the inputs set now and the outputs it returns.
  std::pair<ffi::Function, const std::vector<TensorInfo>*> entry() {
    if (manifest.gears.empty()) return {vm.main, &manifest.outputs};
    for (const Gear& g : manifest.gears) {
      bool match = true;
      for (size_t i = 0; i < args.size() && match; ++i) {
        ffi::ShapeView shape = args[i].shape();
        match = std::vector<int64_t>(shape.begin(), shape.end()) == g.inputs[i].shape;
      }
      if (!match) continue;
      ffi::Optional<ffi::Function> f = vm.vm->GetFunction(g.function);
      if (!f.has_value()) throw ArtifactError(dir + ": its VM has no function " + g.function + " for gear " + g.name);
      return {f.value(), &g.outputs};
    }
    std::vector<std::string> given;
    for (size_t i = 0; i < args.size(); ++i) {
      ffi::ShapeView shape = args[i].shape();
      given.push_back(manifest.inputs[i].name + " " + shape_str({shape.begin(), shape.end()}));
    }
    throw InputError("the input shapes (" + join(given) + ") match no gear of this artifact; its gears: " +
                     gear_list());
  }

  size_t input_index(const std::string& name) const {
    std::vector<std::string> names;
    for (size_t i = 0; i < manifest.inputs.size(); ++i) {
      if (manifest.inputs[i].name == name) return i;
      names.push_back(manifest.inputs[i].name);
    }
    throw InputError("unknown input '" + name + "' (the model takes: " + join(names) + ")");
  }
};

Model Model::load(const std::string& artifact_dir) {
  Manifest manifest = read_manifest(artifact_dir);
  const std::string lib_path = artifact_dir + "/lib.so";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(lib_path, ec))
    throw ArtifactError(artifact_dir + ": incomplete artifact, lib.so is missing");
  check_shared_library(lib_path);
  std::unique_ptr<Impl> impl(new Impl{artifact_dir, std::move(manifest), load_vm(lib_path), {}, {}, {}});

  for (const TensorInfo& info : impl->manifest.inputs) {
    try {
      ffi::ShapeView shape(info.shape.data(), info.shape.size());
      DLDataType dtype = ffi::StringToDLDataType(info.dtype);
      impl->args.push_back(ffi::Tensor::FromNDAlloc(AlignedAlloc(), shape, dtype, DLDevice{kDLCPU, 0}));
    } catch (const std::bad_alloc&) {
      throw ArtifactError(artifact_dir + ": input '" + info.name + "' of shape " + shape_str(info.shape) +
                          " is more than this machine can allocate");
    }
  }
  impl->is_set.assign(impl->args.size(), false);
  if (impl->manifest.threads > 0) set_threads(impl->manifest.threads);
  return Model(std::move(impl));
}

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

const std::vector<TensorInfo>& Model::inputs() const { return impl_->manifest.inputs; }
const std::vector<TensorInfo>& Model::outputs() const { return impl_->manifest.outputs; }
const std::string& Model::model_name() const { return impl_->manifest.model; }
const std::string& Model::braze_version() const { return impl_->manifest.braze_version; }
const std::string& Model::target_name() const { return impl_->manifest.target_name; }
const std::string& Model::target_kind() const { return impl_->manifest.target_kind; }
const std::string& Model::target_mcpu() const { return impl_->manifest.target_mcpu; }
int Model::manifest_threads() const { return impl_->manifest.threads; }

void Model::set_input(const std::string& name, const Tensor& value) {
  size_t need = value.numel() * dtype_size(value.dtype);
  if (value.bytes.size() != need)
    throw InputError("input '" + name + "' holds " + std::to_string(value.bytes.size()) +
                     " bytes, its shape " + shape_str(value.shape) + " and dtype " + value.dtype + " need " +
                     std::to_string(need));
  set_input(name, value.bytes.data(), value.shape, value.dtype);
}

void Model::set_input(const std::string& name, const void* data, const std::vector<int64_t>& shape,
                      const std::string& dtype) {
  size_t i = impl_->input_index(name);
  const TensorInfo* found = impl_->spec_for(i, shape);
  if (!found)
    throw InputError("input '" + name + "' has shape " + shape_str(shape) + ", expected " +
                     shape_str(impl_->manifest.inputs[i].shape) +
                     (impl_->manifest.gears.empty() ? "" : " or a gear's: " + impl_->gear_list()));
  const TensorInfo& spec = *found;
  if (dtype != spec.dtype)
    throw InputError("input '" + name + "' has dtype " + dtype + ", expected " + spec.dtype);
  ffi::Tensor& arg = impl_->args[i];
  ffi::ShapeView current = arg.shape();
  if (std::vector<int64_t>(current.begin(), current.end()) != shape)  // another gear's shape
    arg = ffi::Tensor::FromNDAlloc(AlignedAlloc(), ffi::ShapeView(shape.data(), shape.size()), arg.dtype(),
                                   DLDevice{kDLCPU, 0});
  std::memcpy(arg.data_ptr(), data, ffi::GetDataSize(arg.numel(), arg.dtype()));
  impl_->is_set[i] = true;
}

void Model::run() {
  std::vector<std::string> missing, names;
  for (size_t i = 0; i < impl_->args.size(); ++i) {
    names.push_back(impl_->manifest.inputs[i].name);
    if (!impl_->is_set[i]) missing.push_back(names.back());
  }
  if (!missing.empty())
    throw InputError("missing input(s) " + join(missing) + " (the model takes: " + join(names) + ")");

  impl_->results.clear();  // a failed run leaves no stale outputs behind
  auto [function, outputs] = impl_->entry();
  pool_started = true;
  std::vector<ffi::AnyView> args(impl_->args.begin(), impl_->args.end());
  ffi::Any result;
  try {
    function.CallPacked(args.data(), static_cast<int32_t>(args.size()), &result);
  } catch (const std::exception& e) {
    throw Error(impl_->dir + ": running the model failed: " + tvm_message(e));
  }

  if (auto one = result.as<ffi::Tensor>()) {
    impl_->results.push_back(*one);
  } else if (auto many = result.as<ffi::Array<ffi::Any>>()) {
    for (const ffi::Any& item : *many)
      if (auto t = item.as<ffi::Tensor>()) impl_->results.push_back(*t);
  }
  if (impl_->results.size() != outputs->size())
    throw Error(impl_->dir + ": the model returned " + std::to_string(impl_->results.size()) +
                " tensor(s), its manifest lists " + std::to_string(outputs->size()) + " output(s)");
}

Tensor Model::output(size_t index) const {
  if (impl_->results.empty()) throw Error("no outputs yet: call run() first");
  if (index >= impl_->results.size())
    throw Error("output index " + std::to_string(index) + " out of range (the model has " +
                std::to_string(impl_->results.size()) + " outputs)");
  const ffi::Tensor& t = impl_->results[index];
  ffi::ShapeView shape = t.shape();
  Tensor out{{shape.begin(), shape.end()}, std::string(ffi::DLDataTypeToString(t.dtype())), {}};
  // The VM returns compact CPU tensors; anything else is not ours to copy byte for byte.
  if (!t.IsContiguous() || t.device().device_type != kDLCPU)
    throw Error("output " + impl_->manifest.outputs[index].name + " is not a compact CPU tensor");
  const auto* data = static_cast<const unsigned char*>(t.data_ptr()) + t.byte_offset();
  out.bytes.assign(data, data + ffi::GetDataSize(t.numel(), t.dtype()));
  return out;
}

Tensor Model::output(const std::string& name) const {
  for (size_t i = 0; i < impl_->manifest.outputs.size(); ++i)
    if (impl_->manifest.outputs[i].name == name) return output(i);
  throw Error("unknown output '" + name + "'");
}

}  // namespace braze
