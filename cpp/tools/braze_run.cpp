// braze-run: run a braze artifact on .npy inputs, write one .npy per output.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>

#include "braze/runtime.hpp"
#include "npy.hpp"

namespace fs = std::filesystem;

namespace {

const char kUsage[] =
    "usage: braze-run ARTIFACT --input NAME=FILE.npy [--input ...] --output-dir DIR "
    "[--repeat N] [--threads N] [--spin off|short|long|N] [--idle-cpu]";

const char kHelp[] =
    "\n\nRuns a model compiled by `braze compile` (an ARTIFACT folder) on .npy inputs and\n"
    "writes one NAME.npy per output into DIR.\n\n"
    "  --input NAME=FILE.npy  one per model input\n"
    "  --output-dir DIR       created if missing\n"
    "  --repeat N             time N runs after a warm-up and print the median latency\n"
    "  --threads N            TVM thread pool size (default: the artifact's, else every core)\n"
    "  --spin S               how long idle pool threads spin after each kernel: short (default;\n"
    "                         quiet within a millisecond of a run's end), long (TVM's own: lowest\n"
    "                         latency back to back, a busy core per thread for 0.1-0.3 s after\n"
    "                         each run), off, or a number of spin iterations\n"
    "  --idle-cpu             after the runs, print the CPU time the process uses in the next\n"
    "                         0.5 s, while idle (what the spin setting costs)\n"
    "  --version              print braze's and TVM's versions\n";

struct UsageError : braze::Error {
  using braze::Error::Error;
};

struct Options {
  std::string artifact, output_dir;
  std::vector<std::pair<std::string, std::string>> inputs;  // name, file
  int repeat = 0, threads = 0;
  int spin = -1;  // -1: the default (braze::kSpinShort, or TVM_THREAD_POOL_SPIN_COUNT)
  bool idle_cpu = false;
};

int positive(const std::string& flag, const std::string& text) {
  size_t used = 0;
  long n = -1;
  try {
    n = std::stol(text, &used);
  } catch (const std::exception&) {
  }
  if (used != text.size() || n < 1 || n > 1000000)
    throw UsageError(flag + " takes a whole number >= 1, not '" + text + "'");
  return static_cast<int>(n);
}

Options parse_args(const std::vector<std::string>& args) {
  Options o;
  std::set<std::string> seen;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i], value;
    bool has_value = false;
    if (flag.rfind("--", 0) == 0 && flag.find('=') != std::string::npos) {  // --flag=value
      value = flag.substr(flag.find('=') + 1);
      flag = flag.substr(0, flag.find('='));
      has_value = true;
    }
    auto take = [&]() -> std::string {
      if (has_value) return value;
      if (i + 1 >= args.size()) throw UsageError(flag + " needs a value");
      return args[++i];
    };
    if (flag == "--input") {
      std::string spec = take();
      size_t eq = spec.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
        throw UsageError("--input takes NAME=FILE.npy, not '" + spec + "'");
      std::string name = spec.substr(0, eq);
      if (!seen.insert(name).second) throw UsageError("input '" + name + "' is given twice");
      o.inputs.emplace_back(name, spec.substr(eq + 1));
    } else if (flag == "--output-dir") {
      o.output_dir = take();
    } else if (flag == "--repeat") {
      o.repeat = positive(flag, take());
    } else if (flag == "--threads") {
      o.threads = positive(flag, take());
    } else if (flag == "--idle-cpu") {
      o.idle_cpu = true;
    } else if (flag == "--spin") {
      std::string text = take();
      try {
        o.spin = braze::parse_spin(text);
      } catch (const braze::Error& e) {
        throw UsageError(std::string("--spin: ") + e.what());
      }
    } else if (flag.size() > 1 && flag[0] == '-') {
      throw UsageError("unknown option " + flag);
    } else if (o.artifact.empty()) {
      o.artifact = flag;
    } else {
      throw UsageError("unexpected argument '" + flag + "' (one ARTIFACT only)");
    }
  }
  if (o.artifact.empty()) throw UsageError("no ARTIFACT given");
  if (o.output_dir.empty()) throw UsageError("--output-dir DIR is required");
  return o;
}

// Output names come from ONNX and can hold '/', ':' or worse: keep [A-Za-z0-9._-],
// never start with '.', and keep names distinct on case-insensitive file systems.
std::string file_name(const std::string& output, std::set<std::string>* taken) {
  std::string base;
  for (char c : output) {
    bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
    base += keep ? c : '_';
  }
  if (base.empty() || base[0] == '.') base = "_" + base;
  base = base.substr(0, 200);
  std::string name = base;
  for (int k = 2;; ++k) {
    std::string key = name;
    std::transform(key.begin(), key.end(), key.begin(), [](unsigned char c) { return std::tolower(c); });
    if (taken->insert(key).second) return name + ".npy";
    name = base + "_" + std::to_string(k);
  }
}

std::string describe(const braze::Tensor& t) {
  std::string s = t.dtype + "[";
  for (size_t i = 0; i < t.shape.size(); ++i) s += (i ? ", " : "") + std::to_string(t.shape[i]);
  return s + "]";
}

// Names must match the model's before any file is read, all problems in one line.
void check_names(const braze::Model& model, const Options& o) {
  std::vector<std::string> names, missing, unknown;
  for (const braze::TensorInfo& info : model.inputs()) names.push_back(info.name);
  for (const auto& [name, file] : o.inputs)
    if (std::find(names.begin(), names.end(), name) == names.end()) unknown.push_back(name);
  for (const std::string& name : names)
    if (std::none_of(o.inputs.begin(), o.inputs.end(), [&](const auto& in) { return in.first == name; }))
      missing.push_back(name);
  if (missing.empty() && unknown.empty()) return;
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  };
  std::string msg;
  if (!missing.empty()) msg += "missing input(s) " + join(missing) + " (--input NAME=FILE.npy)";
  if (!unknown.empty()) msg += (msg.empty() ? "" : "; ") + std::string("unknown input(s) ") + join(unknown);
  throw braze::InputError(msg + "; the model takes: " + join(names));
}

double median_ms(braze::Model& model, int repeat) {
  std::vector<double> ms;
  for (int i = 0; i < repeat; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    model.run();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return repeat % 2 ? ms[repeat / 2] : (ms[repeat / 2 - 1] + ms[repeat / 2]) / 2;
}

// CPU time of every thread of this process so far.
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

int run(const Options& o) {
  if (o.spin >= 0) braze::set_spin(o.spin);
  braze::Model model = braze::Model::load(o.artifact);
  if (o.threads) braze::set_threads(o.threads);
  check_names(model, o);
  for (const auto& [name, file] : o.inputs) model.set_input(name, braze::npy::read(file));

  model.run();  // also the warm-up for --repeat
  std::error_code ec;
  fs::create_directories(o.output_dir, ec);
  if (ec) throw braze::Error(o.output_dir + ": cannot create the output folder (" + ec.message() + ")");
  std::set<std::string> taken;
  for (size_t i = 0; i < model.outputs().size(); ++i) {
    braze::Tensor t = model.output(i);
    std::string path = (fs::path(o.output_dir) / file_name(model.outputs()[i].name, &taken)).string();
    braze::npy::write(path, t);
    std::cout << model.outputs()[i].name << ": " << describe(t) << " -> " << path << "\n";
  }
  if (o.repeat) {
    double ms = median_ms(model, o.repeat);
    std::printf("latency: median %.3f ms over %d runs (threads: %d, spin: %d)\n", ms, o.repeat, braze::threads(),
                braze::spin());
  }
  if (o.idle_cpu) {
    double before = cpu_seconds();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    std::printf("idle: %.4f s of CPU in the 0.5 s after the last run (spin: %d)\n", cpu_seconds() - before,
                braze::spin());
  }
  return 0;
}

// One line on stderr, whatever the message holds.
int fail(const std::string& message, int status) {
  std::string line = message;
  std::replace(line.begin(), line.end(), '\n', ' ');
  std::cerr << "braze-run: error: " << line << "\n";
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (std::find(args.begin(), args.end(), "--help") != args.end() ||
      std::find(args.begin(), args.end(), "-h") != args.end()) {
    std::cout << kUsage << kHelp;
    return 0;
  }
  if (args.size() == 1 && args[0] == "--version") {
    std::cout << "braze-run " << braze::version() << " (TVM " << braze::tvm_version() << ")\n";
    return 0;
  }
  try {
    return run(parse_args(args));
  } catch (const UsageError& e) {
    return fail(std::string(e.what()) + " (see braze-run --help)", 2);
  } catch (const std::exception& e) {
    return fail(e.what(), 1);
  } catch (...) {
    return fail("unexpected error", 1);
  }
}
