# nccl-smoke in a container image, for the manifests in deploy/k8s/ (MPIJob launcher and
# workers, TrainJob runtime, indexed Job).
#
#   docker build -t nccl-smoke .
#
# Two stages: the build (Rust, Open MPI headers, libclang for the MPI bindings), then a slim
# runtime with the installed tree (scripts/install.sh: bin/nccl-smoke and the simulation
# libraries for --backend sim), Open MPI and sshd (MPIJob workers and Trainer nodes are reached
# by mpirun over ssh). No NVIDIA library is in the image: the NVIDIA container toolkit mounts
# the node's driver (libcuda.so.1), and libnccl.so.2 comes from the node or from a layer you add
# (e.g. `pip install nvidia-nccl-cu12` in a derived image; nccl-smoke finds a pip wheel's copy,
# or take --nccl-lib PATH).
#
# The base images are build arguments, Docker Hub's by default. Where those cannot be pulled,
# or to ship a tree built on the host (same Debian release), scripts/image.sh builds with
#   --build-arg RUNTIME_IMAGE=<a local bookworm image> --build-arg TREE=prebuilt
# and a context whose prefix/ folder is `scripts/install.sh prefix`'s output.
ARG BUILD_IMAGE=rust:1-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim
ARG TREE=build
FROM ${BUILD_IMAGE} AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libopenmpi-dev openmpi-bin libclang-dev libibverbs-dev pkg-config \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --workspace \
 && bash scripts/install.sh /usr/local

# A tree installed on the host (TREE=prebuilt): the context's prefix/ folder.
FROM scratch AS prebuilt
COPY prefix/ /usr/local/

# Where the installed tree comes from: the build stage, or the host's.
FROM ${TREE} AS tree

FROM ${RUNTIME_IMAGE} AS runtime
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      openmpi-bin libopenmpi3 openssh-server openssh-client ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /run/sshd
# The operators mount the job's key pair and authorized_keys from a Secret into ~/.ssh, with no
# known_hosts: mpirun's ssh must not ask about (or record) host keys, and sshd must not refuse
# the Secret's file modes. The same three settings as kubeflow/mpi-operator's base image
# (build/base/Dockerfile).
RUN sed -i 's/^#\?[[:space:]]*StrictHostKeyChecking .*/    StrictHostKeyChecking no/' /etc/ssh/ssh_config \
 && echo '    UserKnownHostsFile /dev/null' >> /etc/ssh/ssh_config \
 && sed -i 's/^#\?StrictModes .*/StrictModes no/' /etc/ssh/sshd_config
# /usr/local/bin is on the PATH of the ssh sessions mpirun opens on workers too.
COPY --from=tree /usr/local/bin/nccl-smoke /usr/local/bin/nccl-smoke
COPY --from=tree /usr/local/lib/nccl-smoke /usr/local/lib/nccl-smoke
ENV OMPI_ALLOW_RUN_AS_ROOT=1 \
    OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    OMPI_MCA_coll_hcoll_enable=0
# The default command checks the node; `nccl-smoke run …` runs the test.
CMD ["nccl-smoke", "doctor"]
