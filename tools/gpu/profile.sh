#!/usr/bin/env bash
# ncu profile of the two-shot kernels ON THE GPU MACHINE, with .device/
# staged by tools/gpu/stage.sh. ncu serialises the kernels of the processes
# it profiles and these kernels wait on a peer GPU, so only rank 0 runs under
# ncu and rank 1 runs plainly; the metric sets must fit one pass (a replayed
# pass would wait for a peer that already finished; QR_OP_TIMEOUT_MS bounds
# it). Usage: QR_PROFILE_SIZES=67108864 bash tools/gpu/profile.sh
# Writes $OUT/profile-<set>.log.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out="${OUT:-gpu-out}"
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.device/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export QR_BROKER_SOCKET="/tmp/qr-profile-$$.sock" QR_OP_TIMEOUT_MS="${QR_OP_TIMEOUT_MS:-8000}"
sizes="${QR_PROFILE_SIZES:-67108864}"
ncu_bin="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)"

.device/bin/qr-broker --socket "$QR_BROKER_SOCKET" >"$out/profile-broker.log" 2>&1 &
broker=$!
trap 'kill $broker 2>/dev/null' EXIT
sleep 1

# One pass: time, instruction counts, issue activity, occupancy.
base_metrics=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,smsp__inst_executed.sum,\
sm__inst_executed.avg.per_cycle_active,smsp__issue_active.avg.pct_of_peak_sustained_active,\
sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread,launch__grid_size,\
launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem,sm__throughput.avg.pct_of_peak_sustained_elapsed

profile() {  # profile <name> <ncu options...>
  local name="$1"; shift
  local group="prof-$name-$$"
  timeout -k 5 150 .device/bin/qr-demo --world-size 2 --device gpu --group "$group" \
    --worker-rank 1 --sizes "$sizes" >"$out/profile-$name-rank1.log" 2>&1 &
  local peer=$!
  timeout -k 5 150 "$ncu_bin" --clock-control none --target-processes application-only \
    -k regex:TwoShotKernel "$@" \
    .device/bin/qr-demo --world-size 2 --device gpu --group "$group" --worker-rank 0 \
    --sizes "$sizes" >"$out/profile-$name.log" 2>&1
  echo "profile $name: rank0 rc=$? rank1 rc=$(wait $peer; echo $?)"
  grep -c "pass" "$out/profile-$name.log" || true
  grep -E "passes|pass$" "$out/profile-$name.log" | sort | uniq -c | head -5
}

profile base --metrics "$base_metrics"
profile stalls --section WarpStateStats
