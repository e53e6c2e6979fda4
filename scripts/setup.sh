#!/usr/bin/env bash
# Sets up a fresh Debian bookworm machine (as root) to build, run and test nccl-smoke.
# Idempotent: what is already there is left alone.
#   - build requirements: Open MPI (the `mpi` feature), libclang (bindgen, for mpi-sys and for
#     the libibverbs stand-in, whose C types come from rdma-core's <infiniband/verbs.h> in
#     libibverbs-dev);
#     rsvg-convert (librsvg2-bin) for the test that renders compare's plot to PNG
#   - Slurm and munge (slurm-wlm, munge) for tests/slurm.rs, which starts a single-node cluster
#     of its own with scripts/slurm/cluster.sh (this script configures none); libpmix-dev
#     because Slurm's PMIx plugin (srun --mpi=pmix) loads the unversioned pmix2/lib/libpmix.so,
#     which only the -dev package ships
#   - podman, runc and debootstrap for scripts/image.sh (the container image, built from a
#     debootstrap base) and tests/mpijob.rs (the MPIJob rehearsal), ssh-keygen for its key pair
#   - the real libnccl.so.2 from the PyPI wheel nvidia-nccl-cu12, four supported releases from
#     the oldest to the newest (NCCL_WHEEL_VERSIONS="2.19.3 2.23.4 2.28.9 2.32.3"), unpacked
#     into .deps/nccl/<version>/ (each loads without a GPU and fails at CUDA init: a real failure
#     for the tests to pin down; on the stand-in driver, tests/control_plane.rs runs its whole
#     control plane); a release already unpacked is not fetched again
#   - promtool (from Debian's prometheus package, unpacked only) to check --prometheus files
#   - a release build of the harness and of the simulation libraries, and one of the harness
#     without MPI
set -euo pipefail
cd "$(dirname "$0")/.."

# Real NCCL releases to test against: the oldest and the newest supported and two between
# (2.23: lazy connect and its own non-blocking and abort behaviour; 2.28: native all-to-all).
NCCL_WHEEL_VERSIONS=${NCCL_WHEEL_VERSIONS:-2.19.3 2.23.4 2.28.9 2.32.3}
packages=(libopenmpi-dev openmpi-bin libclang-dev libibverbs-dev pkg-config librsvg2-bin slurm-wlm munge libpmix-dev
  podman runc debootstrap openssh-client)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Each release unpacks into .deps/nccl/<version>/ (nvidia/nccl/lib/libnccl.so.2 inside);
# .deps/nccl-cu12 points at the first one listed.
first=
for v in $NCCL_WHEEL_VERSIONS; do
  dir=.deps/nccl/$v
  first=${first:-$dir}
  [ -f "$dir/nvidia/nccl/lib/libnccl.so.2" ] && continue
  echo "setup: fetching nvidia-nccl-cu12==$v"
  tmp=$(mktemp -d)
  python3 -m pip download --no-deps --quiet -d "$tmp" "nvidia-nccl-cu12==$v"
  mkdir -p "$dir"
  python3 -m zipfile -e "$tmp"/nvidia_nccl_cu12-*.whl "$dir"
  rm -rf "$tmp"
done
if [ -n "$first" ]; then
  rm -rf .deps/nccl-cu12
  ln -s "nccl/${first#.deps/nccl/}" .deps/nccl-cu12
fi

# ptxas, to check the PTX of nccl-smoke's kernels for several GPU architectures (tests/ptx.rs):
# the CUDA 12.9 nvcc wheel ships it; only that file is unpacked.
PTXAS_WHEEL=${PTXAS_WHEEL:-nvidia-cuda-nvcc-cu12==12.9.86}
ptxas=.deps/cuda-nvcc/bin/ptxas
if [ ! -x "$ptxas" ]; then
  echo "setup: fetching $PTXAS_WHEEL (ptxas)"
  tmp=$(mktemp -d)
  python3 -m pip download --no-deps --quiet -d "$tmp" "$PTXAS_WHEEL"
  mkdir -p "$(dirname "$ptxas")"
  python3 - "$tmp" "$ptxas" <<'PY'
import glob, shutil, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/nvidia_cuda_nvcc_cu12-*.whl")[0]
with zipfile.ZipFile(wheel) as z, z.open("nvidia/cuda_nvcc/bin/ptxas") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
  chmod +x "$ptxas"
  rm -rf "$tmp"
fi

# promtool, Prometheus' own checker, for the --prometheus file (tests/exports.rs): taken out of
# Debian's prometheus package, which is unpacked, not installed (no server, no service).
promtool=.deps/prometheus/usr/bin/promtool
if [ ! -x "$promtool" ]; then
  echo "setup: fetching promtool (Debian's prometheus package)"
  tmp=$(mktemp -d)
  (cd "$tmp" && { apt-get download -qq prometheus 2>/dev/null ||
    { apt-get update -qq && apt-get download -qq prometheus 2>/dev/null; }; })
  mkdir -p .deps/prometheus
  dpkg -x "$tmp"/prometheus_*.deb "$tmp/x"
  install -D -m 755 "$tmp/x/usr/bin/promtool" "$promtool"
  rm -rf "$tmp"
fi

echo "setup: building (release)"
cargo build --release --workspace
# The same binary without the `mpi` feature (ranks from launcher variables over nccl-smoke's
# own TCP rendezvous; tests/launchers.rs runs it).
echo "setup: building without MPI (target/no-mpi)"
cargo build --release --no-default-features -p nccl-smoke --bin nccl-smoke \
  --target-dir "${CARGO_TARGET_DIR:-target}/no-mpi"
echo "setup: done — target/release/nccl-smoke, simulation libraries beside it"
