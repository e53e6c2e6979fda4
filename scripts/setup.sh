#!/usr/bin/env bash
# Sets up a fresh Debian bookworm machine (as root) to build, run and test nccl-smoke.
# Idempotent: what is already there is left alone.
#   - build requirements: Open MPI (the `mpi` feature), libclang (bindgen, for mpi-sys)
#   - the real libnccl.so.2 from the PyPI wheel nvidia-nccl-cu12, unpacked into .deps/
#     (loads without a GPU and fails at CUDA init: a real failure for the tests to pin down)
#   - a release build of the harness and of the simulation libraries
set -euo pipefail
cd "$(dirname "$0")/.."

NCCL_WHEEL_VERSION=${NCCL_WHEEL_VERSION:-2.19.3}
packages=(libopenmpi-dev openmpi-bin libclang-dev pkg-config)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

wheel_dir=.deps/nccl-cu12
if [ ! -f "$wheel_dir/nvidia/nccl/lib/libnccl.so.2" ]; then
  echo "setup: fetching nvidia-nccl-cu12==$NCCL_WHEEL_VERSION"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download --no-deps --quiet -d "$tmp" "nvidia-nccl-cu12==$NCCL_WHEEL_VERSION"
  mkdir -p "$wheel_dir"
  python3 -m zipfile -e "$tmp"/nvidia_nccl_cu12-*.whl "$wheel_dir"
fi

echo "setup: building (release)"
cargo build --release --workspace
echo "setup: done — target/release/nccl-smoke, simulation libraries beside it"
