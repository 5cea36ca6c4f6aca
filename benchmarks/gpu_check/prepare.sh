#!/usr/bin/env bash
# Prepare the GPU check on a machine without a GPU (docs/targets.md, "Running on a GPU"):
# CUDA artifacts of the shipped tiny models (and mobilenetv2, yolov8n when the model
# cache has them) at levels 2 and 3, their inputs and CPU references, braze-run and
# braze-gpu-check, and the TVM/CUDA runtime libraries, in one folder under 64 MiB
# that run.sh (copied into it) runs from alone.
#
#   benchmarks/gpu_check/prepare.sh [--out DIR] [--models DIR] [--levels 2,3]
#                                   [--target cuda-sm90] [--only NAME,...]
#
#   --out DIR      the folder (default: build/gpu_check, ignored by git; emptied first)
#   --models DIR   the model cache (default: $BRAZE_MODELS, else ~/.cache/braze-models)
#   --only NAMES   just these models (bert-tiny, cnn-dynamic, mobilenetv2-tiny, vit-tiny, ...)
#
# Needs: the Python with braze's dependencies ($PYTHON, default python3), nvcc, cmake and
# a C++17 compiler. braze-run's build goes to build/gpu_check-build (kept between runs).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OUT=$ROOT/build/gpu_check
MODELS=${BRAZE_MODELS:-$HOME/.cache/braze-models}
LEVELS=2,3
TARGET=cuda-sm90
ONLY=
PYTHON=${PYTHON:-python3}
BUILD=${BRAZE_GPU_CHECK_BUILD:-$ROOT/build/gpu_check-build}
LIMIT=$((64 << 20))

die() { echo "prepare: $*" >&2; exit 1; }
while (($#)); do
  case $1 in
    --out) OUT=$2; shift 2 ;;
    --models) MODELS=$2; shift 2 ;;
    --levels) LEVELS=$2; shift 2 ;;
    --target) TARGET=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"

# --- the libraries: TVM's runtime, its FFI, its CUDA runtime, and CUDA's libcudart -------
site() { "$PYTHON" -c "import importlib.util as u; print(u.find_spec('$1').submodule_search_locations[0])"; }
TVM_LIB=$(site tvm)/lib
FFI_LIB=$(site tvm_ffi)/lib
for f in "$TVM_LIB/libtvm_runtime.so" "$TVM_LIB/libtvm_runtime_cuda.so" "$FFI_LIB/libtvm_ffi.so"; do
  [[ -f $f ]] || die "$f is missing (is apache-tvm installed for $PYTHON?)"
done
CUDART=$(ldd "$TVM_LIB/libtvm_runtime_cuda.so" | awk '/libcudart/ {print $3}')
[[ -n $CUDART && -f $CUDART ]] || die "libcudart (needed by TVM's CUDA runtime) not found: install the CUDA toolkit"

# --- braze-run and braze-gpu-check -------------------------------------------------------
echo "prepare: building braze-run and braze-gpu-check in $BUILD"
cmake -S "$HERE" -B "$BUILD" -DPython_EXECUTABLE="$(command -v "$PYTHON")" -DCMAKE_BUILD_TYPE=Release >"$BUILD.log" 2>&1 \
  || die "cmake configure failed (see $BUILD.log)"
cmake --build "$BUILD" --parallel "${BRAZE_JOBS:-2}" --target braze-run braze-gpu-check >>"$BUILD.log" 2>&1 \
  || die "the build failed (see $BUILD.log)"

# --- the folder ----------------------------------------------------------------------------
find "$OUT" -mindepth 1 -delete
mkdir -p "$OUT/bin" "$OUT/lib/compat" "$OUT/cases"
cp "$BUILD/braze/braze-run" "$BUILD/braze-gpu-check" "$OUT/bin/"
strip "$OUT/bin/"* 2>/dev/null || true
cp "$TVM_LIB/libtvm_runtime.so" "$TVM_LIB/libtvm_runtime_cuda.so" "$FFI_LIB/libtvm_ffi.so" "$OUT/lib/"
cp -L "$CUDART" "$OUT/lib/$(basename "$CUDART")"
# This machine's C++ library, for a GPU machine whose own is older (run.sh uses it only then).
for so in libstdc++.so.6 libgcc_s.so.1; do
  found=$(ldd "$OUT/bin/braze-run" | awk -v so="$so" '$1 == so {print $3}')
  [[ -n $found ]] && cp -L "$found" "$OUT/lib/compat/"
done
cp "$HERE/run.sh" "$OUT/run.sh" && chmod +x "$OUT/run.sh"

# --- the cases and the manifest --------------------------------------------------------------
rm -rf "$BUILD/selfcheck"
"$PYTHON" "$HERE/prepare.py" --out "$OUT" --models "$MODELS" --levels "$LEVELS" --target "$TARGET" \
  --cudart "$(basename "$(readlink -f "$CUDART")")" --selfcheck "$BUILD/selfcheck" ${ONLY:+--only "$ONLY"}

# --- a self-check of the folder's own binaries and libraries (no GPU needed) ----------------
# The smallest case's model built for this CPU, run by the folder's braze-gpu-check on the
# folder's libraries alone: the inputs, references and comparison agree end to end.
env -u LD_LIBRARY_PATH "$OUT/bin/braze-run" --version >/dev/null || die "$OUT/bin/braze-run does not start"
if [[ -d $BUILD/selfcheck ]]; then
  line=$(env -u LD_LIBRARY_PATH "$OUT/bin/braze-gpu-check" run "$BUILD/selfcheck" --repeat 5) \
    || die "self-check on the CPU failed: $line"
  rel=$(sed -nE 's/^[{]"case": "[^"]*", "device": "cpu", "max_rel": ([^,]+),.*/\1/p' <<<"$line")
  awk -v r="$rel" 'BEGIN { exit !(r != "" && r != "null" && r + 0 <= 1e-3) }' \
    || die "self-check on the CPU: max rel err $rel against the references ($line)"
  echo "prepare: self-check on the CPU (the smallest case's model built for this CPU): max rel err $rel"
fi
BYTES=$(du -sb "$OUT" | cut -f1)
((BYTES < LIMIT)) || die "$OUT holds $((BYTES >> 20)) MiB, more than the 64 MiB a device run can carry"
echo "prepare: $OUT ready, $((BYTES >> 20)) MiB ($BYTES bytes); on the GPU machine: bash ${OUT#"$ROOT"/}/run.sh"
