#!/usr/bin/env bash
# The tensor-parallel quality run on the GPU machine (docs/model-quality.md).
# Run from the repository root there, after staging the CUDA build here
# (libquickreduce.so, qr-broker and qrctl into .device/python):
#   QR_BAZEL_OUTPUT_BASE=/root/.cache/qr-gpu python/tests/gpu/stage.sh
#   run(kind="nvidia-h200", carry=[".device"], timeout_s=600,
#       command="bash python/examples/gpu_tp_run.sh")
# With fewer GPUs than ranks (one H200 and world size 2) the ranks share a GPU
# under NVIDIA MPS (QR_ALLOW_SHARED_DEVICE=1, a testing mode). Knobs:
#   QR_TP_WORLD_SIZES  world sizes to run, default "2"
#   QR_TP_ARGS         extra tp_run.py flags (default: --preset small)
#   QR_LIBRARY, QR_BROKER_BIN   default .device/python/libquickreduce.so and qr-broker
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source tools/gpu/unpack.sh  # .device from a carried .device-pack (tools/gpu/pack.sh)
out="${OUT:-./gpu-out}"
mkdir -p "$out"

export QR_LIBRARY="${QR_LIBRARY:-$PWD/.device/python/libquickreduce.so}"
export QR_BROKER_BIN="${QR_BROKER_BIN:-$PWD/.device/python/qr-broker}"
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
export NCCL_NVLS_ENABLE=0
for f in "$QR_LIBRARY" "$QR_BROKER_BIN"; do
  [[ -e "$f" ]] || { echo "missing $f: stage the CUDA build first (see the header)"; exit 2; }
done

python3 -c 'import torch, quickreduce; print("torch", torch.__version__, "gpus",
      torch.cuda.device_count(), "quickreduce", quickreduce.version())' || exit 2
gpus=$(python3 -c 'import torch; print(torch.cuda.device_count())')

source tools/gpu/mps.sh
trap 'mps_stop "$out"' EXIT

status=0
for ws in ${QR_TP_WORLD_SIZES:-2}; do
  if (( gpus < ws )); then
    mps_start || echo "note: could not start MPS"
    export QR_ALLOW_SHARED_DEVICE=1
  fi
  echo "=== world size $ws on $gpus GPU(s)$( (( gpus < ws )) && echo ' (shared, MPS)')"
  # shellcheck disable=SC2086  # QR_TP_ARGS is a list of flags
  timeout 540 python3 python/examples/tp_run.py --device cuda --world-size "$ws" \
      --dtypes fp16,bf16,bf16cast --decode-variants eager,graph,compile,compile-aot \
      --analysis-device cuda --out "$out/tp-ws$ws" ${QR_TP_ARGS:---preset small} \
      2>&1 | tee "$out/tp-ws$ws.log"
  rc=${PIPESTATUS[0]}
  echo "=== world size $ws: exit $rc"
  (( rc == 0 )) || status=1
done
# The big directories (sampled calls, logits) stay there; results.json comes back.
find "$out" -name "*.npz" -delete
rm -rf "$out"/tp-ws*/model
exit $status
