#!/usr/bin/env bash
# Several "hosts" on one machine, for multi-host tests without a cluster: each host is a network
# namespace with its own address and (under `exec`) its own host name, all plugged into one
# bridge in a switch namespace. Links can be cut while a job runs.
#
#   scripts/netns/cluster.sh up     NAME N       # NAME-sw (the bridge) and hosts NAME-h1..NAME-hN
#   scripts/netns/cluster.sh down   NAME         # delete every namespace of NAME (safe to repeat)
#   scripts/netns/cluster.sh addr   NAME I       # host I's address
#   scripts/netns/cluster.sh exec   NAME I CMD…  # run CMD on host I, host name hI
#   scripts/netns/cluster.sh cut    NAME I       # unplug host I: its frames are dropped silently
#   scripts/netns/cluster.sh cut-pair NAME I J   # only hosts I and J lose each other (silently)
#   scripts/netns/cluster.sh heal   NAME I       # plug host I back in
#
# Addresses come from 10.231.K.0/24, K chosen from NAME (so clusters of different names can
# live side by side); host I has 10.231.K.I, on interface `eth0` (so NCCL_SOCKET_IFNAME=eth0
# names it). A cut unplugs the host's cable at the switch (the switch's port goes down): packets
# vanish without an error, as when a cable or a switch port dies. A pair cut gives each of the
# two hosts a permanent neighbour entry for the other with a MAC nobody owns, so their frames to
# each other go nowhere while both still reach everyone else. No netem, iptables or nftables
# needed. Needs root (CAP_NET_ADMIN) and iproute2.
set -euo pipefail

usage() {
  sed -n '6,12p' "$0" | sed 's/^# //' >&2
  exit 2
}
(($# >= 2)) || usage
cmd=$1
name=$2
shift 2
[[ $name =~ ^[a-z][a-z0-9]{0,7}$ ]] || {
  echo "cluster.sh: NAME must be 1-8 lower-case letters or digits, starting with a letter (got '$name')" >&2
  exit 2
}

# 10.231.K: K from the name's checksum, 1..254.
subnet() {
  local k
  k=$(printf '%s' "$name" | cksum | cut -d' ' -f1)
  echo "10.231.$((k % 254 + 1))"
}

host_ns() { echo "$name-h$1"; }
sw_ns() { echo "$name-sw"; }

need_index() {
  [[ ${1:-} =~ ^[1-9][0-9]?$ ]] || {
    echo "cluster.sh: host index must be 1-99 (got '${1:-}')" >&2
    exit 2
  }
}

case $cmd in
up)
  n=${1:-}
  [[ $n =~ ^[1-9][0-9]?$ ]] || {
    echo "cluster.sh: up needs a host count 1-99" >&2
    exit 2
  }
  net=$(subnet)
  sw=$(sw_ns)
  ip netns add "$sw"
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  for i in $(seq 1 "$n"); do
    ns=$(host_ns "$i")
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip link add eth0 netns "$ns" type veth peer name "p$i" netns "$sw"
    ip -n "$sw" link set "p$i" master br0
    ip -n "$sw" link set "p$i" up
    ip -n "$ns" addr add "$net.$i/24" dev eth0
    ip -n "$ns" link set eth0 up
  done
  ;;
down)
  for ns in $(ip netns list | awk '{print $1}'); do
    case $ns in "$name"-sw | "$name"-h[0-9]*) ip netns del "$ns" ;; esac
  done
  ;;
addr)
  need_index "${1:-}"
  echo "$(subnet).$1"
  ;;
exec)
  need_index "${1:-}"
  i=$1
  shift
  (($# > 0)) || usage
  exec ip netns exec "$(host_ns "$i")" unshare --uts sh -c 'hostname "$0" && exec "$@"' "h$i" "$@"
  ;;
cut)
  need_index "${1:-}"
  ip -n "$(sw_ns)" link set "p$1" down
  ;;
heal)
  need_index "${1:-}"
  ip -n "$(sw_ns)" link set "p$1" up
  ;;
cut-pair)
  need_index "${1:-}"
  need_index "${2:-}"
  net=$(subnet)
  ip -n "$(host_ns "$1")" neigh replace "$net.$2" lladdr 02:00:00:00:de:ad dev eth0 nud permanent
  ip -n "$(host_ns "$2")" neigh replace "$net.$1" lladdr 02:00:00:00:de:ad dev eth0 nud permanent
  ;;
*) usage ;;
esac
