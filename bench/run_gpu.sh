#!/usr/bin/env bash
# GPU checks and benchmarks on a GPU machine with torch, triton, cmake and ninja, and onnxruntime-gpu on
# PYTHONPATH. Builds the ONNX Runtime library with CUDA kernels for sm_90, then runs the stages named
# (default: all) and packs logs and results into OUT/gpu_results.tar.gz.
#   GRAPHOPT_ORT_INCLUDE_DIR=<onnxruntime headers> bash bench/run_gpu.sh OUT [tests] [ort] [seed] [sweep] [real] [widths]
set -uo pipefail
out=$(realpath -m "${1:?usage: run_gpu.sh OUT [stages]}"); shift
stages=${*:-tests ort seed sweep}
results=$out/results
mkdir -p "$results"
export PYTHONUNBUFFERED=1
# A source checkout has no installed graphopt.passes; point it at passes/ as the package build does.
[ -e graphopt/passes ] || ln -sfn ../passes graphopt/passes
export PYTHONPATH=$PWD:${PYTHONPATH:-}
library=/tmp/graphopt-ort/libgraphopt_ort.so
if [ ! -f "$library" ]; then
  cmake -S graphopt/ort -B /tmp/graphopt-ort -G Ninja -DGRAPHOPT_ORT_INCLUDE_DIR="${GRAPHOPT_ORT_INCLUDE_DIR:?}" \
    -DPython_EXECUTABLE="$(command -v python3)" -DGRAPHOPT_CUDA_ARCHS=90 > "$results/build.log" 2>&1 \
    && cmake --build /tmp/graphopt-ort >> "$results/build.log" 2>&1 || { tail -40 "$results/build.log"; exit 1; }
fi
export GRAPHOPT_ORT_LIBRARY=$library

stage() {
  local name=$1; shift
  echo "== $name ($(date +%T))"
  "$@" > "$results/$name.log" 2>&1
  echo "rc=$? ($(date +%T))"
  tail -"${TAIL:-25}" "$results/$name.log"
}
for s in $stages; do
  case $s in
    # Every kernel, fused-op, ONNX Runtime and torch-state test (those that need a GPU run here only),
    # and the models whose tests compare runtimes on the GPU.
    tests) TAIL=8 stage tests python3 -m pytest -q -p no:cacheprovider --maxfail=30 tests/kernels tests/fused \
             tests/ort tests/torch_state tests/models/test_diffusion_blocks.py tests/models/test_embedding_models.py \
             tests/passes/test_batch_embedding_lookups_runtimes.py ;;
    parity) stage parity python3 bench/bench_torch_parity.py --out "$results" ${PARITY_ARGS:-} ;;
    eager) stage eager python3 bench/bench_eager_op_cost.py --out "$results" ;;
    kernels) stage kernels python3 bench/bench_kernels.py --no-compile --out "$results" ;;
    affine) stage affine python3 bench/bench_affine_act.py --out "$results" ;;
    cnn) stage cnn python3 bench/bench_cnn_batch_norm.py --out "$results" --device cuda --size 224 ;;
    ort) stage ort python3 bench/bench_ort_cuda.py --out "$results" ;;
    seed) stage seed python3 -m graphopt.benchmark models/split_stack.pt2 --out "$results" ;;
    sweep) stage sweep python3 bench/bench_seed_sweep.py --out "$results" ;;
    # Real architectures end to end; REAL_ARGS picks a share of them (e.g. "--models gpt2,bert --dtypes fp32").
    embeddings) stage embeddings python3 bench/bench_embeddings.py --out "$results" ${EMBED_ARGS:-} ;;
    real) stage real python3 bench/bench_real_models.py --out "$results/real" ${REAL_ARGS:-} ;;
    # GroupNormAct: its GPU tests, then the kernel against a copy and diffusion-style models end to end.
    groupnorm_tests) TAIL=8 stage groupnorm_tests python3 -m pytest -q -p no:cacheprovider -x \
             tests/ort/test_ort_cuda_group_norm_act.py tests/fused/group_norm_act tests/models/test_diffusion_blocks.py \
             tests/kernels/test_cuda_launch.py tests/fused/test_torch_launch_plans.py ;;
    # GroupNormAct's split path: whole kernel against split block shapes over run counts and lengths.
    groupnorm_split) stage groupnorm_split python3 bench/bench_group_norm_split.py --out "$results" \
             ${GROUPNORM_SPLIT_ARGS:-} ;;
    # NormAct with per-feature scale/bias and broadcast residuals against a copy; the per-feature model.
    broadcast) stage broadcast python3 bench/bench_norm_act_broadcast.py --out "$results" ;;
    per_feature) stage per_feature python3 bench/bench_per_feature.py --out "$results" ;;
    # NormActLinear with a residual and with per-slice operands against a copy of the same bytes.
    linear_forms) stage linear_forms python3 bench/bench_norm_act_linear_forms.py --out "$results" ;;
    # NormAct and NormActLinear (and residual forms) across widths, dtypes, affine and activations, torch and
    # ORT, against a copy of the same bytes; WIDTHS_ARGS picks a share (the whole grid takes hours).
    widths) stage widths python3 bench/bench_widths.py --out "$results" ${WIDTHS_ARGS:-} ;;
    groupnorm) stage groupnorm python3 bench/bench_group_norm.py --out "$results" ${GROUPNORM_ARGS:-} ;;
  esac
done
tar -czf "$out/gpu_results.tar.gz" -C "$out" results
