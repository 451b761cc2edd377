#!/usr/bin/env bash
# Packs .device (tools/gpu/stage.sh, python/tests/gpu/stage.sh) into
# .device-pack/device.tar.xz, which the device tool carries (its limit is
# 64 MiB; .device is about 140 MiB, the tarball about 18 MiB):
#   run(command="bash tools/gpu/run_suite.sh", carry=[".device-pack"])
# tools/gpu/unpack.sh (sourced by the scripts that run there) restores it,
# replacing .device there: pack after staging everything the call needs
# (the corpus of python/examples/gpu_model_quality.sh too).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
mkdir -p .device-pack
tar -cf - .device | xz -6 -T0 > .device-pack/device.tar.xz.new
mv .device-pack/device.tar.xz.new .device-pack/device.tar.xz
du -sh .device .device-pack/device.tar.xz
if (($(du -sk .device-pack | cut -f1) > 64 * 1024)); then
  echo "pack.sh: .device-pack is over the 64 MiB the device tool carries; stage fewer targets" >&2
  exit 1
fi
