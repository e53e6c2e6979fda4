#!/usr/bin/env bash
# Installs the release build under a prefix, for this node or for shipping to cluster nodes:
#
#   bash scripts/install.sh [PREFIX]        (default PREFIX: /usr/local)
#
#   PREFIX/bin/nccl-smoke
#   PREFIX/lib/nccl-smoke/libnccl.so.2      the simulation (used only by --backend sim)
#   PREFIX/lib/nccl-smoke/libcuda.so.1
#   PREFIX/lib/nccl-smoke/libnvidia-ml.so.1 with libcuda.so.1, the stand-ins that host the real
#                                           libnccl for --backend control-plane
#
# nccl-smoke finds the simulation libraries at ../lib/nccl-smoke beside its own binary, so the
# PREFIX folder can be copied as a whole to any node (same OS/glibc) or into a container image.
# The real backend needs nothing from PREFIX/lib: it loads the node's libnccl.so.2 and driver.
# Build first (scripts/setup.sh or `cargo build --release --workspace`).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
prefix=${1:-/usr/local}
rel=${CARGO_TARGET_DIR:-target}/release
for f in nccl-smoke libnccl.so libcuda.so libnvidia_ml.so; do
  [ -f "$rel/$f" ] || { echo "install.sh: $rel/$f not built: run cargo build --release --workspace" >&2; exit 2; }
done
install -d "$prefix/bin" "$prefix/lib/nccl-smoke"
install -m 0755 "$rel/nccl-smoke" "$prefix/bin/nccl-smoke"
install -m 0755 "$rel/libnccl.so" "$prefix/lib/nccl-smoke/libnccl.so.2"
install -m 0755 "$rel/libcuda.so" "$prefix/lib/nccl-smoke/libcuda.so.1"
install -m 0755 "$rel/libnvidia_ml.so" "$prefix/lib/nccl-smoke/libnvidia-ml.so.1"
echo "install.sh: installed $prefix/bin/nccl-smoke and the simulation in $prefix/lib/nccl-smoke/"
case ":$PATH:" in
  *":$prefix/bin:"*) ;;
  *) echo "install.sh: $prefix/bin is not on PATH: export PATH=\"$prefix/bin:\$PATH\"" ;;
esac
