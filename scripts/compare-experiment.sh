#!/usr/bin/env bash
# Does `compare` cry wolf? PAIRS pairs of healthy simulated 2-rank runs with --repeat REPEAT and
# the default sweep, each pair compared; then the first run of each pair against a run whose
# rank 1 has a link slowed SLOW times (NCCL_SMOKE_SIM_FAULT=net@1:slow=SLOW). Prints the count
# of each verdict for both, and keeps the files in OUT (default: a new temporary folder).
#   PAIRS=20 REPEAT=5 SLOW=1.5 scripts/compare-experiment.sh
# THRESHOLD (default 5) is compare's --threshold; BIND (default none) is mpirun's --bind-to.
# JUDGE_ONLY=1 OUT=DIR re-judges the files an earlier call left in DIR (e.g. after a change to
# `compare`) without running anything.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BIN:-target/release/nccl-smoke}
[ -x "$bin" ] || { echo "compare-experiment: $bin not built" >&2; exit 2; }
PAIRS=${PAIRS:-20} REPEAT=${REPEAT:-5} SLOW=${SLOW:-1.5} THRESHOLD=${THRESHOLD:-5} BIND=${BIND:-none}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
run() { # run FILE [FAULT]
  local fault=${2:-}
  [ -n "${JUDGE_ONLY:-}" ] && return 0
  NCCL_SMOKE_SIM_FAULT=$fault mpirun --oversubscribe --bind-to "$BIND" -np 2 -x NCCL_SMOKE_SIM_FAULT \
    ${NCCL_SMOKE_SIM_DIR:+-x NCCL_SMOKE_SIM_DIR} "$bin" run --backend sim --repeat "$REPEAT" --json "$1" >"$1.out" 2>&1 ||
    { echo "compare-experiment: run for $1 failed, see $1.out" >&2; exit 1; }
}
verdict() { # verdict BEFORE AFTER -> the verdict's first word(s)
  local rc=0
  "$bin" compare --threshold "$THRESHOLD" "$1" "$2" >"$2.compare" 2>&1 || rc=$?
  case $rc in
    0) echo "NO_REGRESSION" ;; 30) echo "REGRESSED" ;; 33) echo "INCONCLUSIVE" ;;
    *) echo "compare-experiment: compare exited $rc, see $2.compare" >&2; exit 1 ;;
  esac
}
declare -A healthy=() slowed=()
for i in $(seq 1 "$PAIRS"); do
  run "$out/a$i.json"
  run "$out/b$i.json"
  run "$out/s$i.json" "net@1:slow=$SLOW"
  h=$(verdict "$out/a$i.json" "$out/b$i.json")
  s=$(verdict "$out/a$i.json" "$out/s$i.json")
  healthy[$h]=$(( ${healthy[$h]:-0} + 1 ))
  slowed[$s]=$(( ${slowed[$s]:-0} + 1 ))
  echo "pair $i: healthy $h, slowed $s" >&2
done
for v in REGRESSED INCONCLUSIVE NO_REGRESSION; do
  echo "healthy $v ${healthy[$v]:-0}"
done
for v in REGRESSED INCONCLUSIVE NO_REGRESSION; do
  echo "slowed $v ${slowed[$v]:-0}"
done
echo "files: $out" >&2
