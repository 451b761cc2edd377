# NVIDIA MPS for ranks of several processes sharing one GPU, sourced by every
# script that runs them on the GPU machine (tools/gpu/run_suite.sh,
# python/tests/gpu/run.sh, python/examples/gpu_tp_run.sh). Without MPS the
# ranks' contexts are time-sliced and every flag hop waits for a context
# switch (docs/gpu-testing.md).
#   source tools/gpu/mps.sh
#   trap 'mps_stop "$out"' EXIT     # every exit path, including a kill
#   mps_start || exit 1             # idempotent; exports CUDA_MPS_*_DIRECTORY
# The control daemon is one per machine: a second `-d` only says "An
# instance of this daemon is already running". One left behind by a killed
# run (its clients gone) is quit first, through the pipe directory in its
# environment; then ours starts with a fresh pipe directory.

mps_dir=""
mps_ctl=""
mps_pid=""

mps_start() {
  [[ -n "$mps_dir" ]] && return 0
  mps_ctl=$(command -v nvidia-cuda-mps-control || echo /usr/local/nvidia/bin/nvidia-cuda-mps-control)
  if [[ ! -x "$mps_ctl" ]]; then
    echo "=== MPS: nvidia-cuda-mps-control not found"
    return 1
  fi
  mps_quit_stale
  mps_dir=$(mktemp -d /tmp/qr-mps.XXXXXX)
  export CUDA_MPS_PIPE_DIRECTORY="$mps_dir/pipe" CUDA_MPS_LOG_DIRECTORY="$mps_dir/log"
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if ! "$mps_ctl" -d; then
    echo "=== MPS: the control daemon did not start"
    mps_stop
    return 1
  fi
  sleep 0.2
  mps_pid=$(cat "$CUDA_MPS_PIPE_DIRECTORY/nvidia-cuda-mps-control.pid" 2>/dev/null || true)
  echo "=== MPS: control daemon ${mps_pid:+$mps_pid }started (pipes in $CUDA_MPS_PIPE_DIRECTORY)"
}

mps_quit_stale() {
  local pid pipe
  for pid in $(pgrep -x nvidia-cuda-mps-control || true); do
    pipe=$(tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | sed -n 's/^CUDA_MPS_PIPE_DIRECTORY=//p')
    pipe=${pipe:-/tmp/nvidia-mps}
    echo "=== MPS: quitting a control daemon left running (pid $pid, pipes in $pipe)"
    echo quit | CUDA_MPS_PIPE_DIRECTORY="$pipe" "$mps_ctl"
    for _ in $(seq 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -0 "$pid" 2>/dev/null && { echo "=== MPS: pid $pid did not quit; killing it"; kill -9 "$pid"; }
  done
  return 0
}

# mps_stop [dir]: quits the daemon (if this shell started one), waits for it,
# and copies its logs into dir as mps-*.log.
mps_stop() {
  [[ -z "$mps_dir" ]] && return 0
  echo quit | "$mps_ctl"
  # quit waits for the clients and the servers; wait for the daemon itself,
  # up to 10 s.
  if [[ -n "$mps_pid" ]]; then
    for _ in $(seq 100); do
      kill -0 "$mps_pid" 2>/dev/null || break
      sleep 0.1
    done
  fi
  if [[ -n "${1:-}" ]]; then
    for f in "$CUDA_MPS_LOG_DIRECTORY"/*.log; do
      [[ -f "$f" ]] && cp "$f" "$1/mps-$(basename "$f")"
    done
  fi
  echo "=== MPS: stopped"
  rm -rf "$mps_dir"
  mps_dir=""
  mps_pid=""
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
}
