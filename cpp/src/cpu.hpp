// The CPU this process runs on, in the terms of a manifest's "requires":
// its architecture and ISA features by LLVM's names (braze/targets/isa.py).
#pragma once

#include <string>

namespace braze {

// "x86_64", "aarch64", or "unknown".
const char* host_arch();

// Whether this CPU, and the OS, let code use FEATURE ("avx2", "avx512f",
// "neon"); false for a name braze does not know.
bool host_has(const std::string& feature);

// The widest built-in portable CPU target this machine runs ("cpu-avx512",
// "cpu-avx2", "cpu-neon"), or "" if none.
std::string portable_target();

}  // namespace braze
