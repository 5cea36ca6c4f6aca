// .npy files (numpy's format 1.0 and 2.0): little-endian numbers and bools, C order.
#pragma once

#include <string>

#include "braze/runtime.hpp"

namespace braze::npy {

// Reads PATH; a Fortran-ordered, big-endian, structured or unknown-dtype array,
// or a damaged file, is an Error naming PATH.
Tensor read(const std::string& path);

// Writes PATH in format 1.0, the data aligned to 64 bytes as np.save aligns it.
void write(const std::string& path, const Tensor& tensor);

}  // namespace braze::npy
