#!/usr/bin/env bash
# Time to verdict, as an operator waits for it: wall time of whole `nccl-smoke launch -n 2 run
# --backend sim` jobs, repeated, with min / median / max (seconds).
#   healthy    the default sweep, every pattern, to PASS
#   hung rank  rank 1 hangs in init (NCCL_SMOKE_SIM_FAULT=init@1:hang) under a 5 s init
#              deadline: also given as the time past the deadline
#
#   bash scripts/time-to-verdict.sh [RUNS]      (default RUNS: 5; needs a release build)
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
bin=${BIN:-${CARGO_TARGET_DIR:-target}/release/nccl-smoke}
[ -x "$bin" ] || { echo "time-to-verdict.sh: $bin not built (cargo build --release --workspace)" >&2; exit 2; }

# Prints "min median max" of the numbers on stdin.
stats() { sort -g | awk '{v[NR]=$1} END {m=(NR%2)?v[(NR+1)/2]:(v[NR/2]+v[NR/2+1])/2; printf "%.2f %.2f %.2f\n", v[1], m, v[NR]}'; }

measure() { # expected exit code, then the command
  local want=$1
  shift
  for _ in $(seq "$runs"); do
    local t0 t1 rc
    t0=$(date +%s.%N)
    "$@" >/dev/null 2>&1
    rc=$?
    t1=$(date +%s.%N)
    [ "$rc" = "$want" ] || { echo "time-to-verdict.sh: exit $rc, not $want: $*" >&2; exit 1; }
    awk "BEGIN { print $t1 - $t0 }"
  done
}

read -r a b c < <(measure 0 "$bin" launch -n 2 run --backend sim | stats)
echo "healthy 2-rank default run: min $a s, median $b s, max $c s over $runs runs"
deadline=5
read -r a b c < <(NCCL_SMOKE_SIM_FAULT=init@1:hang measure 16 "$bin" launch -n 2 run --backend sim \
  --stage-timeout init=$deadline | stats)
past() { awk "BEGIN { printf \"%.2f\", $1 - $deadline }"; }
echo "hung rank (init, deadline ${deadline} s): verdict after min $a s, median $b s, max $c s; past the deadline: $(past "$a"), $(past "$b"), $(past "$c") s"
