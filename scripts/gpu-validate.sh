#!/usr/bin/env bash
# nccl-smoke beside nccl-tests on this machine's GPUs, with the machine's own libnccl: the same
# patterns and sizes (8 B to 1 GiB), and a side-by-side table per pattern. For a GPU machine
# without internet access: nothing here downloads anything.
#
#   bash scripts/gpu-validate.sh [OUT]          (default OUT: gpu-validate)
#
#   BIN=PATH              nccl-smoke (default: target/release/nccl-smoke, else on PATH); a build
#                         without MPI (`cargo build --release --no-default-features`) needs no MPI
#                         on the GPU machine
#   NCCL_SMOKE_NCCL_LIB   the libnccl.so.2 to use (default: the dynamic linker's, else a pip
#                         wheel's in the active python's site-packages)
#   NCCL_TESTS_SRC=DIR    an NVIDIA/nccl-tests source tree; built here (`make`, with MPI=1 when
#                         mpicc and mpirun are found, else MPI=0) with nvcc
#                         against the same libnccl (its include/ beside lib/, as the pip wheel
#                         and the NCCL packages have it)
#   MAXBYTES=1G           the largest size (nccl-tests' -e syntax)
#   NCCL_TESTS_BIN=DIR    nccl-tests programs already built (all_reduce_perf, alltoall_perf,
#                         sendrecv_perf, all_gather_perf, reduce_scatter_perf, broadcast_perf,
#                         reduce_perf, gather_perf, scatter_perf; one missing there is said in
#                         the summary and skipped): no build, no nvcc
#   PAIRS="…"             the nccl-tests programs and nccl-smoke patterns compared, as
#                         program:pattern (default: all nine)
#   NCCL_TESTS_LAUNCH=    how nccl-tests is started: `mpirun` (one process per GPU, `-g 1`, as
#                         nccl-smoke runs one rank per GPU; needs an MPI build of nccl-tests)
#                         or `threads` (one process driving every GPU, `-g N`). Default: mpirun
#                         when this script builds nccl-tests with MPI (mpicc and mpirun found),
#                         else threads. On one GPU the two are the same launch.
#   MPIRUN="mpirun …"     the launcher for `mpirun` (as root, Open MPI's --allow-run-as-root is
#                         added)
#   SMOKE_BACKEND=sim     nccl-smoke on its simulation instead of the GPUs, to try the script
#                         where there are none: the tables then set CPU figures beside the
#                         GPU's, which says nothing of either
#
# In OUT: nccl-smoke.json and .txt (all patterns, every GPU, through `nccl-smoke launch`),
# <test>.txt for each nccl-tests program, side-by-side.<pattern>.txt (`nccl-smoke compare`,
# nccl-tests first: the change column is nccl-smoke's bus bandwidth against nccl-tests', and
# the time columns give the latency difference at small sizes), summary.txt (one line per
# pattern: the bus bandwidth ratio at the largest size, the 8 B time difference, both
# verdicts), and, on a one-GPU machine, the two-ranks-on-one-GPU run where the NCCL release
# allows it.
#
# Exit codes:
#   0   both sides ran and were compared
#   2   bad usage, or nccl-smoke itself not found
#   40  no NVIDIA driver (nvidia-smi missing or failing, no libcuda.so.1)
#   41  no libnccl.so.2 found
#   42  nccl-smoke's run failed (its own exit code is in nccl-smoke.txt)
#   43  no nvcc, or NCCL_TESTS_SRC unset (and no NCCL_TESTS_BIN): nccl-smoke ran, nothing to
#       compare it with
#   44  nccl-tests did not build or run
set -uo pipefail
case "${1:-}" in
  -h | --help)
    sed -n '2,48p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
  -*)
    echo "gpu-validate.sh: unknown option $1 (see --help)" >&2
    exit 2
    ;;
esac
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-gpu-validate}
maxbytes=${MAXBYTES:-1G}
say() { echo "gpu-validate: $*"; }
die() {
  local code=$1
  shift
  echo "gpu-validate: $*" >&2
  exit "$code"
}

bin=${BIN:-$here/target/release/nccl-smoke}
[ -x "$bin" ] || bin=$(command -v nccl-smoke || true)
[ -n "$bin" ] && [ -x "$bin" ] || die 2 "nccl-smoke not found: build it (cargo build --release) or set BIN=PATH"

# 1. The driver.
if ! command -v nvidia-smi >/dev/null 2>&1; then
  libcuda=$(ldconfig -p 2>/dev/null | grep -m1 'libcuda\.so\.1 ' || true)
  die 40 "no NVIDIA driver here: nvidia-smi is not on PATH${libcuda:+ (but $libcuda exists)}${libcuda:- and the dynamic linker knows no libcuda.so.1}. This script needs a machine with NVIDIA GPUs and their driver."
fi
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
[ "${gpus:-0}" -ge 1 ] || die 40 "nvidia-smi lists no GPU ($(nvidia-smi -L 2>&1 | head -1))"
say "$gpus GPU(s): $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"

# 2. The library (none needed on the simulation).
backend=${SMOKE_BACKEND:-}
case "$backend" in
  "" | sim) ;;
  *) die 2 "SMOKE_BACKEND='$backend': only 'sim' (or unset: the GPUs)" ;;
esac
lib=${NCCL_SMOKE_NCCL_LIB:-}
if [ -z "$lib" ]; then
  lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 /{print $NF; exit}')
fi
if [ -z "$lib" ]; then
  for py in python3 python; do
    command -v "$py" >/dev/null 2>&1 || continue
    lib=$("$py" -c 'import glob,site,sys
for d in site.getsitepackages()+[site.getusersitepackages()]:
    for f in glob.glob(d+"/nvidia/nccl/lib/libnccl.so.2"): print(f); sys.exit()' 2>/dev/null)
    [ -n "$lib" ] && break
  done
fi
if [ "$backend" = sim ]; then
  smoke_lib=(--backend sim)
  mixed=(--mixed-backends)
  say "nccl-smoke on its simulation (SMOKE_BACKEND=sim): CPU figures, not the GPUs'"
else
  [ -n "$lib" ] && [ -e "$lib" ] || die 41 "no libnccl.so.2: not known to the dynamic linker, not in a pip wheel (nvidia-nccl-cu12/-cu13) of the active python; set NCCL_SMOKE_NCCL_LIB=PATH"
  say "libnccl: $lib"
  smoke_lib=(--nccl-lib "$lib")
  mixed=()
fi
mkdir -p "$out"

# 3. nccl-smoke on every GPU: one rank per GPU.
pairs=${PAIRS:-all_reduce_perf:all_reduce alltoall_perf:all_to_all sendrecv_perf:send_recv_ring \
all_gather_perf:all_gather reduce_scatter_perf:reduce_scatter broadcast_perf:broadcast \
reduce_perf:reduce gather_perf:gather scatter_perf:scatter}
patterns=$(for pair in $pairs; do printf '%s,' "${pair#*:}"; done)
patterns=${patterns%,}
say "nccl-smoke: $gpus rank(s), $patterns, 8 B to $maxbytes"
"$bin" launch -n "$gpus" run "${smoke_lib[@]}" -b 8 -e "$maxbytes" -f 2 --patterns "$patterns" \
  --json "$out/nccl-smoke.json" >"$out/nccl-smoke.txt" 2>&1
rc=$?
verdict() { grep -E '^(VERDICT: |PASS|FAIL at |\[SIMULATED\] )' "$1" | tail -n 1; }
say "nccl-smoke: $(verdict "$out/nccl-smoke.txt")"
[ "$rc" = 0 ] || die 42 "nccl-smoke exited $rc (see $out/nccl-smoke.txt)"
version=$(sed -n 's/^# nccl: \([0-9.]*\).*/\1/p' "$out/nccl-smoke.txt" | head -1)

# 4. Two ranks on one GPU: NCCL up to 2.29 refuses it ("Duplicate GPU detected", src/init.cc);
# from 2.30.3 it runs with NCCL_MULTI_RANK_GPU_ENABLE=1 (src/init.cc, MultiRankGpuEnable).
if [ "$gpus" = 1 ] && [ "$backend" != sim ]; then
  if [ -n "$version" ] && [ "$(printf '%s\n2.30.3\n' "$version" | sort -V | head -1)" = 2.30.3 ]; then
    say "one GPU, NCCL $version: two ranks on it (NCCL_MULTI_RANK_GPU_ENABLE=1)"
    NCCL_MULTI_RANK_GPU_ENABLE=1 "$bin" launch -n 2 run --nccl-lib "$lib" --device 0 -b 8 -e "$maxbytes" \
      --json "$out/two-ranks-one-gpu.json" >"$out/two-ranks-one-gpu.txt" 2>&1
    say "two ranks on one GPU: exit $? ($(verdict "$out/two-ranks-one-gpu.txt"))"
  else
    say "one GPU, NCCL ${version:-?}: two ranks on one GPU not tried: NCCL before 2.30.3 refuses a second rank on a GPU (Duplicate GPU detected)"
  fi
fi

# 5. nccl-tests: programs given, or built here against the same library.
mpirun_cmd=()
if [ -n "${MPIRUN:-}" ]; then
  read -r -a mpirun_cmd <<<"$MPIRUN"
elif command -v mpirun >/dev/null 2>&1; then
  mpirun_cmd=(mpirun)
  if [ "$(id -u)" = 0 ] && mpirun --version 2>&1 | grep -q "Open MPI"; then
    mpirun_cmd+=(--allow-run-as-root)
  fi
fi
launch=${NCCL_TESTS_LAUNCH:-}
case "$launch" in
  "" | threads | mpirun) ;;
  *) die 2 "NCCL_TESTS_LAUNCH='$launch': mpirun or threads" ;;
esac
if [ -n "${NCCL_TESTS_BIN:-}" ]; then
  build=$(cd "$NCCL_TESTS_BIN" 2>/dev/null && pwd) || die 44 "NCCL_TESTS_BIN=$NCCL_TESTS_BIN is not a folder"
  launch=${launch:-threads}
  say "nccl-tests: the programs in $build"
else
  missing=()
  command -v nvcc >/dev/null 2>&1 || missing+=("nvcc is not on PATH")
  [ -n "${NCCL_TESTS_SRC:-}" ] || missing+=("NCCL_TESTS_SRC is not set (an NVIDIA/nccl-tests source tree), nor NCCL_TESTS_BIN (programs already built)")
  if ((${#missing[@]})); then
    reason=$(printf '%s; ' "${missing[@]}")
    die 43 "nccl-smoke ran (results in $out), nothing to compare it with: ${reason%; }"
  fi
  nccl_home=$(cd "$(dirname "$lib")/.." && pwd)
  [ -f "$nccl_home/include/nccl.h" ] || die 44 "no nccl.h in $nccl_home/include for the library $lib"
  # A pip wheel ships lib/libnccl.so.2 without the libnccl.so name the linker's -lnccl looks for:
  # link against a folder that has both names for the same file.
  if [ ! -e "$nccl_home/lib/libnccl.so" ]; then
    link_home=$(cd "$out" && pwd)/nccl-home
    mkdir -p "$link_home/lib"
    ln -sfn "$nccl_home/include" "$link_home/include"
    ln -sf "$lib" "$link_home/lib/libnccl.so"
    ln -sf "$lib" "$link_home/lib/libnccl.so.2"
    nccl_home=$link_home
  fi
  # nvcc's own toolkit (CUDA_HOME), its libcudart, and code for this machine's GPU only (the
  # default list of six architectures takes minutes to build); each can be set from outside.
  cuda_home=${CUDA_HOME:-$(cd "$(dirname "$(readlink -f "$(command -v nvcc)")")/.." && pwd)}
  cuda_lib=${CUDA_LIB:-$cuda_home/lib64}
  [ -d "$cuda_lib" ] || cuda_lib=$cuda_home/lib
  cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  gencode=${NVCC_GENCODE:-${cc:+-gencode=arch=compute_$cc,code=sm_$cc}}
  build=$(cd "$out" && pwd)/nccl-tests-build
  make_tests() {
    say "building nccl-tests from $NCCL_TESTS_SRC in $build against $nccl_home (CUDA $cuda_home${cc:+, sm_$cc}, $*)"
    rm -rf "$build"
    make -C "$NCCL_TESTS_SRC" -j "$@" NCCL_HOME="$nccl_home" CUDA_HOME="$cuda_home" CUDA_LIB="$cuda_lib" \
      BUILDDIR="$build" ${gencode:+NVCC_GENCODE="$gencode"} >"$out/nccl-tests-build.txt" 2>&1
  }
  # With MPI where there is one, so that each GPU gets its own process, as nccl-smoke's ranks do.
  # nccl-tests wants MPI_HOME with include/mpi.h: asked of mpicc (Open MPI's --showme), since
  # distributions keep it beside their lib folder, not under the mpicc's prefix.
  mpi_home=
  if [ "$launch" != threads ] && command -v mpicc >/dev/null 2>&1 && ((${#mpirun_cmd[@]})); then
    for inc in $(mpicc --showme:incdirs 2>/dev/null) "$(dirname "$(dirname "$(readlink -f "$(command -v mpicc)")")")/include"; do
      if [ -f "$inc/mpi.h" ]; then
        mpi_home=$(dirname "$inc")
        break
      fi
    done
  fi
  if [ -n "$mpi_home" ] && make_tests MPI=1 MPI_HOME="$mpi_home"; then
    launch=mpirun
  else
    [ -n "$mpi_home" ] && say "the MPI build failed (see $out/nccl-tests-build.txt): building without MPI"
    make_tests MPI=0 || die 44 "nccl-tests did not build (see $out/nccl-tests-build.txt)"
    [ "$launch" = mpirun ] && say "NCCL_TESTS_LAUNCH=mpirun needs an MPI build: launching as threads"
    launch=threads
  fi
  export LD_LIBRARY_PATH=$(dirname "$lib"):$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
if [ "$launch" = mpirun ]; then
  ((${#mpirun_cmd[@]})) || die 44 "NCCL_TESTS_LAUNCH=mpirun, but no mpirun on PATH (or set MPIRUN)"
  start=("${mpirun_cmd[@]}" -np "$gpus")
  per=(-g 1)
  how="one process per GPU (${mpirun_cmd[*]} -np $gpus … -g 1), as nccl-smoke runs"
else
  start=()
  per=(-g "$gpus")
  how="one process driving $gpus GPU(s) (-g $gpus)"
  [ "$gpus" = 1 ] || how="$how: not one process per GPU as nccl-smoke runs, so its per-process launch costs differ (NCCL_TESTS_LAUNCH=mpirun with an MPI build)"
fi
say "nccl-tests launched as $how"

status=0
summary=$out/summary.txt
{
  printf '# nccl-smoke beside nccl-tests: %s GPU(s), 8 B to %s, NCCL %s; nccl-tests launched as %s\n' \
    "$gpus" "$maxbytes" "${version:-?}" "$how"
  printf '# %-16s %-30s %-34s %-16s %s\n' pattern "busbw, nccl-smoke / nccl-tests" \
    "8 B time, smoke - tests" "nccl-tests" "nccl-smoke"
} >"$summary"
smoke_verdict=$(verdict "$out/nccl-smoke.txt" | sed -e 's/^VERDICT: //' -e 's/ — .*//')
for pair in $pairs; do
  test=${pair%%:*}
  pattern=${pair#*:}
  if [ ! -x "$build/$test" ]; then
    printf '  %-16s %s\n' "$pattern" "nccl-tests' $test is not in $build: not compared" >>"$summary"
    continue
  fi
  "${start[@]}" "$build/$test" -b 8 -e "$maxbytes" -f 2 "${per[@]}" >"$out/$test.txt" 2>&1 || {
    say "$test failed (see $out/$test.txt)"
    printf '  %-16s %s\n' "$pattern" "nccl-tests' $test failed: see $test.txt" >>"$summary"
    status=44
    continue
  }
  # The log holds one pattern; nccl-smoke's other patterns are listed as "only in the second run".
  side=$out/side-by-side.$pattern.txt
  "$bin" compare "${mixed[@]}" "$out/$test.txt" "$out/nccl-smoke.json" >"$side" 2>&1
  say "$pattern: $(tail -n 1 "$side")"
  # The rows of the pattern's table: size, busbw 1st, busbw 2nd, change, interval, time 1st, 2nd.
  rows=$(awk -v p="# $pattern " 'index($0, p) == 1 {on = 1; next} on && /^#/ && !/^#  / {on = 0} on && $1 ~ /^[0-9]+$/ {print}' "$side")
  ratio=$(printf '%s\n' "$rows" | awk 'NF >= 7 && $2 ~ /^[0-9.]+$/ && $3 ~ /^[0-9.]+$/ && $2 > 0 {r = sprintf("%.3f at %s B", $3 / $2, $1)} END {print (r == "" ? "-" : r)}')
  small=$(printf '%s\n' "$rows" | awk '$1 == 8 && NF >= 7 {printf "%+.2f us (%s against %s)", $7 - $6, $7, $6}')
  tests_verdict=$(grep -o 'Out of bounds values : [0-9]* [A-Z]*' "$out/$test.txt" | tail -n 1 | sed 's/Out of bounds values : /wrong: /')
  printf '  %-16s %-30s %-34s %-16s %s\n' "$pattern" "$ratio" "${small:--}" "${tests_verdict:-no footer}" "$smoke_verdict" >>"$summary"
done
cat "$summary"
[ "$status" = 0 ] || die "$status" "a nccl-tests program failed"
say "done: side-by-side tables in $out/side-by-side.*.txt, one line per pattern in $summary"
