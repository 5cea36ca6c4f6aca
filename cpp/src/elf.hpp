// A look at lib.so before dlopen: a truncated shared library makes the loader
// die with SIGBUS instead of failing, so what can be checked cheaply is checked.
#pragma once

#include <string>

namespace braze {

// Throws ArtifactError if PATH is not a whole ELF shared library for this
// machine's architecture (no-op where ELF is not the format).
void check_shared_library(const std::string& path);

}  // namespace braze
