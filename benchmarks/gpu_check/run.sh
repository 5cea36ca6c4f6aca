#!/usr/bin/env bash
# The GPU check, run on the GPU machine from the folder prepare.sh wrote (it is copied
# there as run.sh): needs bash, awk, sed and the folder; no Python, pip or network.
# docs/targets.md, "Running on a GPU".
#
#   bash build/gpu_check/run.sh [--out DIR] [--repeat N] [--max-seconds S] [--rtol R]
#
#   --out DIR          where gpu-check-TARGET.json goes (default: results/ in the folder)
#   --repeat N         timed runs per case and way, after 3 warm-up runs (default 100)
#   --max-seconds S    time cap per case for its timed runs (default 8; 10 runs at least)
#   --rtol R           the largest max rel err that passes (default 1e-3, float32)
#
# Checks the driver and GPU first: without one it stops at once, exit 3,
# "no CUDA device". Then each case: run, compare with the CPU reference, time.
# Exit 0 when every case matches, 1 when one fails or does not match.
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OUT=$HERE/results
REPEAT=100
MAX_SECONDS=8
RTOL=1e-3
BUDGET=270  # seconds: the whole check within 5 minutes, start-up included

die() { echo "run.sh: $1" >&2; exit "${2:-1}"; }
while (($#)); do
  case $1 in
    --out) OUT=$2; shift 2 ;;
    --repeat) REPEAT=$2; shift 2 ;;
    --max-seconds) MAX_SECONDS=$2; shift 2 ;;
    --rtol) RTOL=$2; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument $1 (see --help)" 2 ;;
  esac
done
CHECK=$HERE/bin/braze-gpu-check
[[ -x $CHECK && -f $HERE/manifest.json && -d $HERE/cases ]] \
  || die "$HERE is not a folder written by benchmarks/gpu_check/prepare.sh (bin/, cases/, manifest.json)" 2
export LD_LIBRARY_PATH="$HERE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# A value of the folder's manifest.json: "key": "value" (the first one).
field() { sed -nE "s/^ *\"$1\": \"?([^\",]*)\"?,?$/\1/p" "$HERE/manifest.json" | head -n 1; }
json_string() { local s=${1//\\/\\\\}; s=${s//\"/\\\"}; printf '"%s"' "${s//$'\n'/ }"; }

# --- the driver and the device -------------------------------------------------------------
SMI_GPU= SMI_DRIVER= SMI_CUDA=
if command -v nvidia-smi >/dev/null 2>&1; then
  SMI_GPU=$(timeout 20 nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
  SMI_CUDA=$(timeout 20 nvidia-smi 2>/dev/null | sed -nE 's/.*CUDA Version: *([0-9.]+).*/\1/p' | head -n 1)
  SMI_DRIVER=${SMI_GPU##*, }
  SMI_GPU=${SMI_GPU%, *}
fi
# Binaries built against a newer C++ library than this machine's: use the folder's copy.
if ! "$HERE/bin/braze-run" --version >/dev/null 2>&1; then
  export LD_LIBRARY_PATH="$HERE/lib:$HERE/lib/compat${LD_LIBRARY_PATH#"$HERE/lib"}"
  "$HERE/bin/braze-run" --version >/dev/null 2>&1 \
    || die "the folder's binaries do not start here: $("$HERE/bin/braze-run" --version 2>&1 | head -n 1)"
fi
if ! DEVICE=$("$CHECK" device 2>"$HERE/.device.err"); then
  why=$(sed 's/^no CUDA device: //' "$HERE/.device.err"); rm -f "$HERE/.device.err"
  die "no CUDA device: ${why:-the driver found none}${SMI_GPU:+ (nvidia-smi lists $SMI_GPU)}" 3
fi
rm -f "$HERE/.device.err"
dev() { sed -nE "s/.*\"$1\": \"?([^\",}]*)\"?[,}].*/\1/p" <<<"$DEVICE"; }
GPU=$(dev name) CC=$(dev compute_capability) DRIVER_CUDA=$(dev driver_cuda_version)
CUDART=$(field cudart) TARGET=$(field target)
echo "GPU: $GPU (compute $CC, $(dev sm_count) SMs), driver ${SMI_DRIVER:-?} (CUDA $DRIVER_CUDA), runtime CUDA $CUDART"
# CUDA's runtime needs a driver of its major version or newer.
if [[ -n $CUDART ]] && awk -v d="$DRIVER_CUDA" -v r="$CUDART" 'BEGIN { exit !(int(d) < int(r)) }'; then
  die "the driver supports CUDA $DRIVER_CUDA, the folder's runtime is CUDA $CUDART: it needs a newer driver" 4
fi
WANT=$(sed -nE 's/^cuda-sm([0-9])([0-9]).*/\1.\2/p' <<<"$TARGET")
if [[ -n $WANT && ${WANT%.*} != "${CC%.*}" ]]; then
  die "the cases are built for $TARGET (compute $WANT), this GPU is compute $CC: prepare again with --target" 4
fi

# --- each case: run, compare, time ----------------------------------------------------------
mkdir -p "$OUT"
ROWS=$OUT/gpu-check.rows.jsonl
: >"$ROWS"
failed=0
for dir in "$HERE"/cases/*/; do
  dir=${dir%/}
  name=$(basename "$dir")
  if ((SECONDS > BUDGET)); then
    echo "{\"case\": \"$name\", \"error\": \"skipped: the 5-minute budget ran out\"}" >>"$ROWS"
    failed=1; continue
  fi
  if line=$(timeout 120 "$CHECK" run "$dir" --repeat "$REPEAT" --max-seconds "$MAX_SECONDS" 2>"$OUT/.err"); then
    echo "$line" >>"$ROWS"
  else
    echo "{\"case\": \"$name\", \"error\": $(json_string "$(tail -n 3 "$OUT/.err")")}" >>"$ROWS"
    failed=1
  fi
done
rm -f "$OUT/.err"

# --- the result file and the table ------------------------------------------------------------
# Rows per model: level 2 and level 3 side by side, ratio level3/level2 of the medians
# (its range: the quartiles' extremes, q1(l3)/q3(l2) .. q3(l3)/q1(l2)).
RESULT=$OUT/gpu-check-$TARGET.json  # NAME.json, NAME the benchmark (benchmarks/report.py)
rows=$(awk -v rtol="$RTOL" '
  function get(s, key,   m) { return match(s, "\"" key "\": [^,}]+") ? substr(s, RSTART + length(key) + 4, RLENGTH - length(key) - 4) : "" }
  function model(s) { sub(/^.*"model": [{]/, "", s); return s }
  {
    c = get($0, "case"); gsub(/"/, "", c); name = c; sub(/-l[0-9]+$/, "", name); lv = c; sub(/^.*-l/, "", lv)
    if (!(name in seen)) { seen[name] = 1; order[++n] = name }
    line[name, lv] = $0; levels[name] = levels[name] " " lv
    if (index($0, "\"error\"")) { ok[name, lv] = "false"; next }
    rel = get($0, "max_rel"); m = model($0)
    ok[name, lv] = (rel != "null" && rel + 0 <= rtol) ? "true" : "false"
    med[name, lv] = get(m, "median_ms"); q1[name, lv] = get(m, "q1_ms"); q3[name, lv] = get(m, "q3_ms")
  }
  END {
    for (i = 1; i <= n; i++) {
      k = order[i]; lv_json = ""; ms = ""; good = "true"; nl = split(levels[k], ls, " ")
      for (j = 1; j <= nl; j++) {
        l = ls[j]; lv_json = lv_json (lv_json == "" ? "" : ", ") "\"" l "\": " line[k, l]
        if (ok[k, l] != "true") good = "false"
        if ((k, l) in med) ms = ms (ms == "" ? "" : ", ") "\"braze level " l "\": " med[k, l]
      }
      ratios = ""
      if ((k, 2) in med && (k, 3) in med && med[k, 2] > 0 && q1[k, 2] > 0)
        ratios = sprintf("\"level 3 / level 2\": {\"ratio\": %.4g, \"ratio_min\": %.4g, \"ratio_max\": %.4g}",
                         med[k, 3] / med[k, 2], q1[k, 3] / q3[k, 2], q3[k, 3] / q1[k, 2])
      printf "%s  {\"name\": \"%s\", \"ok\": %s, \"ratios\": {%s}, \"control\": null, \"ms\": {%s}, \"levels\": {%s}}", \
        (i > 1 ? ",\n" : ""), k, good, ratios, ms, lv_json
    }
    print ""
  }' "$ROWS")

cpu=$(sed -nE 's/^model name[[:space:]]*: *(.*)$/\1/p' /proc/cpuinfo 2>/dev/null | head -n 1)
flags=$(grep -m 1 '^flags' /proc/cpuinfo 2>/dev/null)
isa=$(case " $flags " in *" avx512f "*) echo AVX-512 ;; *" avx2 "*) echo AVX2 ;; *) uname -m ;; esac)
{
  echo "{"
  echo " \"format\": \"braze-results/1\","
  echo " \"benchmark\": \"gpu-check-$TARGET\","
  echo " \"what\": \"CUDA artifacts of braze (levels 2 and 3) run on the GPU by braze-gpu-check: outputs against onnxruntime's on the CPU (max rel err <= $RTOL), latency level 3 against level 2\","
  echo " \"command\": $(json_string "bash run.sh --repeat $REPEAT --max-seconds $MAX_SECONDS --rtol $RTOL"),"
  echo " \"host\": {\"cpu\": $(json_string "${cpu:-unknown}"), \"isa\": \"$isa\", \"llvm_cpu\": null, \"cores\": $(nproc 2>/dev/null || echo null)},"
  echo " \"device\": {\"gpu\": $(json_string "$GPU"), \"compute_capability\": \"$CC\", \"sm_count\": $(dev sm_count), \"memory_bytes\": $(dev memory_bytes), \"driver\": $(json_string "${SMI_DRIVER:-unknown}"), \"driver_cuda\": \"$DRIVER_CUDA\", \"nvidia_smi_cuda\": $(json_string "${SMI_CUDA:-unknown}"), \"cuda_runtime\": \"$CUDART\"},"
  echo " \"target\": \"$TARGET\","
  echo " \"threads\": null,"
  echo " \"versions\": {\"braze\": \"$(field braze)\", \"tvm\": \"$(field tvm)\", \"onnxruntime\": \"$(field onnxruntime)\", \"onnx\": \"$(field onnx)\", \"nvcc\": \"$(field nvcc)\", \"cudart\": \"$CUDART\"},"
  echo " \"commit\": \"$(field commit)\","
  echo " \"date\": \"$(date -u +%F)\","
  echo " \"prepared\": \"$(field date)\","
  echo " \"method\": {\"timing\": \"braze-gpu-check: inputs resident on the GPU, 3 warm-up runs, then up to $REPEAT runs (at most ${MAX_SECONDS} s per case, 10 at least) each followed by a device sync; median and quartiles; end_to_end also copies the inputs in and the outputs out; ratio level3/level2 of the medians, its range from the quartiles\", \"control\": null, \"compare\": \"max |gpu - ref| / max(1, max |ref|) per output (braze.measure), ref: the CPU reference in the folder\"},"
  echo " \"rows\": ["
  echo "$rows"
  echo " ]"
  echo "}"
} >"$RESULT"

# --- the table --------------------------------------------------------------------------------
printf '\n%-22s %5s %10s %4s %10s %19s %10s %8s\n' model level "max rel" ok "median ms" "q1..q3 ms" "e2e ms" "l3/l2"
awk -v rtol="$RTOL" '
  function get(s, key) { return match(s, "\"" key "\": [^,}]+") ? substr(s, RSTART + length(key) + 4, RLENGTH - length(key) - 4) : "" }
  {
    c = get($0, "case"); gsub(/"/, "", c); name = c; sub(/-l[0-9]+$/, "", name); lv = c; sub(/^.*-l/, "", lv)
    if (index($0, "\"error\"")) { e = $0; sub(/^.*"error": /, "", e); printf "%-22s %5s  failed: %s\n", name, lv, substr(e, 1, 90); next }
    rel = get($0, "max_rel"); m = $0; sub(/^.*"model": [{]/, "", m); e2e = $0; sub(/^.*"end_to_end": [{]/, "", e2e)
    med = get(m, "median_ms"); if (lv == 2) base[name] = med
    ratio = (lv == 3 && base[name] > 0) ? sprintf("%.3f", med / base[name]) : ""
    printf "%-22s %5s %10.2e %4s %10.4f %9.4f..%-9.4f %10.4f %8s\n", name, lv, rel, (rel != "null" && rel + 0 <= rtol) ? "yes" : "NO",
      med, get(m, "q1_ms"), get(m, "q3_ms"), get(e2e, "median_ms"), ratio
  }' "$ROWS"
grep -q '"ok": false' "$RESULT" && failed=1
echo
echo "wrote $RESULT ($(grep -c . "$ROWS") cases in ${SECONDS} s)"
((failed == 0)) || { echo "run.sh: some cases failed or did not match (see the table)" >&2; exit 1; }
