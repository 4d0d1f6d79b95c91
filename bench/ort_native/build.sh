#!/usr/bin/env bash
# Builds ort_run_timer against the onnxruntime Python package's own shared library (CPU or GPU wheel)
# and the ONNX Runtime headers the package build uses.
#   bash bench/ort_native/build.sh OUT_DIR [HEADER_DIR]
set -euo pipefail
out=${1:?usage: build.sh OUT_DIR [HEADER_DIR]}
here=$(cd "$(dirname "$0")" && pwd)
include=${2:-${GRAPHOPT_ORT_INCLUDE_DIR:-$(sh "$here/../../graphopt/ort/fetch_ort_headers.sh")}}
# Like the library's CMake build, take the headers' directory or a parent holding onnxruntime/.
[ -f "$include/onnxruntime_c_api.h" ] || [ ! -f "$include/onnxruntime/onnxruntime_c_api.h" ] || include=$include/onnxruntime
capi=$(python3 -c "import onnxruntime, pathlib; print(pathlib.Path(onnxruntime.__file__).parent / 'capi')")
library=$(ls "$capi"/libonnxruntime.so.* | head -n 1)
mkdir -p "$out"
# The wheel's library is named with its full version; the program asks for its soname next to itself,
# and ONNX Runtime loads its execution providers from the directory it was loaded from.
ln -sfn "$library" "$out/libonnxruntime.so.1"
for provider in "$capi"/libonnxruntime_providers_*.so; do ln -sfn "$provider" "$out/"; done
g++ -O2 -std=c++17 "$here/ort_run_timer.cc" -I"$include" "$library" -ldl -Wl,-rpath,'$ORIGIN' \
  -o "$out/ort_run_timer"
echo "$out/ort_run_timer"
