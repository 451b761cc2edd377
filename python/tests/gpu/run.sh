#!/usr/bin/env bash
# The Python layer's GPU tests, on the GPU machine (torch with CUDA, pytest,
# numpy; no Bazel), over what python/tests/gpu/stage.sh put in .device/python:
#   bash python/tests/gpu/run.sh            # results: $OUT/python-gpu.xml and .log
# (test_gpu.py, and vLLM's quick all-reduce test bodies through the vLLM
# plugin: test_gpu_vllm_port.py; arguments, when given, name the GPU test
# files to run instead, e.g. python/tests/gpu/test_gpu_vllm_port.py)
# Two GPUs: one rank on each. One GPU: both ranks on it under NVIDIA MPS with
# QR_ALLOW_SHARED_DEVICE=1. Also runs the CPU torch suites with this torch
# (torch.compile exists here) and the per-call overhead measurement.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
source tools/gpu/unpack.sh  # .device from a carried .device-pack (tools/gpu/pack.sh)
root=$PWD
staged=$root/.device/python
out=${OUT:-/tmp/qr-python-gpu}
mkdir -p "$out"
gpu_tests=("$@")
(( ${#gpu_tests[@]} )) || gpu_tests=(python/tests/gpu/test_gpu.py python/tests/gpu/test_gpu_fused.py python/tests/gpu/test_gpu_vllm_port.py
  python/tests/gpu/test_distributed_gpu.py python/tests/gpu/test_gpu_integrations_fused.py
  python/tests/gpu/test_gpu_two_groups.py python/tests/gpu/test_gpu_collectives.py)
[[ -f $staged/libquickreduce.so ]] || { echo "run.sh: $staged is missing: run python/tests/gpu/stage.sh first" >&2; exit 1; }
export QR_LIBRARY=$staged/libquickreduce.so QR_BROKER_BIN=$staged/qr-broker QR_QRCTL_BIN=$staged/qrctl
export PYTHONPATH=$root/python:$root/python/tests:$root/python/tests/gpu PYTHONDONTWRITEBYTECODE=1
ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
source "$root/tools/gpu/mps.sh"
trap 'mps_stop "$out"' EXIT
mps=0
if (( ngpu >= 2 )); then
  export QR_TEST_GPUS=0,1
elif (( ngpu == 1 )); then
  export QR_TEST_GPUS=0,0 QR_ALLOW_SHARED_DEVICE=1
  mps_start && mps=1
else
  echo "run.sh: no GPU" >&2
  exit 1
fi
echo "python-gpu: $(python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)') gpus=$QR_TEST_GPUS mps=$mps"
python3 -m pytest -p no:cacheprovider -q -rs --junitxml="$out/python-gpu.xml" \
  "${gpu_tests[@]}" 2>&1 |
  tee "$out/python-gpu.log"
rc=${PIPESTATUS[0]}
# The CPU suites, in their own pytest process outside MPS and the
# shared-device mode. All of test_torch.py in one process is the regression
# test for forking ranks from a parent that already ran torch ops (the
# compiled fallback case stalled that way with torch 2.11; harness.py now
# starts them from a fork server). The adapters' suites and the fused ops'
# run here too, for torch 2.x (CI's CPU tests have Debian's torch 1.13, which
# has no float8_e4m3fn: the FP8 op's float8 paths run only here).
env -u CUDA_MPS_PIPE_DIRECTORY -u CUDA_MPS_LOG_DIRECTORY -u QR_ALLOW_SHARED_DEVICE \
  python3 -m pytest -p no:cacheprovider -q -rs --junitxml="$out/python-cpu.xml" \
  python/tests/test_torch.py python/tests/test_library.py python/tests/test_integrations.py \
  python/tests/test_integrations_sglang.py python/tests/test_integrations_fused.py \
  python/tests/test_torch_fused.py \
  python/tests/test_vllm_quick_all_reduce.py \
  python/tests/test_collectives.py python/tests/test_distributed.py 2>&1 |
  tee "$out/python-cpu.log"
(( PIPESTATUS[0] == 0 )) || rc=1
# The doctor on a real GPU machine (its GPU all-reduce needs two GPUs): shown,
# and its exit status reported, not counted (the machine may lack vLLM etc.).
env -u CUDA_MPS_PIPE_DIRECTORY -u CUDA_MPS_LOG_DIRECTORY -u QR_ALLOW_SHARED_DEVICE \
  python3 -m quickreduce doctor 2>&1 | tee "$out/doctor.txt"
echo "doctor: exit ${PIPESTATUS[0]}" | tee -a "$out/doctor.txt"
python3 python/bench/overhead.py --device cuda --gpus "$QR_TEST_GPUS" \
  --c-loop "$staged/qr_call_loop" 2>&1 | tee "$out/python-overhead.txt"
exit "$rc"
