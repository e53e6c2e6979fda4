#!/usr/bin/env bash
# How nccl-smoke's simulated runs scale from 2 to 16 ranks on one host: wall time of the whole
# job and all_reduce's bus bandwidth at 1 MiB (the median of 3 repeats), per rank count, as a
# table on stdout and a CSV (ranks,wall_s,busbw_gbs,time_us) for the plot
# (`cargo run --release --example scaling_plot -- CSV SVG`).
#
#   bash scripts/scaling.sh [CSV]      (default CSV: results/scaling.csv; needs a release build)
set -uo pipefail
cd "$(dirname "$0")/.."
csv=${1:-results/scaling.csv}
bin=${BIN:-${CARGO_TARGET_DIR:-target}/release/nccl-smoke}
[ -x "$bin" ] || { echo "scaling.sh: $bin not built (cargo build --release --workspace)" >&2; exit 2; }
mkdir -p "$(dirname "$csv")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "ranks,wall_s,busbw_gbs,time_us" >"$csv"
printf '%6s %10s %12s %12s\n' ranks "wall (s)" "busbw GB/s" "time (us)"
for n in 2 4 8 16; do
  t0=$(date +%s.%N)
  "$bin" launch -n "$n" run --backend sim --patterns all_reduce -b 1M -e 1M -n 20 -w 5 --repeat 3 \
    --json "$tmp/$n.json" >/dev/null 2>&1 || { echo "scaling.sh: the $n-rank run failed" >&2; exit 1; }
  t1=$(date +%s.%N)
  row=$(python3 -c 'import json,sys
r=json.load(open(sys.argv[1]))["results"][0]
print(r["busbw_gbs"], r["time_us"]["avg"])' "$tmp/$n.json")
  wall=$(awk "BEGIN { printf \"%.2f\", $t1 - $t0 }")
  set -- $row
  echo "$n,$wall,$1,$2" >>"$csv"
  printf '%6s %10s %12.3f %12.1f\n' "$n" "$wall" "$1" "$2"
done
echo "scaling.sh: $csv"
