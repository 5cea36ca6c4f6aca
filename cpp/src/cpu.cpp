#include "cpu.hpp"

#include <initializer_list>

#if defined(__x86_64__)
#include <cpuid.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace braze {

const char* host_arch() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "unknown";
#endif
}

#if defined(__x86_64__)
namespace {

// Where CPUID reports a feature, and which register state the OS must save for
// it (XCR0): code using ymm/zmm registers on an OS that does not save them
// faults like code on a CPU without them.
enum Reg { kEax, kEbx, kEcx, kEdx };
enum State { kNone, kYmm, kZmm, kTile };
struct CpuidBit {
  const char* name;
  unsigned leaf, subleaf;
  Reg reg;
  int bit;
  State state;
};
const CpuidBit kX86[] = {
    {"sse4.2", 1, 0, kEcx, 20, kNone},       {"popcnt", 1, 0, kEcx, 23, kNone},
    {"avx", 1, 0, kEcx, 28, kYmm},           {"avx2", 7, 0, kEbx, 5, kYmm},
    {"fma", 1, 0, kEcx, 12, kYmm},           {"f16c", 1, 0, kEcx, 29, kYmm},
    {"bmi", 7, 0, kEbx, 3, kNone},           {"bmi2", 7, 0, kEbx, 8, kNone},
    {"lzcnt", 0x80000001, 0, kEcx, 5, kNone}, {"movbe", 1, 0, kEcx, 22, kNone},
    {"avx512f", 7, 0, kEbx, 16, kZmm},       {"avx512bw", 7, 0, kEbx, 30, kZmm},
    {"avx512cd", 7, 0, kEbx, 28, kZmm},      {"avx512dq", 7, 0, kEbx, 17, kZmm},
    {"avx512vl", 7, 0, kEbx, 31, kZmm},      {"avx512vnni", 7, 0, kEcx, 11, kZmm},
    {"avx512bf16", 7, 1, kEax, 5, kZmm},     {"avx512fp16", 7, 0, kEdx, 23, kZmm},
    {"avx512vbmi", 7, 0, kEcx, 1, kZmm},     {"avxvnni", 7, 1, kEax, 4, kYmm},
    {"amx-tile", 7, 0, kEdx, 24, kTile},     {"amx-bf16", 7, 0, kEdx, 22, kTile},
    {"amx-int8", 7, 0, kEdx, 25, kTile},
};

// AMX's tile data: Linux hands it to a process only when asked
// (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)); without it the first
// tile instruction is an illegal instruction. Asked once; whether granted.
bool tile_state_granted() {
#if defined(__linux__)
  static const bool granted = syscall(SYS_arch_prctl, 0x1023, 18) == 0;
  return granted;
#else
  return false;
#endif
}

bool os_saves(State state) {
  if (state == kNone) return true;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return false;  // OSXSAVE: XGETBV works
  unsigned lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  // SSE+AVX state; and opmask, upper zmm; and tile config + tile data
  const unsigned need = state == kYmm ? 0x06 : state == kZmm ? 0xE6 : 0x60000;
  return (lo & need) == need && (state != kTile || tile_state_granted());
}

}  // namespace
#endif

// The features of braze/targets/isa.py's FEATURES (tests/test_named_targets.py
// keeps the two lists the same).
bool host_has(const std::string& feature) {
#if defined(__x86_64__)
  for (const CpuidBit& f : kX86) {
    if (feature != f.name) continue;
    unsigned r[4];
    if (!__get_cpuid_count(f.leaf, f.subleaf, &r[kEax], &r[kEbx], &r[kEcx], &r[kEdx])) return false;
    return (r[f.reg] >> f.bit & 1) && os_saves(f.state);
  }
#elif defined(__aarch64__) && defined(__linux__)
  struct Bit {
    const char* name;
    unsigned long type, mask;
  };
  static const Bit kBits[] = {
      {"neon", AT_HWCAP, HWCAP_ASIMD}, {"fullfp16", AT_HWCAP, HWCAP_ASIMDHP}, {"dotprod", AT_HWCAP, HWCAP_ASIMDDP},
      {"sve", AT_HWCAP, HWCAP_SVE},
#ifdef HWCAP2_I8MM
      {"i8mm", AT_HWCAP2, HWCAP2_I8MM}, {"bf16", AT_HWCAP2, HWCAP2_BF16}, {"sve2", AT_HWCAP2, HWCAP2_SVE2},
#endif
  };
  for (const Bit& b : kBits)
    if (feature == b.name) return (getauxval(b.type) & b.mask) != 0;
#endif
  (void)feature;
  return false;
}

std::string portable_target() {
  // What braze/targets/cpu-*.json require (`braze targets --show NAME`), widest first.
  struct Portable {
    const char* name;
    std::initializer_list<const char*> features;
  };
  static const Portable kTargets[] = {
      {"cpu-avx512", {"sse4.2", "popcnt", "avx", "avx2", "fma", "f16c", "bmi", "bmi2", "lzcnt", "movbe", "avx512f",
                      "avx512bw", "avx512cd", "avx512dq", "avx512vl"}},
      {"cpu-avx2", {"sse4.2", "popcnt", "avx", "avx2", "fma", "f16c", "bmi", "bmi2", "lzcnt", "movbe"}},
      {"cpu-neon", {"neon"}},
  };
  for (const Portable& t : kTargets) {
    bool all = true;
    for (const char* f : t.features) all = all && host_has(f);
    if (all) return t.name;
  }
  return "";
}

}  // namespace braze
