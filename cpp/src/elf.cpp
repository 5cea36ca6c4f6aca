#include "elf.hpp"

#include "braze/runtime.hpp"

#if defined(__linux__)
#include <elf.h>

#include <cstring>
#include <fstream>
#include <vector>

namespace braze {
namespace {

#if defined(__x86_64__)
constexpr int kMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr int kMachine = EM_AARCH64;
#else
constexpr int kMachine = -1;  // not checked
#endif

const char* machine_name(int m) {
  switch (m) {
    case EM_X86_64: return "x86_64";
    case EM_AARCH64: return "aarch64";
    case EM_RISCV: return "riscv";
    case EM_ARM: return "arm";
    default: return "another architecture";
  }
}

}  // namespace

void check_shared_library(const std::string& path) {
  auto corrupt = [&](const std::string& why) {
    return ArtifactError(path + ": the compiled library is corrupt and cannot be loaded (" + why +
                         "); rebuild it with `braze compile`");
  };
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file) throw corrupt("cannot open it");
  const uint64_t size = static_cast<uint64_t>(file.tellg());
  Elf64_Ehdr eh{};
  file.seekg(0);
  if (!file.read(reinterpret_cast<char*>(&eh), sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0)
    throw corrupt("not an ELF file");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_type != ET_DYN)
    throw corrupt("not a 64-bit little-endian shared library");
  if (kMachine >= 0 && eh.e_machine != kMachine)
    throw ArtifactError(path + ": built for " + machine_name(eh.e_machine) + ", this machine is " +
                        machine_name(kMachine) + "; rebuild it with `braze compile` for this machine");

  // Everything the loader maps, and the section table that ends the file, must be in it.
  auto fits = [&](uint64_t offset, uint64_t bytes) { return offset <= size && bytes <= size - offset; };
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || !fits(eh.e_phoff, uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr)) ||
      !fits(eh.e_shoff, uint64_t{eh.e_shnum} * eh.e_shentsize))
    throw corrupt("truncated or damaged: its headers run past the end of the file");
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  file.seekg(static_cast<std::streamoff>(eh.e_phoff));
  file.read(reinterpret_cast<char*>(ph.data()), static_cast<std::streamsize>(ph.size() * sizeof(Elf64_Phdr)));
  for (const Elf64_Phdr& p : ph)
    if ((p.p_type == PT_LOAD || p.p_type == PT_DYNAMIC) && !fits(p.p_offset, p.p_filesz))
      throw corrupt("truncated or damaged: " + std::to_string(size) + " bytes, its segments need " +
                    std::to_string(p.p_offset + p.p_filesz));
}

}  // namespace braze

#else

namespace braze {
void check_shared_library(const std::string&) {}
}  // namespace braze

#endif
