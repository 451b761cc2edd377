#!/usr/bin/env bash
# Runs the staged GPU suite ON THE GPU MACHINE (from the repository root, with
# .device/ carried there by tools/gpu/stage.sh). Writes logs and CSVs to $OUT
# (or ./gpu-out), prints a summary last, exits non-zero on any failure.
#   QR_SUITE="local backend bench sanitizer" (the default) picks parts;
#   "variants" and "profile" need QR_STAGE_VARIANTS at staging (tools/gpu/profile.sh).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out="${OUT:-gpu-out}"
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.device/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$PWD/.device/bin:$PATH"
# Never use NVLink multicast on the shared machine.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
suite="${QR_SUITE:-local backend sanitizer bench}"
summary=()
failed=0

part() {  # part <name> <timeout s> <command...>
  local name="$1" limit="$2"; shift 2
  local start=$SECONDS
  echo "=== $name: $*"
  timeout -k 5 "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  tail -n 25 "$out/$name.log"
  summary+=("$name: rc=$rc ($((SECONDS - start)) s)")
  if [[ $rc -ne 0 ]]; then failed=1; fi
}

nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version --format=csv,noheader | tee "$out/gpus.txt"
nvidia-smi topo -m >>"$out/gpus.txt" 2>&1 || true

for p in $suite; do
  case "$p" in
    local)
      part local 420 .device/bin/two_shot_local_test --gtest_brief=1 ${QR_LOCAL_FILTER:+--gtest_filter=$QR_LOCAL_FILTER} ;;
    backend)
      [[ -x .device/bin/gpu_backend_test ]] &&
        part backend 300 .device/bin/gpu_backend_test --broker=.device/bin/qr-broker --gtest_brief=1 ;;
    sanitizer)
      part memcheck 300 compute-sanitizer --tool memcheck --error-exitcode 9 \
        .device/bin/two_shot_local_test --gtest_filter='AllCodecsAndDtypes/TwoShotBitExactTest.EqualsReferenceAtManySizes/INT4_fp16:AllDtypes/OneShotBitExactTest.EqualsReferenceAtManySizes/bf16:*RejectsBadArguments'
      part racecheck 240 compute-sanitizer --tool racecheck --error-exitcode 9 \
        .device/bin/two_shot_local_test --gtest_filter='AllCodecsAndDtypes/TwoShotBitExactTest.EqualsReferenceAtManySizes/INT6_bf16cast' ;;
    bench)
      # The full default sweep takes about 1-2 minutes on 2 x H200 (qr-bench
      # prints its estimate first); QR_BENCH_ARGS picks subsets, e.g. --quick.
      # Exit 3 = some cells failed but every output was written.
      [[ -x .device/bin/qr-bench ]] &&
        part bench "${QR_BENCH_TIMEOUT:-420}" .device/bin/qr-bench --csv "$out/bench.csv" \
          --json "$out/bench.json" --min-size-table "$out/min_size_table.txt" ${QR_BENCH_ARGS:-} ;;
    variants)
      # The real kernels and each staged timing variant (QR_STAGE_VARIANTS),
      # the same sweep; docs/performance.md, "Timing variants".
      variant_args=(--sizes 64M,256M,1G --modes graph --algos two-shot --no-nccl --no-peer-bandwidth)
      for b in .device/bin/qr-bench .device/variants/*/qr-bench; do
        [[ -x "$b" ]] || continue
        n=$(basename "$(dirname "$b")")
        [[ "$n" == bin ]] && n=real
        part "variant-$n" 300 "$b" "${variant_args[@]}" --csv "$out/variant-$n.csv" ${QR_VARIANT_ARGS:-}
      done ;;
    profile)
      part profile 540 bash tools/gpu/profile.sh ;;
  esac
done

echo "=== summary"
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
exit $failed
