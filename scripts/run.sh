#!/usr/bin/env bash
# Runs nccl-smoke on this machine under mpirun (NP ranks, default 4): on the real libraries
# when a CUDA driver is installed, else on the simulation. Extra arguments go to `run`.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=target/release/nccl-smoke
[ -x "$bin" ] || { echo "run.sh: $bin not built: run scripts/setup.sh" >&2; exit 2; }
backend=nccl
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
  backend=sim
  echo "run.sh: no CUDA driver library (libcuda.so.1) here: running the simulation (--backend sim)" >&2
fi
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
exec mpirun --oversubscribe --bind-to none -np "${NP:-4}" "$bin" run --backend "$backend" --json results.json "$@"
