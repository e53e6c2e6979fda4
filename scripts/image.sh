#!/usr/bin/env bash
# Builds the container image from this repository's Dockerfile with podman, on a machine where
# Docker Hub cannot be reached: the Debian bookworm base is made with debootstrap from the
# Debian archive this machine's apt uses, and the runtime stage takes the tree built here
# (scripts/install.sh), so the image holds exactly what the tests ran.
#
#   bash scripts/image.sh [TAG]     (default TAG: localhost/nccl-smoke:latest)
#
#   IMAGE_WORK=DIR   the work folder (default target/image): the base's tarball is cached there
#                    (debootstrap once, ~25 s), with the build context and podman's settings
#   IMAGE_WHEEL=VER  also build TAG-nccl<VER>: the image plus the real libnccl.so.2 of the
#                    nvidia-nccl-cu12 wheel VER unpacked by scripts/setup.sh (.deps/nccl/VER)
#
# Needs root, podman, runc and debootstrap (scripts/setup.sh installs them) and a release build
# (`cargo build --release --workspace`). Containers run with runc and no default ulimits (the
# settings in $IMAGE_WORK/containers.conf; export CONTAINERS_CONF to use them with podman run).
# Elsewhere, `docker build .` uses Docker Hub's images and compiles in the build stage.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
esac
tag=${1:-localhost/nccl-smoke:latest}
work=${IMAGE_WORK:-target/image}
base=localhost/nccl-smoke-base:bookworm
for tool in podman runc debootstrap; do
  command -v "$tool" >/dev/null || { echo "image.sh: $tool not found: run scripts/setup.sh" >&2; exit 2; }
done
mkdir -p "$work"
work=$(cd "$work" && pwd)
printf '[containers]\ndefault_ulimits = []\n[engine]\nruntime = "runc"\n' >"$work/containers.conf"
export CONTAINERS_CONF=$work/containers.conf

# The base: debootstrap's minimal bookworm from the archive apt uses, cached as a tarball.
if ! podman image exists "$base"; then
  if [ ! -s "$work/bookworm.tar" ]; then
    mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    mirror=${mirror:-http://deb.debian.org/debian}
    echo "image.sh: debootstrap bookworm from $mirror"
    rm -rf "$work/rootfs"
    debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
      { tail -5 "$work/debootstrap.log" >&2; exit 1; }
    tar -C "$work/rootfs" -cf "$work/bookworm.tar.tmp" .
    mv "$work/bookworm.tar.tmp" "$work/bookworm.tar"
    rm -rf "$work/rootfs"
  fi
  podman import "$work/bookworm.tar" "$base" >/dev/null
fi

# The context: the Dockerfile's prebuilt stage copies prefix/.
rm -rf "$work/context"
mkdir -p "$work/context"
bash scripts/install.sh "$work/context/prefix" >/dev/null
podman build --network=host --quiet -f Dockerfile \
  --build-arg RUNTIME_IMAGE="$base" --build-arg TREE=prebuilt \
  -t "$tag" "$work/context" >/dev/null
echo "image.sh: built $tag"

if [ -n "${IMAGE_WHEEL:-}" ]; then
  lib=.deps/nccl/$IMAGE_WHEEL/nvidia/nccl/lib/libnccl.so.2
  [ -f "$lib" ] || { echo "image.sh: $lib missing: run scripts/setup.sh" >&2; exit 2; }
  mkdir -p "$work/context-nccl"
  cp "$lib" "$work/context-nccl/libnccl.so.2"
  # The wheel's library where pip would put it; nccl-smoke finds it by --nccl-lib or NCCL_LIB.
  printf 'FROM %s\nCOPY libnccl.so.2 /opt/nccl/lib/libnccl.so.2\nENV NCCL_SMOKE_NCCL_LIB=/opt/nccl/lib/libnccl.so.2\n' "$tag" \
    >"$work/context-nccl/Dockerfile"
  podman build --network=host --quiet -t "$tag-nccl$IMAGE_WHEEL" "$work/context-nccl" >/dev/null
  echo "image.sh: built $tag-nccl$IMAGE_WHEEL"
fi
