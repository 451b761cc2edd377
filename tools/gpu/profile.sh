#!/usr/bin/env bash
# ncu profiles and SASS of the two-shot kernels ON THE GPU MACHINE, with
# .device/ staged by `QR_STAGE_VARIANTS=bare tools/gpu/stage.sh`.
#
# A real two-shot kernel waits for its peer GPU's kernel, and ncu serialises
# every kernel it profiles, so a profiled real kernel measures its own wait
# (docs/performance.md, "Profiles"). The "bare" timing variant skips the flag
# waits and the system fences: it runs alone, so ncu's kernel replay sees
# exactly what the codec arithmetic and the data movement cost, which is the
# floor of the real kernel. qr-bench drives both GPUs from one process; ncu
# profiles one launch per (regime, dtype) after the warm-up.
#   QR_PROFILE_REGIMES="FP INT8 INT6 INT4 INT3" QR_PROFILE_DTYPES="fp16 bf16cast" \
#   QR_PROFILE_SIZE=64M QR_PROFILE_SET=full bash tools/gpu/profile.sh
# Writes $OUT/profile-<regime>-<dtype>.{log,stalls.txt,ncu-rep}, and sass.txt.gz (every
# kernel of the real qr-bench, cuobjdump -sass) when cuobjdump is there.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out="${OUT:-gpu-out}"
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.device/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
bare=.device/variants/bare/qr-bench
if [[ ! -x "$bare" ]]; then
  echo "profile: $bare missing: stage with QR_STAGE_VARIANTS=bare tools/gpu/stage.sh" >&2
  exit 2
fi
ncu_bin="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)"
if [[ -z "$ncu_bin" ]]; then
  echo "profile: ncu not found" >&2
  exit 2
fi

failed=0
for regime in ${QR_PROFILE_REGIMES:-FP INT8 INT6 INT4 INT3}; do
  for dtype in ${QR_PROFILE_DTYPES:-fp16 bf16cast}; do
    name="profile-$regime-$dtype"
    # --launch-skip passes qr-bench's warm-up launches (both GPUs).
    timeout -k 5 "${QR_PROFILE_TIMEOUT:-240}" "$ncu_bin" --clock-control none \
      --target-processes all -k regex:TwoShotKernel --launch-skip 8 --launch-count 1 \
      --set "${QR_PROFILE_SET:-full}" --import-source no -o "$out/$name" -f \
      "$bare" --sizes "${QR_PROFILE_SIZE:-64M}" --regimes "$regime" --dtypes "$dtype" \
      --modes eager --algos two-shot --no-nccl --no-peer-bandwidth --quick \
      >"$out/$name.run.log" 2>&1
    rc=$?
    "$ncu_bin" --import "$out/$name.ncu-rep" --page details >"$out/$name.log" 2>&1
    # Stall reasons (cycles per issued instruction) and pipe use, which the
    # details page only summarises.
    "$ncu_bin" --import "$out/$name.ncu-rep" --page raw 2>&1 |
      grep -E "issue_stalled_.*per_issue_active|inst_executed_pipe_.*pct_of_peak_sustained_active" \
        >"$out/$name.stalls.txt"
    echo "profile: $regime $dtype ncu rc=$rc: $(grep -E 'Duration|Issue Slots Busy|Registers Per Thread' "$out/$name.log" | tr -s ' ' | paste -sd';')"
    [[ $rc -eq 0 ]] || failed=1
  done
done

cuobjdump_bin="$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)"
if [[ -n "$cuobjdump_bin" ]]; then
  "$cuobjdump_bin" -sass .device/bin/qr-bench | gzip >"$out/sass.txt.gz"
  echo "profile: sass.txt.gz $(stat -c %s "$out/sass.txt.gz") bytes"
else
  echo "profile: cuobjdump not found, no SASS"
fi
exit $failed
