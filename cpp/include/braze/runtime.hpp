// braze's C++ runtime: load an artifact folder written by `braze compile`, check
// it, set inputs, run, read outputs. Plain C++17: TVM stays behind the .cpp.
//
//   braze::Model model = braze::Model::load("model.braze");
//   braze::Tensor x = braze::Tensor::zeros(model.inputs()[0]);
//   model.set_input(model.inputs()[0].name, x);
//   model.run();
//   braze::Tensor y = model.output(0);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace braze {

// Every error braze reports: one line, saying what is wrong and what to do.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A missing, corrupt or mismatched artifact (format, target, TVM version).
class ArtifactError : public Error {
 public:
  using Error::Error;
};

// Wrong input names, shapes or dtypes.
class InputError : public Error {
 public:
  using Error::Error;
};

// The braze version this runtime was built from, and the TVM version it links.
const char* version();
const char* tvm_version();

// Bytes per element of a dtype named as numpy names it ("float32", "int64",
// "bool", ...); throws Error for a dtype braze does not know.
size_t dtype_size(const std::string& dtype);

// An input or output as the manifest describes it.
struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype;  // numpy's name: "float32", "int64", "bool", ...

  int64_t numel() const;
};

// A host array in C order.
struct Tensor {
  std::vector<int64_t> shape;
  std::string dtype;
  std::vector<unsigned char> bytes;

  static Tensor zeros(const std::vector<int64_t>& shape, const std::string& dtype);
  static Tensor zeros(const TensorInfo& info) { return zeros(info.shape, info.dtype); }

  int64_t numel() const;
  // The elements as T (the caller picks the T that matches dtype).
  template <class T> T* data() { return reinterpret_cast<T*>(bytes.data()); }
  template <class T> const T* data() const { return reinterpret_cast<const T*>(bytes.data()); }
};

// TVM's CPU thread pool is one per process: this sets it for every model.
// The pool starts with every core (TVM_NUM_THREADS, if set, wins) and can only
// be narrowed. Models loaded later apply their manifest's "threads" on top.
void set_threads(int n);
int threads();

// How long TVM's idle workers spin (iterations of sched_yield, about 0.3-1 us
// each) after each parallel kernel before they sleep. The default, kSpinShort,
// bridges the gaps between the kernels of one run and leaves the process quiet
// within a millisecond of a run's end; kSpinLong is TVM's own count: lowest
// latency for back-to-back runs, but every pool thread keeps a core busy for
// 0.1-0.3 s after each run. TVM reads the count once per process, when its
// pool first runs a kernel: set_spin() after a model has run throws Error
// unless the count is the one in force. TVM_THREAD_POOL_SPIN_COUNT in the
// environment sets the default.
constexpr int kSpinOff = 0;
constexpr int kSpinShort = 1000;
constexpr int kSpinLong = 300000;
void set_spin(int count);
int spin();
// "off", "short", "long" or a whole number >= 0 -> the count; Error otherwise.
int parse_spin(const std::string& text);

// A loaded model. Movable, not copyable; not safe to run from two threads at once.
class Model {
 public:
  // Loads ARTIFACT_DIR/{manifest.json,lib.so} after checking the manifest
  // (format, target kind, TVM version, the CPU's architecture and ISA
  // features). Throws ArtifactError.
  static Model load(const std::string& artifact_dir);

  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  const std::vector<TensorInfo>& inputs() const;
  const std::vector<TensorInfo>& outputs() const;
  // Manifest fields: "model" (the ONNX file name), "braze" (the compiler's
  // version), "target" name, kind and mcpu (the CPU it was tuned for; load()
  // checks the ISA features it requires, not the name), "threads" (0 when not set).
  const std::string& model_name() const;
  const std::string& braze_version() const;
  const std::string& target_name() const;
  const std::string& target_kind() const;
  const std::string& target_mcpu() const;
  int manifest_threads() const;

  // Copies one input in; its shape and dtype must be the manifest's (InputError).
  void set_input(const std::string& name, const Tensor& value);
  void set_input(const std::string& name, const void* data, const std::vector<int64_t>& shape,
                 const std::string& dtype);
  // Runs the model on the inputs set so far (all of them must be set: InputError).
  void run();
  // A copy of an output of the last run().
  Tensor output(size_t index) const;
  Tensor output(const std::string& name) const;

 private:
  struct Impl;
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace braze
