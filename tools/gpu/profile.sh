#!/usr/bin/env bash
# ncu profile of the two-shot kernels ON THE GPU MACHINE, with .device/
# staged by tools/gpu/stage.sh. These kernels wait on the peer GPU's kernel,
# and ncu serialises the kernels of every process it profiles, so only rank 0
# of a two-process qr-demo runs under ncu. ncu replays the whole application
# once per pass (--replay-mode application: a replayed kernel alone would wait
# for a peer that already finished), so rank 1 runs again for every pass.
#   QR_PROFILE_SIZES=67108864 QR_PROFILE_REGIMES=FP,INT4 QR_PROFILE_DTYPES=fp16 \
#   QR_PROFILE_SECTIONS="SpeedOfLight WarpStateStats" bash tools/gpu/profile.sh
# Writes $OUT/profile.log (ncu's report) and profile-rank1.log.
# Caveat (docs/performance.md, "Profiles"): ncu's per-launch work delays rank
# 0, so the profiled kernels mostly wait for rank 1 and the counters show the
# wait loop; use it for what a kernel does while waiting, not for its speed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out="${OUT:-gpu-out}"
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.device/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export QR_BROKER_SOCKET="/tmp/qr-profile-$$.sock" QR_OP_TIMEOUT_MS="${QR_OP_TIMEOUT_MS:-20000}"
ncu_bin="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)"
sections=()
for s in ${QR_PROFILE_SECTIONS:-SpeedOfLight ComputeWorkloadAnalysis SchedulerStats WarpStateStats Occupancy LaunchStats InstructionStats}; do
  sections+=(--section "$s")
done
demo_args=(--world-size 2 --device gpu --group "qr-profile-$$"
  --sizes "${QR_PROFILE_SIZES:-67108864}" --regimes "${QR_PROFILE_REGIMES:-FP,INT8,INT4}"
  --dtypes "${QR_PROFILE_DTYPES:-fp16}")

.device/bin/qr-broker --socket "$QR_BROKER_SOCKET" >"$out/profile-broker.log" 2>&1 &
broker=$!
# Rank 1, once per pass of rank 0 (it stops when rank 0 is done).
( for pass in $(seq 1 "${QR_PROFILE_MAX_PASSES:-40}"); do
    echo "--- pass $pass"
    .device/bin/qr-demo "${demo_args[@]}" --worker-rank 1
    sleep 2  # rank 0 of this pass leaves before the next pass joins
  done ) >"$out/profile-rank1.log" 2>&1 &
peer=$!
trap 'kill $peer $broker 2>/dev/null; pkill -f "qr-profile-$$" 2>/dev/null' EXIT

timeout -k 5 "${QR_PROFILE_TIMEOUT:-400}" "$ncu_bin" --clock-control none \
  --target-processes application-only --replay-mode application \
  -k regex:TwoShotKernel "${sections[@]}" ${QR_PROFILE_NCU_ARGS:-} \
  .device/bin/qr-demo "${demo_args[@]}" --worker-rank 0 >"$out/profile.log" 2>&1
echo "profile: ncu rc=$? ($(grep -c '^--- pass' "$out/profile-rank1.log") rank-1 runs)"
grep -E "PROF|Error|error" "$out/profile.log" | sort | uniq -c | head -20
