#!/usr/bin/env bash
# Runs the staged GPU suite ON THE GPU MACHINE (from the repository root, with
# .device/ carried there by tools/gpu/stage.sh). Writes logs and CSVs to $OUT
# (or ./gpu-out), prints a summary last, exits non-zero on any failure.
#   QR_SUITE picks parts; default "codec local backend sanitizer bench" on 2+
#   GPUs, "codec local backend demo sanitizer" on one GPU (bench needs 2 GPUs
#   and NCCL). "bench symm" adds PyTorch's symmetric-memory all-reduce beside
#   qr-bench's rows (torch, a GPU per rank).
#   "collectives" (not default): reduce-scatter and all-gather against the
#   host references (tests/gpu:collectives_gpu_test, ranks sharing the
#   GPUs); "collectives-backend" (not default): the same through the real
#   stack (collectives_backend_test); "collectives-cost" (not default):
#   qr-kernel-cost --reduce-scatter and --all-gather. On one GPU each fits
#   one device call on its own.
#   "fused" (not default): the fused all-reduce + residual + RMSNorm against
#   the host reference (tests/gpu:fused_gpu_test, ranks sharing the GPUs,
#   and fused_backend_test through the real stack); "fused-cost" (not
#   default): qr-kernel-cost --fused; "fused-bench" (not default, 2+ GPUs):
#   qr-bench --fused, one GPU per rank; "fused-forms" (not default): the
#   one-launch kernel's thread layouts, shared and (with a no_waits or bare
#   variant staged) rank 0 alone.
#   "variants" and "profile" need QR_STAGE_VARIANTS at staging (tools/gpu/profile.sh);
#   "cost" (qr-kernel-cost, every rank on GPU 0) uses them where staged.
#   "tma" (not default): TMA bulk stores against SM stores (issue 18 item 8).
#   "bench-modes" (not default): qr-bench --launch per-gpu with NCCL's
#   symmetric kernels and PyTorch's symmetric memory (issue 30 item 6).
# With exactly one GPU the multi-process parts (backend, demo) run their ranks
# on it under NVIDIA MPS, which this script starts and stops, with
# QR_ALLOW_SHARED_DEVICE=1 (docs/gpu-testing.md).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
source tools/gpu/unpack.sh  # .device from a carried .device-pack (tools/gpu/pack.sh)
out="${OUT:-gpu-out}"
mkdir -p "$out"
export LD_LIBRARY_PATH="$PWD/.device/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$PWD/.device/bin:$PATH"
# Never use NVLink multicast on the shared machine.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | grep -c .)
if [[ $gpus -eq 1 ]]; then
  suite="${QR_SUITE:-codec local backend demo sanitizer}"
  # One device call is about 10 minutes: parts are cut short (and later ones
  # skipped) so that the summary is always printed.
  budget="${QR_SUITE_BUDGET:-540}"
else
  suite="${QR_SUITE:-codec local backend sanitizer bench}"
  budget="${QR_SUITE_BUDGET:-}"
fi
summary=()
failed=0
started=$SECONDS
part_pid=""
# A part's limit in seconds: lim <with 2+ GPUs> <with one GPU>.
lim() { if [[ $gpus -eq 1 ]]; then echo "$2"; else echo "$1"; fi; }

part() {  # part <name> <timeout s> <command...>
  local name="$1" limit="$2"; shift 2
  if [[ -n "$budget" ]]; then
    local left=$((budget - (SECONDS - started)))
    if ((left < 20)); then
      summary+=("$name: skipped (suite budget of $budget s spent)")
      failed=1
      return
    fi
    ((limit > left)) && limit=$left
  fi
  local start=$SECONDS
  echo "=== $name (limit $limit s): $*"
  # In the background so that a signal to this script is handled at once
  # (the trap below passes it on to the part).
  timeout -k 5 "$limit" "$@" >"$out/$name.log" 2>&1 &
  part_pid=$!
  wait "$part_pid"
  local rc=$?
  part_pid=""
  tail -n 25 "$out/$name.log"
  summary+=("$name: rc=$rc ($((SECONDS - start)) s)")
  if [[ $rc -ne 0 ]]; then failed=1; fi
}

# NVIDIA MPS for the parts whose ranks share the one GPU: started on first
# need, stopped on every exit path.
source "$(dirname "${BASH_SOURCE[0]}")/mps.sh"
suite_mps_start() {
  local was="$mps_dir"
  mps_start || return 1
  [[ -z "$was" ]] && summary+=("mps: started")
  return 0
}
suite_mps_stop() {
  [[ -n "$mps_dir" ]] && summary+=("mps: stopped")
  mps_stop "$out"
}
# Parts whose ranks are separate processes: on one GPU they share it.
shared=()
shared_gpu() {
  shared=()
  if [[ $gpus -eq 1 ]]; then
    suite_mps_start || return 1
    shared=(env QR_ALLOW_SHARED_DEVICE=1)
  fi
}

# A private broker for qr-demo (its workers would otherwise autostart one
# that outlives the suite).
broker_pid=""
broker_dir=""
broker_stop() {
  if [[ -n "$broker_pid" ]]; then
    kill "$broker_pid" 2>/dev/null
    wait "$broker_pid" 2>/dev/null
    broker_pid=""
  fi
  [[ -n "$broker_dir" ]] && rm -rf "$broker_dir"
  broker_dir=""
}
demo() {  # demo <world size>
  broker_dir=$(mktemp -d /tmp/qr-suite.XXXXXX)
  QR_LOG_LEVEL=warn .device/bin/qr-broker --socket "$broker_dir/broker.sock" \
    >"$out/demo-broker.log" 2>&1 &
  broker_pid=$!
  for _ in $(seq 100); do
    [[ -e "$broker_dir/broker.sock" ]] && break
    sleep 0.05
  done
  QR_BROKER_SOCKET="$broker_dir/broker.sock" QR_BROKER_AUTOSTART=0 \
    part "demo-ws$1" 90 ${shared[@]+"${shared[@]}"} .device/bin/qr-demo --device gpu --world-size "$1"
  broker_stop
}

# A private broker for a part whose ranks join through it: "${broker_env[@]}"
# before the part's command gives it QR_BROKER_SOCKET and
# QR_BROKER_AUTOSTART=0; broker_stop ends it.
broker_start() {  # broker_start <log name>
  broker_dir=$(mktemp -d /tmp/qr-suite.XXXXXX)
  QR_LOG_LEVEL=warn .device/bin/qr-broker --socket "$broker_dir/broker.sock" \
    >"$out/$1-broker.log" 2>&1 &
  broker_pid=$!
  for _ in $(seq 100); do
    [[ -e "$broker_dir/broker.sock" ]] && break
    sleep 0.05
  done
  broker_env=(env QR_BROKER_SOCKET="$broker_dir/broker.sock" QR_BROKER_AUTOSTART=0)
}

trap 'broker_stop; suite_mps_stop' EXIT
# timeout passes the signal on to the part's command.
trap '[[ -n "$part_pid" ]] && kill -TERM "$part_pid" && wait "$part_pid"; exit 130' INT TERM

nvidia-smi --query-gpu=index,name,pci.bus_id,driver_version --format=csv,noheader | tee "$out/gpus.txt"
nvidia-smi topo -m >>"$out/gpus.txt" 2>&1 || true
echo "=== $gpus GPU(s); parts: $suite${budget:+; budget $budget s}"

# Commas separate parts as well as spaces ("local,backend"), and a name that
# is no part fails the suite: a typo must not pass by running nothing.
suite="${suite//,/ }"
for p in $suite; do
  case "$p" in
    codec)
      # The packed-fp16 codecs' fp16x2 arithmetic and the bf16 cast's packed
      # conversions against the host definitions.
      part codec 120 .device/bin/packed_codec_gpu_test --gtest_brief=1
      part cast 60 .device/bin/packed_cast_gpu_test --gtest_brief=1
      # The peer-store kernels' bytes (SM stores, TMA bulk copies).
      part peer-store 120 .device/bin/peer_store_gpu_test --gtest_brief=1 ;;
    local)
      # One process drives every rank (on one GPU all of them share it): no MPS.
      part local "$(lim 420 360)" .device/bin/two_shot_local_test --gtest_brief=1 ${QR_LOCAL_FILTER:+--gtest_filter=$QR_LOCAL_FILTER} ;;
    fused)
      # The fused all-reduce + residual add + RMSNorm against the host
      # reference (docs/fused.md), one process driving every rank: no MPS.
      # Then through the real stack (processes, broker, graph replay): on one
      # GPU its ranks share it under MPS.
      part fused "$(lim 300 300)" .device/bin/fused_gpu_test --gtest_brief=1
      # The FP8 output's conversion on every fp32 value.
      [[ -x .device/bin/fp8_gpu_test ]] && part fp8 60 .device/bin/fp8_gpu_test --gtest_brief=1
      [[ -x .device/bin/fused_backend_test ]] && shared_gpu &&
        part fused-backend 240 ${shared[@]+"${shared[@]}"} .device/bin/fused_backend_test \
          --broker=.device/bin/qr-broker --gtest_brief=1 ;;
    collectives)
      # Reduce-scatter and all-gather against the host references
      # (docs/collectives.md), one process driving every rank at world sizes
      # 2, 4 and 8: no MPS. QR_COLLECTIVES_FILTER narrows it (a gtest filter).
      part collectives "$(lim 480 480)" .device/bin/collectives_gpu_test --gtest_brief=1 \
        ${QR_COLLECTIVES_FILTER:+--gtest_filter=$QR_COLLECTIVES_FILTER} ;;
    collectives-backend)
      # The same through the real stack (processes, broker, graph replay, a
      # killed rank): on one GPU its ranks share it under MPS.
      [[ -x .device/bin/collectives_backend_test ]] && shared_gpu &&
        part collectives-backend "$(lim 420 480)" ${shared[@]+"${shared[@]}"} \
          .device/bin/collectives_backend_test --broker=.device/bin/qr-broker --gtest_brief=1 ;;
    collectives-cost)
      # qr-kernel-cost --reduce-scatter / --all-gather (tools/kernel_cost_collectives.h):
      # each against the two-shot all-reduce of the same whole message, every
      # rank on GPU 0, graph-captured, one process: without MPS (stopped if
      # a part before started it); QR_COLLECTIVES_COST_ARGS adds flags.
      suite_mps_stop
      part rs-cost 240 .device/bin/qr-kernel-cost --reduce-scatter --csv "$out/rs-cost.csv" \
        ${QR_COLLECTIVES_COST_ARGS:-}
      part ag-cost 240 .device/bin/qr-kernel-cost --all-gather --csv "$out/ag-cost.csv" \
        ${QR_COLLECTIVES_COST_ARGS:-} ;;
    fused-cost)
      # qr-kernel-cost --fused (tools/kernel_cost_fused.h): fused against the
      # all-reduce alone and the all-reduce + a separate RMSNorm kernel, every
      # rank on GPU 0, graph-captured; QR_FUSED_COST_ARGS adds flags.
      part fused-cost 300 .device/bin/qr-kernel-cost --fused --csv "$out/fused-cost.csv" \
        ${QR_FUSED_COST_ARGS:-} ;;
    fused-forms)
      # The one-launch kernel's two thread layouts (--form chunk, lane) side
      # by side, every rank launched; then, with a no_waits or bare variant
      # staged (QR_STAGE_VARIANTS), rank 0's kernels alone, the SM-side cost
      # of the all-reduce, the unfused pair and the fused forms.
      # QR_FUSED_FORMS_ARGS adds flags (default fp16, no GEMM).
      forms_args=(--dtypes fp16 --no-gemm ${QR_FUSED_FORMS_ARGS:-})
      for form in chunk lane; do
        part "fused-$form" 240 .device/bin/qr-kernel-cost --fused --form "$form" \
          --csv "$out/fused-$form.csv" "${forms_args[@]}"
      done
      for b in .device/variants/no_waits/qr-kernel-cost .device/variants/bare/qr-kernel-cost; do
        [[ -x "$b" ]] || continue
        for form in policy chunk lane; do
          part "fused-alone-$form" 180 "$b" --fused --mode alone --form "$form" \
            --csv "$out/fused-alone-$form.csv" "${forms_args[@]}"
        done
        break
      done ;;
    fused-bench)
      # qr-bench --fused (tools/bench_fused.h): the same columns as
      # fused-cost, one GPU per rank; QR_FUSED_BENCH_ARGS adds flags
      # (--world-size 4, say).
      if [[ $gpus -lt 2 ]]; then
        summary+=("fused-bench: skipped (qr-bench --fused needs 2 GPUs)")
        continue
      fi
      part fused-bench 300 .device/bin/qr-bench --fused --csv "$out/fused-bench.csv" \
        ${QR_FUSED_BENCH_ARGS:-} ;;
    backend)
      [[ -x .device/bin/gpu_backend_test ]] && shared_gpu &&
        part backend 300 ${shared[@]+"${shared[@]}"} .device/bin/gpu_backend_test \
          --broker=.device/bin/qr-broker --gtest_brief=1 ${QR_BACKEND_FILTER:+--gtest_filter=$QR_BACKEND_FILTER}
      # One visible GPU per rank (CUDA_VISIBLE_DEVICES per process).
      [[ -x .device/bin/one_visible_gpu_test ]] && shared_gpu &&
        part one-visible 120 ${shared[@]+"${shared[@]}"} .device/bin/one_visible_gpu_test \
          --broker=.device/bin/qr-broker --gtest_brief=1 ;;
    demo)
      [[ -x .device/bin/qr-demo ]] && shared_gpu && demo 2 && demo 4 ;;
    sanitizer)
      # compute-sanitizer is not asked to run MPS clients.
      suite_mps_stop
      part memcheck "$(lim 300 120)" compute-sanitizer --tool memcheck --error-exitcode 9 \
        .device/bin/two_shot_local_test --gtest_filter='AllCodecsAndDtypes/TwoShotBitExactTest.EqualsReferenceAtManySizes/INT4_fp16:AllDtypes/OneShotBitExactTest.EqualsReferenceAtManySizes/bf16:*RejectsBadArguments'
      part racecheck "$(lim 240 90)" compute-sanitizer --tool racecheck --error-exitcode 9 \
        .device/bin/two_shot_local_test --gtest_filter='AllCodecsAndDtypes/TwoShotBitExactTest.EqualsReferenceAtManySizes/INT6_bf16cast' ;;
    bench)
      # The full default sweep takes about 1-2 minutes on 2 x H200 (qr-bench
      # prints its estimate first); QR_BENCH_ARGS picks subsets, e.g. --quick.
      # Exit 3 = some cells failed but every output was written.
      if [[ $gpus -lt 2 ]]; then
        summary+=("bench: skipped (qr-bench needs 2 GPUs)")
        continue
      fi
      [[ -x .device/bin/qr-bench ]] &&
        part bench "${QR_BENCH_TIMEOUT:-420}" .device/bin/qr-bench --csv "$out/bench.csv" \
          --json "$out/bench.json" --min-size-table "$out/min_size_table.txt" ${QR_BENCH_ARGS:-} ;;
    bench-modes)
      # qr-bench --launch per-gpu (one process per GPU, quickreduce through
      # the broker, NCCL by the launcher's id) with NCCL's symmetric kernels
      # and PyTorch's symmetric memory (--torch-symm) as baselines; exit 0
      # means every cell ran and every captured graph had nodes (docs/
      # performance.md, "How to run qr-bench"). On one GPU: world size 1 (the
      # baselines' calls and captures; torch's ops may refuse world size 1,
      # said as notes), then 2 ranks sharing the GPU under MPS (quickreduce's
      # path; NCCL refuses two ranks on one GPU, so no NCCL there). On 2+
      # GPUs: the largest of 2/4/8 that fits, every baseline. QR_MODES_ARGS
      # adds flags.
      modes_args=(--quick --modes graph,eager --sizes 4K,64K,1M,16M)
      [[ -x .device/bin/qr-bench ]] || { summary+=("bench-modes: no .device/bin/qr-bench"); failed=1; continue; }
      # The node count qr-bench checks every captured graph with.
      [[ -x .device/bin/gpu_api_gpu_test ]] &&
        part gpu-api-graph 60 .device/bin/gpu_api_gpu_test --gtest_brief=1 \
          --gtest_filter='*Graph*:*Capture*' 
      part bench-modes-ws1 240 .device/bin/qr-bench --launch per-gpu --world-size 1 --torch-symm \
        "${modes_args[@]}" --launch-timeout 200 --csv "$out/modes-ws1.csv" \
        --json "$out/modes-ws1.json" ${QR_MODES_ARGS:-}
      if [[ $gpus -eq 1 ]]; then
        shared_gpu && broker_start bench-modes-shared &&
          part bench-modes-shared 240 "${broker_env[@]}" QR_ALLOW_SHARED_DEVICE=1 \
            .device/bin/qr-bench --launch per-gpu --world-size 2 "${modes_args[@]}" \
            --dtypes fp16,bf16cast --regimes FP,INT8,INT4 --launch-timeout 200 \
            --csv "$out/modes-shared.csv" --json "$out/modes-shared.json" ${QR_MODES_ARGS:-}
        broker_stop
      else
        mws=2
        [[ $gpus -ge 4 ]] && mws=4
        [[ $gpus -ge 8 ]] && mws=8
        broker_start "bench-modes-ws$mws" &&
          part "bench-modes-ws$mws" 420 "${broker_env[@]}" .device/bin/qr-bench --launch per-gpu \
            --world-size "$mws" --torch-symm "${modes_args[@]}" --launch-timeout 380 \
            --csv "$out/modes-ws$mws.csv" --json "$out/modes-ws$mws.json" ${QR_MODES_ARGS:-}
        broker_stop
      fi ;;
    symm)
      # PyTorch's symmetric-memory one-shot and two-shot all-reduce (and
      # torch's NCCL as a calibration) on qr-bench's sizes and dtypes, timed
      # the same way (python/bench/symm_mem_bench.py; multicast stays off:
      # the exports above, which the script also forces); then, where the
      # bench part wrote bench.csv, the joined table with the goal verdicts
      # (tools/qr_bench_join.py). QR_SYMM_ARGS adds flags (--quick to match
      # QR_BENCH_ARGS=--quick). Exit 3 = some cell failed (refusals are not
      # failures).
      if [[ $gpus -lt 2 ]]; then
        summary+=("symm: skipped (torch symmetric memory maps each rank's buffer into its peers: one GPU per rank, 2 GPUs at least)")
        continue
      fi
      symm_limit="${QR_SYMM_TIMEOUT:-420}"
      part symm "$symm_limit" python3 python/bench/symm_mem_bench.py --timeout $((symm_limit - 20)) \
        --csv "$out/symm.csv" --json "$out/symm.json" ${QR_SYMM_ARGS:-}
      if [[ -s "$out/bench.csv" ]]; then
        part symm-table 60 python3 tools/qr_bench_join.py "$out/bench.csv" "$out/symm.csv" \
          --out "$out/symm_table.md"
      else
        summary+=("symm-table: skipped (no $out/bench.csv: run the bench part first, QR_SUITE=bench,symm)")
      fi ;;
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
    cost)
      # The kernels' own cost on GPU 0 (tools/kernel_cost_options.h): the real
      # kernels with every rank launched, and each staged variant; those that
      # skip the waits time rank 0 alone (its SM-side cost). Two-shot at
      # 4M,64M,256M and one-shot up to 4M; QR_COST_ALGOS picks algorithms,
      # QR_COST_ARGS adds flags.
      for b in .device/bin/qr-kernel-cost .device/variants/*/qr-kernel-cost; do
        [[ -x "$b" ]] || continue
        n=$(basename "$(dirname "$b")")
        [[ "$n" == bin ]] && n=real
        mode=shared
        [[ "$n" == bare || "$n" == no_waits ]] && mode=alone
        for algo in ${QR_COST_ALGOS:-two-shot one-shot}; do
          part "cost-$n-$algo" 180 "$b" --algorithm "$algo" --mode "$mode" \
            --csv "$out/cost-$n-$algo.csv" --json "$out/cost-$n-$algo.json" ${QR_COST_ARGS:-}
        done
      done ;;
    tma)
      # Issue 18 item 8, TMA bulk stores against SM stores (docs/performance.md,
      # "TMA bulk stores"): their bytes, then their speed. On one GPU
      # qr-kernel-cost --peer-store (issue side and HBM, not NVLink); on two
      # also qr-bench's peer-store bandwidth of both (the link: what decides).
      # QR_TMA_CHUNKS picks the chunk sizes, QR_TMA_ARGS adds qr-kernel-cost flags.
      chunks="${QR_TMA_CHUNKS:-4K,8K,16K,32K}"
      part peer-store 120 .device/bin/peer_store_gpu_test --gtest_brief=1
      part tma-cost 240 .device/bin/qr-kernel-cost --peer-store --peer-tma-chunks "$chunks" \
        --csv "$out/tma-cost.csv" --json "$out/tma-cost.json" ${QR_TMA_ARGS:-}
      if [[ $gpus -ge 2 ]]; then
        part tma-bench 300 .device/bin/qr-bench --peer-tma-chunks "$chunks" --sizes 64M \
          --dtypes fp16 --regimes FP --modes graph --algos two-shot --no-nccl \
          --json "$out/tma-bench.json"
      fi ;;
    profile)
      part profile 540 bash tools/gpu/profile.sh ;;
    *)
      summary+=("$p: no such part (codec local collectives collectives-backend collectives-cost fused fused-cost fused-forms fused-bench backend demo sanitizer bench bench-modes symm variants cost tma profile)")
      failed=1 ;;
  esac
done
suite_mps_stop

echo "=== summary"
printf '%s\n' "${summary[@]}" | tee "$out/summary.txt"
exit $failed
