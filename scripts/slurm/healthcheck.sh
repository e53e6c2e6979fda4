#!/usr/bin/env bash
# nccl-smoke as Slurm's HealthCheckProgram: every GPU of this node, one rank each, inside the
# 60 s slurmd gives the program (slurm.conf(5): it is killed if it has not ended by then).
# A node that fails is drained with nccl-smoke's verdict as the reason; a node this script
# drained earlier is resumed once it passes (a drain with any other reason is left alone).
#
#   slurm.conf:
#     HealthCheckProgram=/usr/local/sbin/nccl-smoke-healthcheck
#     HealthCheckInterval=3600
#     HealthCheckNodeState=IDLE        # only nodes without jobs: the check uses every GPU
#
# Environment (slurmd runs the program as root, with little of a login environment):
#   NCCL_SMOKE        the binary (default: nccl-smoke on PATH)
#   NCCL_SMOKE_BUDGET the run's --budget (default 45s: slurmd's 60 s, less slack for the
#                     launch and the drain); sizes that would not fit are dropped and named
#   NCCL_SMOKE_ARGS   more arguments for `nccl-smoke run`, split on spaces (e.g. "--patterns
#                     all_reduce -e 1G", or "--backend sim" to try the script without GPUs)
#   NCCL_SMOKE_DIR    where the last run's output, results and kept NCCL logs go (default
#                     /var/lib/nccl-smoke)
#   NCCL_SMOKE_PROM   a --prometheus file for node-exporter's textfile collector (e.g.
#                     /var/lib/node_exporter/textfile_collector/nccl_smoke.prom); unset: none
#   NCCL_SMOKE_GPUS   the number of ranks (default: the GPUs nvidia-smi -L lists)
#   NODE              the node's Slurm name (default: hostname -s)
#
# Exit code: 0 when the node passed, else nccl-smoke's verdict code (see README.md), or 1 when
# no GPU is visible.
set -uo pipefail

bin=${NCCL_SMOKE:-nccl-smoke}
budget=${NCCL_SMOKE_BUDGET:-45s}
dir=${NCCL_SMOKE_DIR:-/var/lib/nccl-smoke}
node=${NODE:-$(hostname -s)}
# Every reason this script sets begins so; only such a drain is lifted by a pass.
mark="nccl-smoke:"

drain() {
  # Slurm keeps a reason in one line; the verdict can be long.
  scontrol update NodeName="$node" State=DRAIN Reason="$mark ${1:0:200}"
}

resume_if_ours() {
  local reason
  reason=$(scontrol show node "$node" 2>/dev/null | sed -n 's/^ *Reason=\(.*\)/\1/p')
  case $reason in
    "$mark"*) scontrol update NodeName="$node" State=RESUME ;;
  esac
}

gpus=${NCCL_SMOKE_GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')}
if [ "${gpus:-0}" -lt 1 ]; then
  drain "no GPU visible (nvidia-smi -L lists none)"
  exit 1
fi
mkdir -p "$dir"
read -r -a extra <<<"${NCCL_SMOKE_ARGS:-}"
args=(launch -n "$gpus" run --budget "$budget" --json "$dir/last.json" --logs "$dir" "${extra[@]}")
[ -n "${NCCL_SMOKE_PROM:-}" ] && args+=(--prometheus "$NCCL_SMOKE_PROM")
"$bin" "${args[@]}" >"$dir/last.txt" 2>&1
code=$?
if [ "$code" = 0 ]; then
  resume_if_ours
  exit 0
fi
# The job's one VERDICT line, else the last line that ends a run without one.
verdict=$(grep '^VERDICT: ' "$dir/last.txt" | tail -n 1)
[ -n "$verdict" ] || verdict=$(grep -E '^(FAIL|UNVERIFIED|BELOW FLOOR|CANCELLED)' "$dir/last.txt" | tail -n 1)
drain "exit $code: ${verdict:-no verdict (see $dir/last.txt)}"
exit "$code"
