// braze-gpu-check: the measuring half of benchmarks/gpu_check/run.sh.
//
//   braze-gpu-check device        the CUDA driver and GPU 0, as one JSON line; exit 3 and
//                                 "no CUDA device: WHY" on stderr when there is none
//   braze-gpu-check run CASE ...  load CASE/artifact (CUDA or CPU), run it on CASE/inputs/I.npy,
//                                 compare with CASE/ref/I.npy, time it; one JSON line
//
// braze::runtime (and so braze-run) runs CPU artifacts only (docs/deploy.md); this
// tool drives TVM's Relax VM directly with the kernels on the GPU and the VM on
// the CPU, as braze's Python runtime does. It needs only libtvm_runtime.so,
// libtvm_ffi.so, libtvm_runtime_cuda.so and libcudart from the prepared folder,
// and the driver (libcuda.so.1) from the machine.
#include <tvm/ffi/container/array.h>
#include <tvm/ffi/container/shape.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/dtype.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/module.h>
#include <tvm/ffi/function.h>

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "braze/runtime.hpp"
#include "cpu.hpp"
#include "elf.hpp"
#include "json.hpp"
#include "npy.hpp"

namespace ffi = tvm::ffi;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

const char kUsage[] =
    "usage: braze-gpu-check device\n"
    "       braze-gpu-check run CASE [--repeat N] [--max-seconds S] [--cuda-lib FILE]\n";

struct NoDevice : braze::Error {
  using braze::Error::Error;
};

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += static_cast<char>(c);
    else if (c < 0x20) { char buf[8]; std::snprintf(buf, sizeof buf, "\\u%04x", c); out += buf; }
    else out += static_cast<char>(c);
  }
  return out + "\"";
}

std::string num(double x) {
  if (!std::isfinite(x)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

std::string exe_dir() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : self.parent_path().string();
}

// --- the driver, asked directly: an old driver and a missing one read differently -------
using CUresult = int;
template <class F> F symbol(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  if (!p) throw NoDevice(std::string("libcuda.so.1 has no ") + name);
  return reinterpret_cast<F>(p);
}

int device_query() {
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!cuda) throw NoDevice(std::string("no CUDA driver (libcuda.so.1 cannot be loaded: ") + dlerror() + ")");
  auto error_string = symbol<CUresult (*)(CUresult, const char**)>(cuda, "cuGetErrorString");
  auto check = [&](CUresult r, const char* what) {
    if (r == 0) return;
    const char* text = nullptr;
    error_string(r, &text);
    throw NoDevice(std::string(what) + " failed: " + (text ? text : "error " + std::to_string(r)));
  };
  check(symbol<CUresult (*)(unsigned)>(cuda, "cuInit")(0), "cuInit");
  int driver = 0, count = 0;
  check(symbol<CUresult (*)(int*)>(cuda, "cuDriverGetVersion")(&driver), "cuDriverGetVersion");
  check(symbol<CUresult (*)(int*)>(cuda, "cuDeviceGetCount")(&count), "cuDeviceGetCount");
  if (count < 1) throw NoDevice("the driver sees no GPU");
  int dev = 0;
  check(symbol<CUresult (*)(int*, int)>(cuda, "cuDeviceGet")(&dev, 0), "cuDeviceGet");
  char name[256] = {0};
  check(symbol<CUresult (*)(char*, int, int)>(cuda, "cuDeviceGetName")(name, sizeof name - 1, dev), "cuDeviceGetName");
  auto attr = symbol<CUresult (*)(int*, int, int)>(cuda, "cuDeviceGetAttribute");
  int major = 0, minor = 0, sms = 0, clock_khz = 0;
  check(attr(&major, 75, dev), "cuDeviceGetAttribute");  // COMPUTE_CAPABILITY_MAJOR
  check(attr(&minor, 76, dev), "cuDeviceGetAttribute");  // COMPUTE_CAPABILITY_MINOR
  check(attr(&sms, 16, dev), "cuDeviceGetAttribute");    // MULTIPROCESSOR_COUNT
  attr(&clock_khz, 13, dev);                             // CLOCK_RATE (deprecated: may fail)
  size_t memory = 0;
  if (void* p = dlsym(cuda, "cuDeviceTotalMem_v2")) reinterpret_cast<CUresult (*)(size_t*, int)>(p)(&memory, dev);
  std::cout << "{\"name\": " << quote(name) << ", \"count\": " << count << ", \"compute_capability\": \""
            << major << "." << minor << "\", \"sm_count\": " << sms << ", \"memory_bytes\": " << memory
            << ", \"clock_mhz\": " << clock_khz / 1000 << ", \"driver_cuda_version\": \"" << driver / 1000 << "."
            << driver % 1000 / 10 << "\"}\n";
  return 0;
}

// --- one case: load, run, compare, time -----------------------------------------------------
struct Spec {
  std::string name, dtype;
  std::vector<int64_t> shape;
};

struct Case {
  std::string dir, kind;
  std::vector<Spec> inputs, outputs;
};

std::vector<Spec> specs(const braze::json::Value& list) {
  std::vector<Spec> out;
  for (const auto& item : list.array) {
    Spec s{item.find("name")->string, item.find("dtype")->string, {}};
    for (const auto& d : item.find("shape")->array) s.shape.push_back(static_cast<int64_t>(d.number));
    out.push_back(s);
  }
  return out;
}

Case read_case(const std::string& dir) {
  std::ifstream file(dir + "/artifact/manifest.json");
  if (!file) throw braze::Error(dir + "/artifact/manifest.json: missing (run prepare.sh again)");
  std::stringstream text;
  text << file.rdbuf();
  braze::json::Value m = braze::json::parse(text.str());
  Case c{dir, m.find("target")->find("kind")->string, specs(*m.find("inputs")), specs(*m.find("outputs"))};
  // Host code for another CPU would stop the process with SIGILL: say so first.
  if (const auto* req = m.find("requires"); req && !req->is_null()) {
    std::string arch = req->find("arch")->string, lacks;
    if (arch != braze::host_arch()) throw braze::Error(dir + ": host code for " + arch + ", this CPU is " + braze::host_arch());
    for (const auto& f : req->find("features")->array)
      if (!braze::host_has(f.string)) lacks += (lacks.empty() ? "" : ", ") + f.string;
    if (!lacks.empty())
      throw braze::Error(dir + ": its host code needs CPU features this machine lacks: " + lacks);
  }
  return c;
}

struct HostAlloc {
  void AllocData(DLTensor* t) { t->data = std::aligned_alloc(64, (ffi::GetDataSize(*t) + 63) / 64 * 64 + 64); }
  void FreeData(DLTensor* t) { std::free(t->data); }
};

ffi::Function global(const char* name) {
  auto f = ffi::Function::GetGlobal(name);
  if (!f) throw braze::Error(std::string("TVM's runtime has no ") + name);
  return *f;
}

ffi::Tensor host_tensor(const braze::Tensor& t) {
  ffi::Tensor out = ffi::Tensor::FromNDAlloc(HostAlloc(), ffi::ShapeView(t.shape.data(), t.shape.size()),
                                             ffi::StringToDLDataType(t.dtype), DLDevice{kDLCPU, 0});
  std::memcpy(out.data_ptr(), t.bytes.data(), t.bytes.size());
  return out;
}

void copy_into(const ffi::Tensor& from, const ffi::Tensor& to) {
  static ffi::Function copy = global("runtime.TVMTensorCopyFromTo");
  copy(from, to);
}

ffi::Tensor copy_to(const ffi::Tensor& t, DLDevice device) {
  static ffi::Function alloc = global("runtime.TVMTensorAllocWithScope");
  ffi::ShapeView shape = t.shape();
  ffi::Tensor out = alloc(ffi::Shape(shape.begin(), shape.end()), t.dtype(), device, nullptr).cast<ffi::Tensor>();
  copy_into(t, out);
  return out;
}

braze::Tensor to_braze(const ffi::Tensor& host) {
  ffi::ShapeView shape = host.shape();
  braze::Tensor out{{shape.begin(), shape.end()}, std::string(ffi::DLDataTypeToString(host.dtype())), {}};
  const auto* p = static_cast<const unsigned char*>(host.data_ptr());
  out.bytes.assign(p, p + ffi::GetDataSize(host.numel(), host.dtype()));
  return out;
}

double element(const braze::Tensor& t, int64_t i) {
  const std::string& d = t.dtype;
  if (d == "float32") return t.data<float>()[i];
  if (d == "float64") return t.data<double>()[i];
  if (d == "int64") return static_cast<double>(t.data<int64_t>()[i]);
  if (d == "int32") return t.data<int32_t>()[i];
  if (d == "int8") return t.data<int8_t>()[i];
  if (d == "uint8" || d == "bool") return t.data<uint8_t>()[i];
  if (d == "float16") {  // IEEE half -> float
    uint16_t h = t.data<uint16_t>()[i];
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? std::ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : std::ldexp(m + 1024, e - 25);
    return (h & 0x8000) ? -v : v;
  }
  throw braze::Error("cannot compare dtype " + d);
}

// braze's measure: max |ours - ref| over max(1, max |ref|); a NaN where the reference has none is inf.
std::pair<double, double> compare(const braze::Tensor& ours, const braze::Tensor& ref, const std::string& name) {
  if (ours.shape != ref.shape || ours.dtype != ref.dtype)
    throw braze::Error("output " + name + ": the GPU gave another shape or dtype than the reference");
  double max_abs = 0, scale = 1;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    double a = element(ours, i), b = element(ref, i);
    scale = std::max(scale, std::fabs(b));
    if (std::isnan(a) != std::isnan(b)) max_abs = INFINITY;
    else if (!std::isnan(a) && a != b) max_abs = std::max(max_abs, std::fabs(a - b));
  }
  return {max_abs, max_abs / scale};
}

struct Stats {
  double median, q1, q3, min, max;
  size_t runs;
};

Stats stats(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) {  // linear interpolation, as numpy.percentile
    double pos = q * (ms.size() - 1);
    size_t lo = static_cast<size_t>(pos);
    return lo + 1 < ms.size() ? ms[lo] + (pos - lo) * (ms[lo + 1] - ms[lo]) : ms[lo];
  };
  return {at(0.5), at(0.25), at(0.75), ms.front(), ms.back(), ms.size()};
}

std::string stats_json(const Stats& s) {
  return "{\"median_ms\": " + num(s.median) + ", \"q1_ms\": " + num(s.q1) + ", \"q3_ms\": " + num(s.q3) +
         ", \"min_ms\": " + num(s.min) + ", \"max_ms\": " + num(s.max) + ", \"runs\": " + std::to_string(s.runs) + "}";
}

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

int run_case(const std::string& dir, int repeat, double max_seconds, std::string cuda_lib) {
  Case c = read_case(dir);
  bool gpu = c.kind == "cuda";
  DLDevice device = gpu ? DLDevice{kDLCUDA, 0} : DLDevice{kDLCPU, 0};
  auto t_load = Clock::now();
  if (gpu) {  // registers the CUDA device API and the loader of the fatbin inside lib.so
    if (cuda_lib.empty()) cuda_lib = exe_dir() + "/../lib/libtvm_runtime_cuda.so";
    if (!dlopen(cuda_lib.c_str(), RTLD_NOW | RTLD_GLOBAL))
      throw braze::Error(std::string("TVM's CUDA runtime cannot load: ") + dlerror());
  }
  std::string lib_path = dir + "/artifact/lib.so";
  braze::check_shared_library(lib_path);
  ffi::Module lib = ffi::Module::LoadFromFile(lib_path);
  ffi::Module vm = lib->GetFunction("vm_load_executable").value()().cast<ffi::Module>();
  if (gpu) vm->GetFunction("vm_initialization").value()(static_cast<int>(kDLCUDA), 0, 2, static_cast<int>(kDLCPU), 0, 2);
  else vm->GetFunction("vm_initialization").value()(static_cast<int>(kDLCPU), 0, 2);
  ffi::Function main = vm->GetFunction("main").value();
  ffi::Function sync = global("runtime.Device_StreamSync");

  std::vector<ffi::Tensor> host_in, dev_in;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    braze::Tensor t = braze::npy::read(dir + "/inputs/" + std::to_string(i) + ".npy");
    if (t.shape != c.inputs[i].shape || t.dtype != c.inputs[i].dtype)
      throw braze::Error(dir + ": inputs/" + std::to_string(i) + ".npy is not " + c.inputs[i].name + "'s shape and dtype");
    host_in.push_back(host_tensor(t));
    dev_in.push_back(gpu ? copy_to(host_in.back(), device) : host_in.back());
  }
  auto call = [&](const std::vector<ffi::Tensor>& in) {
    std::vector<ffi::AnyView> args(in.begin(), in.end());
    ffi::Any result;
    main.CallPacked(args.data(), static_cast<int32_t>(args.size()), &result);
    return result;
  };
  auto outputs = [&](const ffi::Any& result) {
    std::vector<ffi::Tensor> out;
    if (auto one = result.as<ffi::Tensor>()) out.push_back(*one);
    else if (auto many = result.as<ffi::Array<ffi::Any>>())
      for (const ffi::Any& item : *many)
        if (auto t = item.as<ffi::Tensor>()) out.push_back(*t);
    return out;
  };
  auto wait = [&] { sync(device, static_cast<int64_t>(0)); };  // 0: the default stream
  double load_s = ms_since(t_load) / 1e3;

  // First run: its outputs are the ones compared.
  auto t_first = Clock::now();
  std::vector<ffi::Tensor> results = outputs(call(dev_in));
  wait();
  double first_ms = ms_since(t_first);
  if (results.size() != c.outputs.size())
    throw braze::Error(dir + ": the model returned " + std::to_string(results.size()) + " tensors, its manifest lists " +
                       std::to_string(c.outputs.size()));
  std::string rows;
  double worst = 0;
  std::vector<ffi::Tensor> host_out;  // reused by the end-to-end runs
  for (size_t i = 0; i < results.size(); ++i) {
    host_out.push_back(gpu ? copy_to(results[i], DLDevice{kDLCPU, 0}) : results[i]);
    braze::Tensor ours = to_braze(host_out.back());
    braze::Tensor ref = braze::npy::read(dir + "/ref/" + std::to_string(i) + ".npy");
    auto [max_abs, max_rel] = compare(ours, ref, c.outputs[i].name);
    worst = std::max(worst, max_rel);
    rows += std::string(rows.empty() ? "" : ", ") + "{\"name\": " + quote(c.outputs[i].name) +
            ", \"max_abs\": " + num(max_abs) + ", \"max_rel\": " + num(max_rel) + "}";
  }

  // Timed: the model alone (inputs on the device, waiting for the GPU after each run),
  // then end to end (inputs copied into the same device buffers, outputs back into the
  // same host ones). Up to REPEAT runs each, half of MAX_SECONDS each (10 runs at least).
  for (int i = 0; i < 3; ++i) call(dev_in), wait();
  std::vector<double> model_ms, e2e_ms;
  auto t_all = Clock::now();
  for (int i = 0; i < repeat && (i < 10 || ms_since(t_all) < max_seconds * 500); ++i) {
    auto t0 = Clock::now();
    call(dev_in);
    wait();
    model_ms.push_back(ms_since(t0));
  }
  t_all = Clock::now();
  for (int i = 0; i < repeat && (i < 10 || ms_since(t_all) < max_seconds * 500); ++i) {
    auto t0 = Clock::now();
    if (gpu)
      for (size_t k = 0; k < host_in.size(); ++k) copy_into(host_in[k], dev_in[k]);
    std::vector<ffi::Tensor> out = outputs(call(dev_in));
    if (gpu)
      for (size_t k = 0; k < out.size(); ++k) copy_into(out[k], host_out[k]);  // waits for the GPU
    e2e_ms.push_back(ms_since(t0));
  }
  std::cout << "{\"case\": " << quote(fs::path(dir).filename().string()) << ", \"device\": " << quote(gpu ? "cuda" : "cpu")
            << ", \"max_rel\": " << num(worst) << ", \"outputs\": [" << rows << "], \"load_s\": " << num(load_s)
            << ", \"first_run_ms\": " << num(first_ms) << ", \"model\": " << stats_json(stats(model_ms))
            << ", \"end_to_end\": " << stats_json(stats(e2e_ms)) << "}\n";
  return 0;
}

std::string first_line(const std::exception& e) {
  std::string text = e.what();
  if (auto* err = dynamic_cast<const ffi::Error*>(&e)) text = err->kind() + ": " + err->message();
  size_t start = text.find_first_not_of("\n ");
  return start == std::string::npos ? "unknown error" : text.substr(start, text.find('\n', start) - start);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 1 && args[0] == "device") return device_query();
    if (args.size() >= 2 && args[0] == "run") {
      int repeat = 100;
      double max_seconds = 20;
      std::string cuda_lib;
      for (size_t i = 2; i + 1 < args.size(); i += 2) {
        if (args[i] == "--repeat") repeat = std::max(1, std::stoi(args[i + 1]));
        else if (args[i] == "--max-seconds") max_seconds = std::stod(args[i + 1]);
        else if (args[i] == "--cuda-lib") cuda_lib = args[i + 1];
        else throw std::invalid_argument("unknown option " + args[i]);
      }
      if (args.size() % 2) throw std::invalid_argument("options come in pairs");
      return run_case(args[1], repeat, max_seconds, cuda_lib);
    }
    std::cerr << kUsage;
    return 2;
  } catch (const NoDevice& e) {
    std::cerr << "no CUDA device: " << e.what() << "\n";
    return 3;
  } catch (const std::invalid_argument& e) {
    std::cerr << "braze-gpu-check: " << e.what() << "\n" << kUsage;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "braze-gpu-check: error: " << first_line(e) << "\n";
    return 1;
  }
}
