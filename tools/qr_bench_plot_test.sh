#!/usr/bin/env bash
# Smoke test of tools/qr_bench_plot.py on the report fixture (a copy of the
# JSON that bench_report_test writes from its synthetic timings): one PNG per
# dtype in the fixture, each a real PNG, with and without the torch lines
# (--symm, the join's fixture). Skips (passes, saying so) where matplotlib is
# not installed, as on CI machines.
set -euo pipefail
script="tools/qr_bench_plot.py"
fixture="tools/testdata/qr_bench_fixture.json"
symm="tools/testdata/qr_bench_join_symm.csv"
out="${TEST_TMPDIR:-$(mktemp -d)}/plots"
mkdir -p "$out"

# Debian's interpreter has python3-matplotlib even when PATH's python3 (pyenv) lacks it.
py=python3
for candidate in python3 /usr/bin/python3; do
  if "$candidate" -c 'import matplotlib' 2>/dev/null; then py="$candidate"; break; fi
done
if ! "$py" -c 'import matplotlib' 2>/dev/null; then
  echo "SKIP: matplotlib is not installed (apt-get install -y python3-matplotlib)"
  # The script must still say so clearly and fail.
  if "$py" "$script" "$fixture" --out-dir "$out" 2>"$out/err.txt"; then
    echo "FAIL: the script succeeded without matplotlib"; exit 1
  fi
  grep -q "matplotlib is missing" "$out/err.txt" || { echo "FAIL: no clear message"; cat "$out/err.txt"; exit 1; }
  exit 0
fi

"$py" "$script" "$fixture" --out-dir "$out"
for dtype in fp16 bf16; do
  png="$out/bench_${dtype}.png"
  [[ -s "$png" ]] || { echo "FAIL: $png missing"; exit 1; }
  head -c 8 "$png" | od -An -tx1 | grep -q "89 50 4e 47 0d 0a 1a 0a" ||
    { echo "FAIL: $png is not a PNG"; exit 1; }
done
# The torch symmetric-memory lines: the same PNGs, different pictures.
"$py" "$script" "$fixture" --symm "$symm" --out-dir "$out/symm"
for dtype in fp16 bf16; do
  png="$out/symm/bench_${dtype}.png"
  [[ -s "$png" ]] || { echo "FAIL: $png missing"; exit 1; }
  cmp -s "$png" "$out/bench_${dtype}.png" && { echo "FAIL: --symm drew nothing in $png"; exit 1; }
done
# A file that is not symm_mem_bench's CSV is an error that says so.
if "$py" "$script" "$fixture" --symm "$fixture" --out-dir "$out/symm" 2>"$out/err.txt"; then
  echo "FAIL: accepted a --symm that is not a CSV of torch rows"; exit 1
fi
grep -q "no column" "$out/err.txt" || { echo "FAIL: no clear --symm message"; cat "$out/err.txt"; exit 1; }
# The fixture has no bf16cast rows: no empty plot for it.
[[ ! -e "$out/bench_bf16cast.png" ]] || { echo "FAIL: empty bf16cast plot written"; exit 1; }
# A file that is not a report is an error, not a crash.
echo '{' >"$out/bad.json"
if "$py" "$script" "$out/bad.json" --out-dir "$out" 2>/dev/null; then
  echo "FAIL: accepted a broken JSON"; exit 1
fi
echo "PASS"
