#!/usr/bin/env bash
# qr-bench --launch per-gpu end to end where there is no GPU (CI): the real
# launcher starts the real workers, they agree over the side channel that a
# rank has no GPU, and the run ends at once with exit 1 and every output
# written (the JSON says why); bad flags and an unwritable output stop it
# before any worker starts. Skips on a machine with a GPU (there the bench
# would run for real: tools/gpu/run_suite.sh's bench-modes part).
set -uo pipefail
bench="$PWD/tools/qr-bench"
tmp=$(mktemp -d /tmp/qr-bench-launch-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIP: a GPU is present"
  exit 0
fi

cd "$tmp"
start=$SECONDS
timeout 120 "$bench" --launch per-gpu --world-size 2 --quick --csv b.csv --json b.json \
  >out.txt 2>err.txt
rc=$?
cat err.txt
[[ $rc -eq 1 ]] || fail "no GPU: exit $rc, not 1"
((SECONDS - start < 60)) || fail "the failed run took $((SECONDS - start)) s"
grep -q -- "--launch per-gpu: 2 worker processes" err.txt || fail "no workers started"
grep -q "workers exited with 1 1" err.txt || fail "both workers did not exit 1"
python3 - <<'PY' || fail "the JSON does not say why"
import json
h = json.load(open("b.json"))["header"]
assert h["world_size"] == 2, h
assert any("no GPU" in f for f in h["failures"]), h["failures"]
assert any("no peer-store bandwidth" in n for n in h["notes"]), h["notes"]
PY
[[ "$(head -1 b.csv)" == bytes,dtype,mode,algo,regime,us,* ]] || fail "no CSV header"
dir=$(grep -o "/tmp/qr-bench\.[A-Za-z0-9]*" err.txt | head -1)
[[ -n "$dir" && ! -e "$dir" ]] || fail "the launcher's directory $dir is left"

# Flags: world size 1 needs per-gpu; an unwritable output stops the launcher.
"$bench" --world-size 1 >/dev/null 2>err.txt
[[ $? -eq 2 ]] && grep -q "needs --launch per-gpu" err.txt || fail "--world-size 1 alone accepted"
"$bench" --launch per-gpu --world-size 1 --csv "$tmp/no/such/dir/b.csv" >/dev/null 2>err.txt
[[ $? -eq 2 ]] || fail "an unwritable --csv did not exit 2"
grep -q "worker processes" err.txt && fail "workers started despite an unwritable output"
echo "PASS"
