#!/usr/bin/env bash
# A throw-away single-node Slurm cluster, for trying nccl-smoke under srun and sbatch on one
# machine (tests/slurm.rs uses it).
#
#   scripts/slurm/cluster.sh start  DIR   # start munged, slurmctld, slurmd; wait for the node
#   scripts/slurm/cluster.sh status DIR   # say what runs; exit 0 when the node is up
#   scripts/slurm/cluster.sh stop   DIR   # cancel its jobs, stop the daemons it started
#
# Everything lives in DIR (made if missing): slurm.conf, a munge key and socket of its own,
# state and spool folders, logs (DIR/log/) and PID files (DIR/run/). Nothing outside DIR is
# written and no system daemon is touched: munged here is a private one (its own key, its own
# socket, named in slurm.conf by AuthInfo), so a munged the machine already runs is left alone.
# Point Slurm's commands at the cluster with `export SLURM_CONF=DIR/slurm.conf`.
#
# The node is this machine (`hostname -s`), declaring SLURM_SMOKE_CPUS CPUs (default 4,
# whatever the machine has: SlurmdParameters=config_overrides) and SLURM_SMOKE_GPUS stand-in GPUs
# (default: as many as CPUs; see write_conf), in one partition `smoke` with
# OverSubscribe=FORCE; MpiDefault=pmix. Ports are chosen free at start. `start` waits up to
# SLURM_SMOKE_START_TIMEOUT seconds (default 30) for the node to be idle, else prints the tail of
# every log, stops what it started and exits 1. `stop` stops each daemon by the PID it recorded
# (TERM, then KILL after SLURM_SMOKE_STOP_GRACE seconds, default 5), after checking that the PID
# still names that daemon of this DIR. Both are safe to repeat.
#
# Needs slurm-wlm and munge (scripts/setup.sh installs them); run as root, as the test suite
# does (slurmd must be able to start the job as its user).
set -euo pipefail

usage() {
  echo "usage: $0 start|stop|status DIR" >&2
  exit 2
}
(($# == 2)) || usage
cmd=$1
dir=$2
case $cmd in start | stop | status) ;; *) usage ;; esac

START_TIMEOUT=${SLURM_SMOKE_START_TIMEOUT:-30}
STOP_GRACE=${SLURM_SMOKE_STOP_GRACE:-5}
CPUS=${SLURM_SMOKE_CPUS:-4}
GPUS=${SLURM_SMOKE_GPUS:-$CPUS}
DAEMONS=(slurmd slurmctld munged) # the order they are stopped in

PATH=$PATH:/usr/sbin:/sbin # the daemons, for a caller whose PATH lacks them
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
conf=$dir/slurm.conf
export SLURM_CONF=$conf
node=$(hostname -s)

say() { echo "cluster: $*" >&2; }

# The recorded PID of daemon $1 when it is alive and still that daemon of this DIR (its command
# line names this DIR), else nothing.
live_pid() {
  local f=$dir/run/$1.pid pid args
  [ -f "$f" ] || return 0
  pid=$(<"$f")
  [[ $pid =~ ^[0-9]+$ ]] || return 0
  args=$({ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null) || return 0
  [[ $args == *"$1"* && $args == *"$dir/"* ]] && echo "$pid"
  return 0
}

node_state() {
  timeout 10 sinfo -h -n "$node" -o %T 2>/dev/null | head -1 || true
}

logs_tail() {
  local f
  for f in "$dir"/log/*; do
    [ -s "$f" ] || continue
    echo "----- $f (last 20 lines) -----" >&2
    tail -n 20 "$f" >&2
  done
}

# A TCP port nothing listens on, from a range clear of the usual ephemeral ones.
free_port() {
  local p tries
  for tries in $(seq 50); do
    p=$((20000 + RANDOM % 10000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return
    fi
  done
  say "no free TCP port found"
  exit 1
}

# Starts `$@` as daemon $name in a session of its own (so a signal to the caller's process
# group does not reach it), output to DIR/log/$name.out, and records its PID.
launch() {
  local name=$1
  shift
  setsid "$@" </dev/null >"$dir/log/$name.out" 2>&1 &
  echo $! >"$dir/run/$name.pid"
}

write_conf() {
  local ctld_port slurmd_port
  ctld_port=$(free_port)
  slurmd_port=$(free_port)
  while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port=$(free_port); done
  cat >"$conf" <<EOF
# Written by scripts/slurm/cluster.sh: a single-node test cluster, everything under this folder.
ClusterName=smoke
SlurmctldHost=$node
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$(id -un)
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.daemon.pid
SlurmdPidFile=$dir/run/slurmd.daemon.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
MpiDefault=pmix
GresTypes=gpu
SwitchType=switch/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MailProg=/bin/true
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=60
NodeName=$node NodeAddr=127.0.0.1 CPUs=$CPUS Gres=gpu:$GPUS State=UNKNOWN
PartitionName=smoke Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
EOF
  # Stand-in GPUs (slurmd drops a GPU without a File=): empty files DIR/gpu/gpuN, enough for
  # --gpus-per-task and --gres=gpu:N to be granted (they are not devices: Slurm sets no
  # CUDA_VISIBLE_DEVICES for them, and the simulation shows its own GPUs).
  mkdir -p "$dir/gpu"
  local i
  for ((i = 0; i < GPUS; i++)); do : >"$dir/gpu/gpu$i"; done
  echo "NodeName=$node Name=gpu File=$dir/gpu/gpu[0-$((GPUS - 1))]" >"$dir/gres.conf"
}

require() {
  local b missing=()
  for b in munged munge slurmctld slurmd sinfo srun sbatch scancel squeue; do
    command -v "$b" >/dev/null || missing+=("$b")
  done
  if ((${#missing[@]})); then
    say "missing ${missing[*]}: install slurm-wlm and munge (scripts/setup.sh does)"
    exit 1
  fi
}

start() {
  require
  if [ -n "$(live_pid slurmctld)" ] && [ -n "$(live_pid slurmd)" ]; then
    say "already running in $dir"
  else
    stop_daemons # whatever is left of an earlier start
    mkdir -p "$dir"/{log,run,state,spool,munge}
    chmod 700 "$dir/munge"
    # slurmctld refuses a state folder written for another cluster: start from an empty one.
    find "$dir/state" "$dir/spool" -mindepth 1 -delete
    if [ ! -s "$dir/munge/munge.key" ]; then
      (umask 077 && head -c 1024 /dev/urandom >"$dir/munge/munge.key")
    fi
    write_conf
    # --force: munged wants every folder above its socket open to all; this socket is only
    # for this user's daemons and commands.
    launch munged munged --foreground --force --key-file="$dir/munge/munge.key" \
      --socket="$dir/munge/munge.socket" --pid-file="$dir/munge/munged.pid" \
      --seed-file="$dir/munge/munged.seed" --log-file="$dir/log/munged.log"
    local i
    for i in $(seq 50); do
      [ -S "$dir/munge/munge.socket" ] && break
      sleep 0.1
    done
    launch slurmctld slurmctld -D -f "$conf"
    launch slurmd slurmd -D -f "$conf"
  fi
  local deadline=$((SECONDS + START_TIMEOUT)) state=
  while ((SECONDS < deadline)); do
    state=$(node_state)
    case $state in idle* | mixed* | allocated*)
      say "node $node $state (SLURM_CONF=$conf)"
      return 0
      ;;
    esac
    for d in "${DAEMONS[@]}"; do
      if [ -z "$(live_pid "$d")" ]; then
        say "$d exited during start"
        logs_tail
        stop_daemons
        exit 1
      fi
    done
    sleep 0.2
  done
  say "node $node not idle after ${START_TIMEOUT}s (state: ${state:-unknown})"
  logs_tail
  stop_daemons
  exit 1
}

# Stops each recorded daemon that still runs: TERM, then KILL after the grace period.
stop_daemons() {
  local d pid i
  for d in "${DAEMONS[@]}"; do
    pid=$(live_pid "$d")
    if [ -n "$pid" ]; then
      kill -TERM "$pid" 2>/dev/null || true
      for i in $(seq $((STOP_GRACE * 10))); do
        [ -z "$(live_pid "$d")" ] && break
        sleep 0.1
      done
      if [ -n "$(live_pid "$d")" ]; then
        say "$d (pid $pid) ignored TERM; killing it"
        kill -KILL "$pid" 2>/dev/null || true
        for i in $(seq 20); do
          [ -z "$(live_pid "$d")" ] && break
          sleep 0.1
        done
      fi
      say "stopped $d (pid $pid)"
    fi
    rm -f "$dir/run/$d.pid"
  done
}

stop() {
  if [ -n "$(live_pid slurmctld)" ]; then
    # Jobs first, so no task (slurmstepd and what it started) outlives slurmd.
    timeout 10 scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
    local i
    for i in $(seq 50); do
      [ -z "$(timeout 5 squeue -h -o %i 2>/dev/null)" ] && break
      sleep 0.2
    done
  fi
  stop_daemons
}

status() {
  local d pid up=0
  for d in munged slurmctld slurmd; do
    pid=$(live_pid "$d")
    if [ -n "$pid" ]; then
      echo "$d: running (pid $pid)"
    else
      echo "$d: not running"
      up=1
    fi
  done
  if ((up == 0)); then
    echo "node $node: $(node_state)"
    echo "SLURM_CONF=$conf"
  fi
  return $up
}

"$cmd"
