# Sourced on the GPU machine (from the repository root) by the scripts that
# run staged binaries there: where .device-pack/device.tar.xz was carried
# (tools/gpu/pack.sh), it replaces .device (a warm machine keeps the last
# call's .device, which may be older than the pack).
if [[ -f .device-pack/device.tar.xz ]]; then
  rm -rf .device
  tar -xJf .device-pack/device.tar.xz || { echo "unpack.sh: could not unpack .device-pack" >&2; exit 1; }
fi
