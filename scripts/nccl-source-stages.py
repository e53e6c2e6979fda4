#!/usr/bin/env python3
"""Map every NCCL source file that prints a WARN to the stage and subsystem `explain` names.

Usage: nccl-source-stages.py NCCL_GIT_DIR > src/diagnose/classify/nccl-sources.tsv

NCCL_GIT_DIR is a clone of github.com/NVIDIA/nccl (bare or not). Every release tag from v2.4 on
(`v2.MINOR.PATCH-BUILD`) is read: each file under `src/` that calls `WARN(` gets one row with
the stage and subsystem of the rules below and the first and last tag it prints from. NCCL
prints that path (relative to `src/`) in every WARN line's prefix (`transport/shm.cc:114 NCCL
WARN …`, `src/debug.cc` since v2.4), so the table places a WARN line no phrase names.

The rules are the one hand-written part: a new release whose WARN file no rule matches stops
the script with that file's name, and a new rule is one line. The subsystem is the id of the
location signature in `src/diagnose/classify/locations.rs` that carries the cause and hint;
`tests/nccl_sources.rs` checks that every row names one and that its stage agrees.
"""
import re
import subprocess
import sys

# (path regex relative to src/, stage, subsystem). First match wins; order from specific to
# general. Each names the NCCL code it places (paths as of the tags named).
RULES = [
    # Windows ports (2.30): the same transports on another OS.
    (r'^os/windows_(ipcsocket|socket_pair)\.cc$', 'connect:proxy', 'loc-ipc-socket'),
    (r'^os/windows_socket', 'connect:net', 'loc-net-socket'),
    (r'^os/windows', 'init', 'loc-os'),
    # Handle passing between local ranks over Unix-domain sockets (cuMem / IPC handles).
    (r'^(misc/ipcsocket|os/linux_ipcsocket|os/linux_socket_pair)\.cc$', 'connect:proxy', 'loc-ipc-socket'),
    (r'^os/', 'init', 'loc-os'),
    # Bootstrap: the ranks find each other through the root's socket.
    (r'^bootstrap\.(cc|cu)$', 'init', 'loc-bootstrap'),
    # P2P transport: CUDA IPC / cuMem import of a peer's buffer on the same host.
    (r'^transport/p2p\.(cc|cu)$', 'connect:buffer-import', 'loc-p2p'),
    # Shared-memory transport and its /dev/shm or cuMem-host segments.
    (r'^(transport/shm\.(cc|cu)|misc/shmutils\.cc|include/shm\.h)$', 'connect:shm', 'loc-shm'),
    # NVLink SHARP.
    (r'^transport/nvls\.(cc|cu)$', 'init', 'loc-nvls'),
    # InfiniBand / RoCE verbs (net_ib.cc; split into transport/net_ib/ in 2.29), GPU-initiated
    # networking over verbs (gdaki), and the libibverbs / mlx5dv loaders.
    (r'^transport/net_ib', 'connect:net', 'loc-net-ib'),
    (r'^(transport/gdaki/|misc/ibv|misc/mlx5dv|include/ibvwrap\.h)', 'connect:net', 'loc-net-ib'),
    # Socket transport and NCCL's socket layer.
    (r'^(transport/net_socket\.(cc|cu)|misc/socket\.cc|include/socket\.h)$', 'connect:net', 'loc-net-socket'),
    # The net transport, CollNet, net / GIN / RMA plugins and their proxies.
    (r'^(transport/net\.(cc|cu)|transport/coll_net\.cc|net\.cc|plugin/(net|gin|rma)|gin/|rma/)', 'connect:net', 'loc-net'),
    # GDRCopy.
    (r'^(misc/gdrwrap\.cc|include/gdrwrap\.h)$', 'connect:net', 'loc-gdr'),
    # The proxy thread and service.
    (r'^proxy\.(cc|cu)$', 'connect:proxy', 'loc-proxy'),
    # CUDA driver and NVML loaders.
    (r'^(misc/cudawrap\.cc|misc/nvmlwrap\.(cc|cu)|include/cudawrap\.h|include/nvmlwrap\.h)$', 'driver', 'loc-cuda'),
    # Memory NCCL allocates for itself.
    (r'^(include/alloc\.h|allocator\.cc|mem_manager\.cc)$', 'alloc', 'loc-alloc'),
    # Topology detection, XML, paths, rings, trees and tuning (graph/ since 2.4; misc/topo and
    # misc/rings before it).
    (r'^(graph/|misc/topo\.cc|misc/rings\.(cc|cu)|include/topo\.h)', 'init', 'loc-topology'),
    # Enqueueing and launching operations; the copy-engine collectives; symmetric kernels'
    # scheduler.
    (r'^(enqueue\.(cc|cu)|ce_coll\.cc|scheduler/|device/)', 'run', 'loc-run'),
    # RAS (2.24+).
    (r'^ras/', 'run', 'ras-warning'),
    # Communicator setup, groups, argument checks, registration, device runtime, plugins that
    # are not the network's, parameters, debug output and the generic check macros.
    (r'^(init\.(cc|cu)|group\.cc|misc/group\.(cc|cu)|misc/argcheck\.cc|transport\.cc|channel\.cc'
     r'|register(\.cc|/)|dev_runtime|devcomm/|mnnvl\.cc|misc/tuner\.cc|misc/profiler\.cc'
     r'|plugin/(profiler|tuner)|misc/strongstream\.cc|misc/utils\.(cc|cu)|misc/checks\.cu|debug\.cc'
     r'|include/(checks|core|debug|utils)\.h|include/param/|param/|collectives\.cc)', 'init', 'loc-init'),
]

WARN = re.compile(r'(^|[^A-Za-z_])WARN\s*\(')
TAG = re.compile(r'^v2\.(\d+)\.(\d+)-(\d+)$')


def git(repo, *args):
    return subprocess.run(['git', '-C', repo, *args], check=True, capture_output=True, text=True).stdout


def tags(repo):
    out = []
    for t in git(repo, 'tag').split():
        m = TAG.match(t)
        if m and int(m.group(1)) >= 4:
            out.append((tuple(int(x) for x in m.groups()), t))
    return [t for _, t in sorted(out)]


def warn_files(repo, tag):
    """Source files under src/ of one tag that call WARN(, relative to src/."""
    r = subprocess.run(['git', '-C', repo, 'grep', '-l', '-E', r'(^|[^A-Za-z_])WARN *\(', tag, '--', 'src'],
                       capture_output=True, text=True)
    files = []
    for line in r.stdout.splitlines():
        path = line.split(':', 1)[1]
        if path.endswith('.py') or path.endswith('.md'):
            continue  # code generators and documents print nothing themselves
        files.append(path[len('src/'):])
    return files


def rule(path):
    for pat, stage, sub in RULES:
        if re.search(pat, path):
            return stage, sub
    return None


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    repo = sys.argv[1]
    seen = {}  # path -> [first, last, stage, sub]
    unmapped = set()
    read = tags(repo)
    for t in read:
        for p in warn_files(repo, t):
            r = rule(p)
            if r is None:
                unmapped.add(p)
                continue
            row = seen.setdefault(p, [t, t, *r])
            row[1] = t
    if unmapped:
        sys.exit('no rule for: ' + ' '.join(sorted(unmapped)))
    print('# NCCL source files that print a WARN, from tag v2.4 on: path (relative to src/), stage, subsystem,')
    print('# first and last tag. Generated by scripts/nccl-source-stages.py from NVIDIA/nccl; do not edit.')
    print('# tags read: ' + ' '.join(read))
    for p in sorted(seen):
        first, last, stage, sub = seen[p]
        print(f'{p}\t{stage}\t{sub}\t{first}\t{last}')


if __name__ == '__main__':
    main()
