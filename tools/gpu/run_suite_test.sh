#!/usr/bin/env bash
# tools/gpu/run_suite.sh without a GPU: fake nvidia-smi, MPS control daemon,
# compute-sanitizer and staged binaries that record what they saw. Checks that
# on one GPU MPS is started for the multi-process parts only (with
# QR_ALLOW_SHARED_DEVICE=1 there and nowhere else) and stopped on every exit
# path: success, a failing part, SIGTERM in the middle, a spent budget; that
# two GPUs never start MPS nor set the flag; and the cost and symm parts'
# commands and the part names.
set -uo pipefail
suite_src="$PWD/tools/gpu/run_suite.sh"
tmp=$(mktemp -d /tmp/qr-suite-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# A fake checkout: tools/gpu/run_suite.sh, .device/bin/*, fakes on PATH.
make_tree() {  # make_tree <dir> <gpus>
  local d="$1" gpus="$2"
  mkdir -p "$d/tools/gpu" "$d/.device/bin" "$d/.device/lib" "$d/fake"
  cp "$suite_src" "$d/tools/gpu/run_suite.sh"
  cp "$(dirname "$suite_src")/mps.sh" "$d/tools/gpu/mps.sh"
  cp "$(dirname "$suite_src")/unpack.sh" "$d/tools/gpu/unpack.sh"
  local calls="$d/calls.txt"
  : >"$calls"
  cat >"$d/fake/nvidia-smi" <<EOF
#!/usr/bin/env bash
[[ "\$1" == topo ]] && exit 0
for ((i = 0; i < $gpus; i++)); do echo "\$i, NVIDIA H200, 00000000:1\$i:00.0, 580.00"; done
EOF
  # The control daemon: -d starts a stand-in process and writes its pid
  # where the real one does; "quit" on stdin ends it.
  cat >"$d/fake/nvidia-cuda-mps-control" <<EOF
#!/usr/bin/env bash
if [[ "\${1:-}" == -d ]]; then
  [[ -d "\$CUDA_MPS_PIPE_DIRECTORY" && -d "\$CUDA_MPS_LOG_DIRECTORY" ]] || exit 1
  sleep 120 >/dev/null 2>&1 </dev/null &
  echo \$! >"\$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid"
  echo "server log" >"\$CUDA_MPS_LOG_DIRECTORY/control.log"
  echo "mps-start" >>"$calls"
  exit 0
fi
read -r cmd
[[ "\$cmd" == quit ]] || exit 1
kill "\$(cat "\$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid")"
echo "mps-quit" >>"$calls"
EOF
  cat >"$d/fake/compute-sanitizer" <<EOF
#!/usr/bin/env bash
while [[ "\$1" == --* ]]; do shift 2; done
exec "\$@"
EOF
  # Each staged binary records its name, the flag and whether MPS was on.
  for b in packed_codec_gpu_test packed_cast_gpu_test peer_store_gpu_test two_shot_local_test \
    collectives_gpu_test collectives_backend_test gpu_backend_test one_visible_gpu_test qr-demo qr-bench qr-kernel-cost; do
    cat >"$d/.device/bin/$b" <<EOF
#!/usr/bin/env bash
echo "$b shared=\${QR_ALLOW_SHARED_DEVICE:-unset} mps=\${CUDA_MPS_PIPE_DIRECTORY:+on} \$*" >>"$calls"
[[ -n "\${FAKE_HANG:-}" && "$b" == "\$FAKE_HANG" ]] && sleep 60
[[ "\${FAKE_FAIL:-}" == "$b" ]] && exit 1
exit 0
EOF
  done
  # python3 for the symm part: records its arguments and writes a line to
  # the files it is given with --csv and --out.
  cat >"$d/fake/python3" <<EOF
#!/usr/bin/env bash
echo "python3 \$*" >>"$calls"
while [[ \$# -gt 0 ]]; do
  case "\$1" in --csv|--out) echo "written" >"\$2"; shift ;; esac
  shift
done
[[ "\${FAKE_FAIL:-}" == python3 ]] && exit 3
exit 0
EOF
  cat >"$d/.device/bin/qr-broker" <<EOF
#!/usr/bin/env bash
touch "\$2"
exec sleep 120
EOF
  chmod +x "$d"/fake/* "$d"/.device/bin/*
}

run() {  # run <dir> [env...]: runs the suite, returns its exit code
  local d="$1"; shift
  (cd "$d" && env PATH="$d/fake:$PATH" OUT="$d/out" "$@" bash tools/gpu/run_suite.sh \
    >"$d/suite.log" 2>&1)
}

no_mps_left() {  # no_mps_left <dir>: every start was quit, nothing left behind
  local d="$1"
  [[ $(grep -c mps-start "$d/calls.txt") -eq $(grep -c mps-quit "$d/calls.txt") ]] ||
    fail "$d: MPS started $(grep -c mps-start "$d/calls.txt") times, quit $(grep -c mps-quit "$d/calls.txt")"
  if compgen -G "/tmp/qr-mps.*/pipe/nvidia-cuda-mps-control.pid" >/dev/null; then
    for f in /tmp/qr-mps.*/pipe/nvidia-cuda-mps-control.pid; do
      grep -q "$d" "$f" 2>/dev/null && fail "$d: MPS pipes left in $f"
    done
  fi
}

# 1. One GPU, every part passes.
d="$tmp/one"
make_tree "$d" 1
run "$d" || { cat "$d/suite.log"; fail "one GPU: suite failed"; }
c="$d/calls.txt"
[[ $(grep -c mps-start "$c") -eq 1 && $(grep -c mps-quit "$c") -eq 1 ]] ||
  { cat "$c"; fail "one GPU: MPS not started and stopped exactly once"; }
grep -q "^gpu_backend_test shared=1 mps=on" "$c" || fail "backend without the flag or MPS"
grep -q "^one_visible_gpu_test shared=1 mps=on --broker" "$c" ||
  fail "one-visible without the flag or MPS"
[[ $(grep -c "^qr-demo shared=1 mps=on --device gpu --world-size" "$c") -eq 2 ]] ||
  fail "qr-demo did not run twice (ws 2, 4) with the flag under MPS"
grep -q "^two_shot_local_test shared=unset mps= --gtest_brief" "$c" ||
  fail "the local test saw the flag or MPS"
[[ $(grep -c "^two_shot_local_test shared=unset mps= --gtest_filter" "$c") -eq 2 ]] ||
  fail "the sanitizer parts did not run without MPS"
grep -q "^qr-bench" "$c" && fail "bench ran on one GPU by default"
grep -q "^python3" "$c" && fail "symm ran on one GPU by default"
# Order: MPS comes up for the backend and goes down before the sanitizer.
order=$(grep -oE "^(mps-start|mps-quit|gpu_backend_test|qr-demo|two_shot_local_test)" "$c" | uniq |
  tr '\n' ' ')
[[ "$order" == "two_shot_local_test mps-start gpu_backend_test qr-demo mps-quit two_shot_local_test " ]] ||
  fail "order: $order"
[[ -f "$d/out/mps-control.log" ]] || fail "MPS logs not kept"
grep -q "mps: stopped" "$d/out/summary.txt" || fail "summary does not say MPS stopped"
no_mps_left "$d"

# 2. A failing part: the suite fails, MPS still stops.
d="$tmp/fail"
make_tree "$d" 1
run "$d" FAKE_FAIL=gpu_backend_test && fail "a failing backend part passed the suite"
grep -q "backend: rc=1" "$d/out/summary.txt" || fail "summary lacks the backend failure"
no_mps_left "$d"

# 3. SIGTERM while a multi-process part runs: the trap stops MPS.
d="$tmp/term"
make_tree "$d" 1
(cd "$d" && exec env PATH="$d/fake:$PATH" OUT="$d/out" FAKE_HANG=gpu_backend_test \
  bash tools/gpu/run_suite.sh >"$d/suite.log" 2>&1) &
pid=$!
for _ in $(seq 200); do
  grep -q "^gpu_backend_test" "$d/calls.txt" && break
  sleep 0.05
done
grep -q mps-start "$d/calls.txt" || fail "SIGTERM case: MPS never started"
kill -TERM "$pid"
wait "$pid"
[[ $? -ne 0 ]] || fail "a terminated suite exited 0"
no_mps_left "$d"

# 4. A budget too small for the later parts: they are skipped, MPS stops.
d="$tmp/budget"
make_tree "$d" 1
run "$d" QR_SUITE_BUDGET=19 && fail "a spent budget passed the suite"
grep -q "local: skipped (suite budget" "$d/out/summary.txt" || fail "no budget skip in the summary"
no_mps_left "$d"

# 5. Two GPUs: the old default parts, no MPS, no flag.
d="$tmp/two"
make_tree "$d" 2
run "$d" || { cat "$d/suite.log"; fail "two GPUs: suite failed"; }
c="$d/calls.txt"
grep -q "^mps-" "$c" && fail "MPS started with two GPUs"
grep -q "^gpu_backend_test shared=unset mps= " "$c" || fail "two GPUs: backend saw the flag"
grep -q "^one_visible_gpu_test shared=unset mps= " "$c" || fail "two GPUs: one-visible saw the flag"
grep -q "^qr-bench" "$c" || fail "two GPUs: no bench"
grep -q "^qr-demo" "$c" && fail "two GPUs: demo is not a default part"
grep -q "^python3" "$c" && fail "two GPUs: symm is not a default part"
# 6. The cost part: the real binary shared, the variants that skip waits
# alone, the others shared, both algorithms each, outputs under $OUT; no MPS.
d="$tmp/cost"
make_tree "$d" 1
for v in bare no_waits no_fences; do
  mkdir -p "$d/.device/variants/$v"
  sed "s/^echo \"qr-kernel-cost/echo \"qr-kernel-cost-$v/" "$d/.device/bin/qr-kernel-cost" \
    >"$d/.device/variants/$v/qr-kernel-cost"
  chmod +x "$d/.device/variants/$v/qr-kernel-cost"
done
run "$d" QR_SUITE=cost QR_COST_ARGS="--reps 3" || { cat "$d/suite.log"; fail "cost: suite failed"; }
c="$d/calls.txt"
grep -q "^mps-" "$c" && fail "cost started MPS"
for algo in two-shot one-shot; do
  grep -q "^qr-kernel-cost shared=unset mps= --algorithm $algo --mode shared --csv $d/out/cost-real-$algo.csv --json $d/out/cost-real-$algo.json --reps 3$" "$c" ||
    { cat "$c"; fail "cost: real $algo not run shared with its outputs"; }
  for v in bare no_waits; do
    grep -q "^qr-kernel-cost-$v .* --algorithm $algo --mode alone --csv $d/out/cost-$v-$algo.csv" "$c" ||
      { cat "$c"; fail "cost: $v $algo not run alone"; }
  done
  grep -q "^qr-kernel-cost-no_fences .* --algorithm $algo --mode shared --csv $d/out/cost-no_fences-$algo.csv" "$c" ||
    { cat "$c"; fail "cost: no_fences $algo not run shared"; }
done
[[ $(grep -c "^qr-kernel-cost" "$c") -eq 8 ]] || { cat "$c"; fail "cost: not 8 runs"; }
grep -q "cost-bare-one-shot: rc=0" "$d/out/summary.txt" || fail "cost: summary lacks the parts"
run "$d" QR_SUITE=cost QR_COST_ALGOS=one-shot || fail "cost: QR_COST_ALGOS run failed"
[[ $(grep -c "^qr-kernel-cost.* --algorithm two-shot" "$c") -eq 4 ]] ||
  fail "cost: QR_COST_ALGOS=one-shot still ran two-shot"
# 7. The tma part: the bytes test, qr-kernel-cost --peer-store with its
# outputs on one GPU, and qr-bench's peer-store line only with two; no MPS.
d="$tmp/tma"
make_tree "$d" 1
run "$d" QR_SUITE=tma QR_TMA_CHUNKS=8K,16K || { cat "$d/suite.log"; fail "tma: suite failed"; }
c="$d/calls.txt"
grep -q "^mps-" "$c" && fail "tma started MPS"
grep -q "^peer_store_gpu_test shared=unset mps= --gtest_brief=1$" "$c" || { cat "$c"; fail "tma: no bytes test"; }
grep -q "^qr-kernel-cost shared=unset mps= --peer-store --peer-tma-chunks 8K,16K --csv $d/out/tma-cost.csv --json $d/out/tma-cost.json$" "$c" ||
  { cat "$c"; fail "tma: qr-kernel-cost not run with --peer-store and its outputs"; }
grep -q "^qr-bench" "$c" && fail "tma: qr-bench ran on one GPU"
d="$tmp/tma2"
make_tree "$d" 2
run "$d" QR_SUITE=tma || { cat "$d/suite.log"; fail "tma, two GPUs: suite failed"; }
grep -q "^qr-bench .*--peer-tma-chunks 4K,8K,16K,32K .*--no-nccl --json $d/out/tma-bench.json$" "$d/calls.txt" ||
  { cat "$d/calls.txt"; fail "tma, two GPUs: no qr-bench peer-store line"; }
grep -q "tma-bench: rc=0" "$d/out/summary.txt" || fail "tma: summary lacks tma-bench"
# The codec part runs the bytes test too.
d="$tmp/codec"
make_tree "$d" 1
run "$d" QR_SUITE=codec || { cat "$d/suite.log"; fail "codec: suite failed"; }
grep -q "^peer_store_gpu_test" "$d/calls.txt" || fail "codec: no peer_store_gpu_test"
# 7b. The collectives parts on one GPU: the LocalGroup test without MPS, the
# processes' test under MPS with the flag, then the two cost modes with
# their CSVs and QR_COLLECTIVES_COST_ARGS, MPS stopped before them.
d="$tmp/collectives"
make_tree "$d" 1
run "$d" QR_SUITE=collectives,collectives-backend,collectives-cost QR_COLLECTIVES_FILTER='*ws2*' \
  QR_COLLECTIVES_COST_ARGS="--reps 3" || { cat "$d/suite.log"; fail "collectives: suite failed"; }
c="$d/calls.txt"
grep -qx "collectives_gpu_test shared=unset mps= --gtest_brief=1 --gtest_filter=\*ws2\*" "$c" ||
  { cat "$c"; fail "collectives: the LocalGroup test not run alone with the filter"; }
grep -qx "collectives_backend_test shared=1 mps=on --broker=.device/bin/qr-broker --gtest_brief=1" "$c" ||
  { cat "$c"; fail "collectives: the backend test not run with the flag under MPS"; }
grep -qx "qr-kernel-cost shared=unset mps= --reduce-scatter --csv $d/out/rs-cost.csv --reps 3" "$c" ||
  { cat "$c"; fail "collectives-cost: no reduce-scatter run"; }
grep -qx "qr-kernel-cost shared=unset mps= --all-gather --csv $d/out/ag-cost.csv --reps 3" "$c" ||
  { cat "$c"; fail "collectives-cost: no all-gather run"; }
no_mps_left "$d"
for p in collectives collectives-backend rs-cost ag-cost; do
  grep -q "^$p: rc=0" "$d/out/summary.txt" || fail "collectives: the summary lacks $p"
done
# The fused-bench part: qr-bench --fused with its CSV on two GPUs, skipped
# (and the suite failing, as for bench) on one.
d="$tmp/fused-bench"
make_tree "$d" 2
run "$d" QR_SUITE=fused-bench QR_FUSED_BENCH_ARGS="--world-size 2" ||
  { cat "$d/suite.log"; fail "fused-bench: suite failed"; }
grep -q "^qr-bench .*--fused --csv $d/out/fused-bench.csv --world-size 2$" "$d/calls.txt" ||
  { cat "$d/calls.txt"; fail "fused-bench: qr-bench --fused not run with its CSV"; }
d="$tmp/fused-bench1"
make_tree "$d" 1
run "$d" QR_SUITE=fused-bench
grep -q "^qr-bench" "$d/calls.txt" && fail "fused-bench: qr-bench ran on one GPU"
grep -q "fused-bench: skipped" "$d/out/summary.txt" || fail "fused-bench: no skip on one GPU"
# 8. Parts by comma as by space; a name that is no part fails the suite.
d="$tmp/names"
make_tree "$d" 1
run "$d" QR_SUITE=codec,local || { cat "$d/suite.log"; fail "QR_SUITE=codec,local failed"; }
grep -q "^two_shot_local_test" "$d/calls.txt" || fail "QR_SUITE=codec,local ran no local part"
grep -q "^packed_codec_gpu_test" "$d/calls.txt" || fail "QR_SUITE=codec,local ran no codec part"
run "$d" QR_SUITE="local lcoal" && fail "an unknown part passed the suite"
grep -q "lcoal: no such part" "$d/out/summary.txt" || fail "the unknown part is not named"
# 8. The symm part on two GPUs: the torch bench with its outputs under $OUT,
# QR_SYMM_ARGS and a --timeout inside the part's limit, after qr-bench, then
# the join of bench.csv (here left as a bench run would) with symm.csv; no MPS.
d="$tmp/symm"
make_tree "$d" 2
mkdir -p "$d/out" && echo "bench rows" >"$d/out/bench.csv"
run "$d" QR_SUITE=bench,symm QR_SYMM_ARGS="--quick" || { cat "$d/suite.log"; fail "symm: suite failed"; }
c="$d/calls.txt"
order=$(grep -oE "^(qr-bench|python3 [a-z/_]+\.py)" "$c" | tr '\n' ' ')
[[ "$order" == "qr-bench python3 python/bench/symm_mem_bench.py python3 tools/qr_bench_join.py " ]] ||
  fail "bench,symm: not qr-bench, the torch bench, the join: $order"
grep -q "^mps-" "$c" && fail "symm started MPS"
grep -qx "python3 python/bench/symm_mem_bench.py --timeout 400 --csv $d/out/symm.csv --json $d/out/symm.json --quick" "$c" ||
  { cat "$c"; fail "symm: the torch bench not run with its outputs and QR_SYMM_ARGS"; }
grep -qx "python3 tools/qr_bench_join.py $d/out/bench.csv $d/out/symm.csv --out $d/out/symm_table.md" "$c" ||
  { cat "$c"; fail "symm: the join not run on bench.csv and symm.csv"; }
[[ -s "$d/out/symm_table.md" ]] || fail "symm: no table"
grep -q "symm: rc=0" "$d/out/summary.txt" && grep -q "symm-table: rc=0" "$d/out/summary.txt" ||
  fail "symm: the summary lacks the parts"
# A failing torch bench fails the suite; without bench.csv the table is
# skipped and says why.
rm "$d/out/bench.csv"
: >"$c"
run "$d" QR_SUITE=symm FAKE_FAIL=python3 && fail "a failing symm part passed the suite"
grep -q "symm: rc=3" "$d/out/summary.txt" || fail "symm: the failure is not in the summary"
grep -q "symm-table: skipped (no .*bench.csv: run the bench part first" "$d/out/summary.txt" ||
  fail "symm: no reason for the missing table"
[[ $(grep -c "^python3" "$c") -eq 1 ]] || fail "symm: the join ran without bench.csv"
# One GPU: skipped with the reason, not a failure, nothing run.
d="$tmp/symm1"
make_tree "$d" 1
run "$d" QR_SUITE=symm || { cat "$d/suite.log"; fail "symm on one GPU failed the suite"; }
grep -q "symm: skipped (torch symmetric memory .* one GPU per rank, 2 GPUs at least)" "$d/out/summary.txt" ||
  fail "symm on one GPU: no clear skip"
grep -q "^python3" "$d/calls.txt" && fail "symm ran on one GPU"
# 9. bench-modes on one GPU: qr-bench --launch per-gpu at world size 1 (no
# MPS, no flag) with the torch baseline, then 2 ranks sharing the GPU under
# MPS with the flag; MPS stops. On two GPUs: world size 1, then 2 with every
# baseline, no MPS.
d="$tmp/modes"
make_tree "$d" 1
run "$d" QR_SUITE=bench-modes || { cat "$d/suite.log"; fail "bench-modes: suite failed"; }
c="$d/calls.txt"
grep -q "^qr-bench shared=unset mps= --launch per-gpu --world-size 1 --torch-symm .* --csv $d/out/modes-ws1.csv --json $d/out/modes-ws1.json$" "$c" ||
  { cat "$c"; fail "bench-modes: no world-size-1 run with torch and its outputs"; }
grep -q "^qr-bench shared=1 mps=on --launch per-gpu --world-size 2 .* --csv $d/out/modes-shared.csv" "$c" ||
  { cat "$c"; fail "bench-modes: no shared world-size-2 run under MPS"; }
grep -q -- "--torch-symm.*modes-shared" "$c" && fail "bench-modes: torch asked for on a shared GPU"
[[ -f "$d/out/bench-modes-shared-broker.log" ]] || fail "bench-modes: no private broker"
no_mps_left "$d"
d="$tmp/modes2"
make_tree "$d" 2
run "$d" QR_SUITE=bench-modes || { cat "$d/suite.log"; fail "bench-modes, two GPUs: suite failed"; }
c="$d/calls.txt"
grep -q "^mps-" "$c" && fail "bench-modes, two GPUs: MPS started"
grep -q "^qr-bench shared=unset mps= --launch per-gpu --world-size 2 --torch-symm .* --csv $d/out/modes-ws2.csv" "$c" ||
  { cat "$c"; fail "bench-modes, two GPUs: no world-size-2 run"; }
grep -q "bench-modes-ws2: rc=0" "$d/out/summary.txt" || fail "bench-modes: summary lacks ws2"
# 10. A carried .device-pack (tools/gpu/pack.sh) replaces .device: the
# binaries run from the pack, not from a stale .device a warm machine kept.
d="$tmp/pack"
make_tree "$d" 1
(cd "$d" && mkdir -p .device-pack && tar -cJf .device-pack/device.tar.xz .device) || fail "pack"
rm -rf "$d/.device/bin"
mkdir -p "$d/.device/bin"
printf '#!/usr/bin/env bash\necho stale >>"%s/calls.txt"\nexit 1\n' "$d" >"$d/.device/bin/packed_codec_gpu_test"
chmod +x "$d/.device/bin/packed_codec_gpu_test"
run "$d" QR_SUITE=codec || { cat "$d/suite.log"; fail "pack: suite failed"; }
grep -q "^packed_codec_gpu_test shared=unset" "$d/calls.txt" || fail "pack: the packed binary did not run"
grep -q "^stale" "$d/calls.txt" && fail "pack: the stale .device ran"
echo "PASS"
