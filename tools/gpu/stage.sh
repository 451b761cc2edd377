#!/usr/bin/env bash
# Builds the GPU test and benchmark binaries HERE (CUDA flavour, optimised,
# project code linked statically, static cudart) and stages them, with the
# shared libraries they need that the GPU machine lacks, in .device/ (ignored
# by git). Then, with the device tool:
#   run(command="bash tools/gpu/run_suite.sh", carry=[".device"], kind="nvidia-h200-x2")
# See docs/gpu-testing.md.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

targets=(
  //tests/gpu:two_shot_local_test
  //tests/gpu:collectives_gpu_test
  //tests/gpu:collectives_backend_test
  //tests/gpu:fused_gpu_test
  //tests/gpu:fp8_gpu_test
  //tests/gpu:fused_backend_test
  //tests/gpu:packed_codec_gpu_test
  //tests/gpu:packed_cast_gpu_test
  //tests/gpu:peer_store_gpu_test
  //tests/gpu:gpu_backend_test
  //tests/gpu:gpu_api_gpu_test
  //tests/gpu:one_visible_gpu_test
  //ipc/broker:qr-broker
  //tools:qr-bench
  //tools:qr-demo
  //tools:qr-kernel-cost
  //tests/reliability:qr-reliability
)
# QR_STAGE_TARGETS replaces the list (space-separated labels), to stay under
# the 64 MiB the device tool carries when only some parts will run, e.g.
#   QR_STAGE_TARGETS="//tests/gpu:collectives_gpu_test //tests/gpu:collectives_backend_test
#     //ipc/broker:qr-broker //tools:qr-kernel-cost"
# shellcheck disable=SC2206
[[ -n "${QR_STAGE_TARGETS:-}" ]] && targets=(${QR_STAGE_TARGETS})
# QR_STAGE_BAZEL_FLAGS adds build flags, e.g. "--define qr_two_shot_sync=data_flag"
# (INT4/INT8 with data as its own flag, kernels/gpu/two_shot.h).
# shellcheck disable=SC2206
flags=(-c opt --dynamic_mode=off ${QR_STAGE_BAZEL_FLAGS:-})
./bazelw build "${flags[@]}" "${targets[@]}"
bin=$(./bazelw info "${flags[@]}" bazel-bin 2>/dev/null)

rm -rf .device
mkdir -p .device/bin .device/lib
for t in "${targets[@]}"; do
  path="${t#//}"
  path="${path/://}"
  cp "$bin/$path" .device/bin/
done

# Carry Debian-only shared libraries (spdlog, fmt, ...); the machine has
# libstdc++/libc/libm of its own.
for b in .device/bin/*; do
  ldd "$b" | awk '/=> \// {print $3}' | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libstdc++.so*|libgcc_s.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*) ;;
      *) cp -L -n "$lib" .device/lib/ ;;
    esac
  done
done
# Timing variants of qr-bench and qr-kernel-cost (docs/performance.md):
# QR_STAGE_VARIANTS="bare no_waits no_fences" builds each into
# .device/variants/<name>/; QR_STAGE_VARIANTS=1 means all three. The last
# build leaves the output base in the variant's configuration; the next plain
# build recompiles what the define touches.
variants="${QR_STAGE_VARIANTS:-}"
[[ "$variants" == 1 ]] && variants="bare no_waits no_fences"
variant_targets=(//tools:qr-bench //tools:qr-kernel-cost)
for v in $variants; do
  ./bazelw build "${flags[@]}" --define "qr_two_shot_variant=$v" "${variant_targets[@]}"
  mkdir -p ".device/variants/$v"
  for t in "${variant_targets[@]}"; do cp "$bin/tools/${t#//tools:}" ".device/variants/$v/"; done
done

chmod -R u+w .device
du -sh .device
# The device tool carries at most 64 MiB, and the GPU binaries alone are
# about 140 MiB (mostly their kernels' fatbins, which compress about 8x):
# .device-pack/device.tar.xz holds all of .device (python/tests/gpu/stage.sh
# packs again with its files), and run_suite.sh / python/tests/gpu/run.sh
# unpack it where .device is missing. Carry .device-pack instead of .device.
tools/gpu/pack.sh
ls -l .device/bin .device/lib
