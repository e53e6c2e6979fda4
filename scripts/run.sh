#!/usr/bin/env bash
# Runs nccl-smoke on this machine under mpirun: on the real libraries when a CUDA driver is
# installed, else on the simulation (--backend sim), and says which.
#
#   NP=2 bash scripts/run.sh [run arguments…]
#
# NP       ranks to start (default 4); more ranks than cores is allowed (--oversubscribe).
# RESULTS  results file, when the arguments carry no --json of their own
#          (default results/run-<date>-<time>.json; results/ is made, and git ignores it).
# Every other argument goes to `nccl-smoke run` (see `nccl-smoke run --help`), e.g.
#   NP=2 bash scripts/run.sh -e 1M --patterns all_reduce --json before.json
# As root, Open MPI's refusal to run is lifted for this command only.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
bin=target/release/nccl-smoke
[ -x "$bin" ] || { echo "run.sh: $bin not built: run scripts/setup.sh" >&2; exit 2; }
np=${NP:-4}
[[ "$np" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: NP=$np is not a rank count (a positive integer)" >&2; exit 2; }
backend=()
if ! printf '%s\n' "$@" | grep -q -- '^--backend'; then
  if ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
    backend=(--backend nccl)
  else
    backend=(--backend sim)
    echo "run.sh: no CUDA driver library (libcuda.so.1) here: running the simulation (--backend sim)" >&2
  fi
fi
mkdir -p results   # git ignores it: a home for this script's results files
json=()
if ! printf '%s\n' "$@" | grep -q -- '^--json'; then
  results=${RESULTS:-results/run-$(date +%Y%m%d-%H%M%S).json}
  mkdir -p "$(dirname "$results")"
  json=(--json "$results")
  echo "run.sh: results file: $results" >&2
fi
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
exec mpirun --oversubscribe --bind-to none -np "$np" "$bin" run "${backend[@]}" "${json[@]}" "$@"
