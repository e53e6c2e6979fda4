#!/usr/bin/env bash
# Whether the same fault gives the same verdict, run after run: each simulated fault of a
# stage, on one rank and on every rank, repeated under mpirun; per case, how many runs printed
# exactly one `VERDICT:` line and how many distinct verdicts (stage and ranks named) came out.
#
#   bash scripts/verdict-determinism.sh [RUNS] [NP...]   (default: 5 runs, 4 ranks)
#   STAGES="init run" bash scripts/verdict-determinism.sh 20 2 3 4
#   KINDS="error hang crash" STAGES=launch bash scripts/verdict-determinism.sh 20 2 3 4
#
# KINDS: the fault kinds tried at each stage (default: error; verify's is always corrupt).
#
# Prints one tab-separated row per case: fault, ranks, runs, runs with one VERDICT line,
# distinct verdicts, and the verdicts with their counts. Needs a release build with MPI.
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
shift || true
nps=${*:-4}
bin=${BIN:-${CARGO_TARGET_DIR:-target}/release/nccl-smoke}
[ -x "$bin" ] || { echo "verdict-determinism.sh: $bin not built (cargo build --release --workspace)" >&2; exit 2; }
stages=${STAGES:-driver device alloc unique-id init import proxy shm net run verify finalize}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,tcp
# The simulation's run faults strike at this operation, after some sizes are measured.
export NCCL_SMOKE_SIM_RUN_FAULT_OP=120

kinds=${KINDS:-error}
kinds_of() { [ "$1" = verify ] && echo corrupt || echo "$kinds"; }

printf 'fault\tranks\truns\tone VERDICT\tdistinct\tverdicts\n'
for np in $nps; do
  for stage in $stages; do
   for kind in $(kinds_of "$stage"); do
    last=$((np - 1))
    # unique-id is rank 0's alone
    targets="@$last: :"
    [ "$stage" = unique-id ] && targets="@0:"
    for at in $targets; do
      fault="$stage${at%:}:$kind"
      [ "$at" = ":" ] && fault="$stage:$kind"
      one=0
      verdicts=()
      for _ in $(seq "$runs"); do
        out=$(NCCL_SMOKE_SIM_FAULT=$fault timeout 120 mpirun --oversubscribe --bind-to none \
          -np "$np" "$bin" run --backend sim -e 64K -n 3 -w 1 --timeout 4 2>/dev/null)
        n=$(grep -c '^VERDICT: ' <<<"$out")
        [ "$n" -eq 1 ] && one=$((one + 1))
        # The verdict's head: its word, stage and the ranks it names.
        v=$(grep '^VERDICT: ' <<<"$out" | tail -n 1 | sed -E 's/^VERDICT: (\[[^]]*\] )?//; s/ \(host.*//')
        verdicts+=("${v:-none}")
      done
      summary=$(printf '%s\n' "${verdicts[@]}" | sort | uniq -c | sort -rn |
        awk '{c=$1; $1=""; sub(/^ /, ""); printf "%s%d× %s", (NR>1 ? "; " : ""), c, $0}')
      distinct=$(printf '%s\n' "${verdicts[@]}" | sort -u | wc -l)
      printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$fault" "$np" "$runs" "$one" "$distinct" "$summary"
    done
   done
  done
done
