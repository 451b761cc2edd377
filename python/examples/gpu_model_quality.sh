#!/usr/bin/env bash
# The trained model's quality run on the GPU machine (docs/model-quality.md,
# "The trained model"): train the byte-level Llama (train_lm.py), then the
# held-out evaluation at world sizes 2, 4 and 8 (ranks sharing one GPU under
# MPS), every regime x fp16/bf16/bf16cast, and the per-layer attribution at 2.
# Beforehand, here: `python3 python/examples/train_lm.py stage --out .device/corpus`
# (python3.11-doc installed), and the CUDA build staged (python/tests/gpu/stage.sh);
# then run(carry=[".device"], command="QR_MQ_CORPUS=.device/corpus bash python/examples/gpu_model_quality.sh").
#   QR_MQ_CORPUS   the staged corpus folder (default .device/corpus)
#   QR_MQ_STEPS    the training schedule's steps (default 1400: about 100 s
#                  on an H200 at 70 ms per step); the same steps give the same model
#   QR_MQ_SECONDS  instead: fit the steps to this many seconds
#   QR_MQ_WORLD_SIZES  default "2 4 8"
#   QR_MQ_ATTRIBUTION  the per-layer attribution's regimes at world size 2
#                  (default "INT4,INT3"; empty: no attribution)
#   QR_MQ_LAYOUTS  the other layouts (tp_run.py --layouts) at world size 2
#                  (default "fused,vocab"; empty: none)
#   QR_MQ_TP_TIMEOUT   seconds per tp_run.py (default 420)
#   QR_MQ_ARGS     extra tp_run.py flags (after the script's own, so they win)
#   QR_MQ_SHAPE_RUN=1  instead: the Qwen2.5-0.5B-shaped random model at TP2 and TP4
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${OUT:-./gpu-out}"
mkdir -p "$out"
export QR_LIBRARY="${QR_LIBRARY:-$PWD/.device/python/libquickreduce.so}"
export QR_BROKER_BIN="${QR_BROKER_BIN:-$PWD/.device/python/qr-broker}"
export PYTHONPATH="${PYTHONPATH:-$here/..}"
export NCCL_NVLS_ENABLE=0
for f in "$QR_LIBRARY" "$QR_BROKER_BIN"; do
  [[ -e "$f" ]] || { echo "missing $f: stage the CUDA build first"; exit 2; }
done
source "${QR_MPS_SH:-$here/../../tools/gpu/mps.sh}"
trap 'mps_stop "$out"' EXIT
work=$(mktemp -d /tmp/qr-mq.XXXXXX)
status=0
tp() {  # tp <name> <world size> <flags...>: one tp_run, its results.json and log into $out
  local name=$1 ws=$2
  shift 2
  local t0=$SECONDS
  timeout "${QR_MQ_TP_TIMEOUT:-420}" python3 "$here/tp_run.py" --device cuda --world-size "$ws" \
      --analysis-device cuda --decode-variants eager --out "$work/$name" "$@" ${QR_MQ_ARGS:-} \
      > "$work/$name.log" 2>&1
  local rc=$?
  echo "=== $name: exit $rc in $((SECONDS - t0)) s"
  grep -E "^\| (FP|INT)|checks passed|seconds:|FAILED|note:|Error|error" "$work/$name.log" | tail -n 40
  cp "$work/$name.log" "$out/" 2>/dev/null
  cp "$work/$name/results.json" "$out/$name-results.json" 2>/dev/null
  (( rc == 0 )) || status=1
}
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader

if [[ "${QR_MQ_SHAPE_RUN:-0}" == 1 ]]; then
  mps_start || echo "note: could not start MPS"
  export QR_ALLOW_SHARED_DEVICE=1
  tp qwen-shape-tp2 2 --preset qwen2.5-0.5b-shape --dtypes fp16 --regimes FP,INT8,INT4 \
      --prompts 1 --new-tokens 8 --stream-len 16
  tp qwen-shape-tp4 4 --preset qwen2.5-0.5b-shape-16h --dtypes fp16 --regimes FP,INT8,INT4 \
      --prompts 1 --new-tokens 8 --stream-len 16
  exit $status
fi

corpus="${QR_MQ_CORPUS:-.device/corpus}"
steps=()
[[ -n "${QR_MQ_SECONDS:-}" ]] && steps=(--seconds "$QR_MQ_SECONDS") || steps=(--steps "${QR_MQ_STEPS:-1400}")
python3 "$here/train_lm.py" train --corpus "$corpus" --out "$work/model" --device cuda \
    "${steps[@]}" 2>&1 | tail -n 30 || exit 1
cp "$work/model/train_log.csv" "$work/model/train.json" "$out/"
mps_start || echo "note: could not start MPS"
export QR_ALLOW_SHARED_DEVICE=1
for ws in ${QR_MQ_WORLD_SIZES:-2 4 8}; do
  extra=()
  (( ws == 2 )) && [[ -n "${QR_MQ_ATTRIBUTION-INT4,INT3}" ]] && extra=(--attribution "${QR_MQ_ATTRIBUTION-INT4,INT3}")
  (( ws == 2 )) && [[ -n "${QR_MQ_LAYOUTS-fused,vocab}" ]] && extra+=(--layouts "${QR_MQ_LAYOUTS-fused,vocab}")
  tp "trained-ws$ws" "$ws" --model "$work/model" --heldout "$corpus/heldout.txt" \
      --dtypes fp16,bf16,bf16cast --prompts 8 --new-tokens 48 --sample-every 256 "${extra[@]}"
done
exit $status
