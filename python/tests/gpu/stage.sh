#!/usr/bin/env bash
# Stages what python/tests/gpu/run.sh needs on the GPU machine into
# .device/python (beside tools/gpu/stage.sh's .device/bin; run this one after
# it): libquickreduce.so in the CUDA flavour, optimised, qr-broker, qrctl and
# the C loop of the overhead measurement. Then, with the device tool:
#   run(command="bash python/tests/gpu/run.sh", carry=[".device"], kind="nvidia-h200")
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
targets=(//comm:libquickreduce.so //ipc/broker:qr-broker //tools:qrctl //python/bench:qr_call_loop)
flags=(-c opt --dynamic_mode=off)  # as tools/gpu/stage.sh: the same cache entries
./bazelw build "${flags[@]}" "${targets[@]}"
bin=$(./bazelw info "${flags[@]}" bazel-bin 2>/dev/null)
rm -rf .device/python
mkdir -p .device/python
cp "$bin/comm/libquickreduce.so" "$bin/ipc/broker/qr-broker" "$bin/tools/qrctl" \
  "$bin/python/bench/qr_call_loop" .device/python/
chmod -R u+w .device/python
# Nothing beyond libc/libstdc++ may be needed there (qr_call_loop finds the
# staged libquickreduce.so through overhead.py's LD_LIBRARY_PATH).
for f in .device/python/*; do
  if ldd "$f" | grep -v 'libquickreduce\.so' | grep -E 'spdlog|fmt|not found'; then echo "stage.sh: $f needs the above" >&2; exit 1; fi
done
ls -l .device/python
# Pack again with these files (tools/gpu/pack.sh: carry .device-pack).
tools/gpu/pack.sh
