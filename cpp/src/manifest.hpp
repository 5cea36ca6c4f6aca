// manifest.json: read and checked before any TVM code runs.
#pragma once

#include <string>
#include <vector>

#include "braze/runtime.hpp"

namespace braze {

constexpr int kFormat = 1;  // braze/runtime/artifact.py FORMAT

struct Manifest {
  std::string braze_version, tvm_version, model;
  std::string target_name, target_kind, target_mcpu;
  int threads = 0;  // 0: not set
  std::vector<TensorInfo> inputs, outputs;
};

// Reads DIR/manifest.json and checks the format, the TVM version (must be
// tvm_version()) and the target kind (llvm); throws ArtifactError naming DIR.
Manifest read_manifest(const std::string& dir);

}  // namespace braze
