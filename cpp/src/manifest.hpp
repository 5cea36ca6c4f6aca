// manifest.json: read and checked before any TVM code runs.
#pragma once

#include <string>
#include <vector>

#include "braze/runtime.hpp"

namespace braze {

constexpr int kFormat = 1;  // braze/runtime/artifact.py FORMAT

// One gear of an artifact compiled for several shapes (`braze compile --dynamic-batch`, ...):
// the VM function that runs it and its input and output shapes.
struct Gear {
  std::string name, function;
  std::vector<TensorInfo> inputs, outputs;
};

struct Manifest {
  std::string braze_version, tvm_version, model;
  std::string target_name, target_kind, target_mcpu;
  std::string required_arch;                   // "requires": what the CPU must be ("" in older manifests)
  std::vector<std::string> required_features;  // ... and have (LLVM's names)
  int threads = 0;                             // 0: not set
  std::vector<TensorInfo> inputs, outputs;  // the first gear's, with gears
  std::vector<Gear> gears;                   // empty: one shape, function "main"
};

// Reads DIR/manifest.json and checks the format, the TVM version (must be
// tvm_version()), the target kind (llvm) and that this CPU has the
// architecture and ISA features the code requires; throws ArtifactError naming DIR.
Manifest read_manifest(const std::string& dir);

}  // namespace braze
