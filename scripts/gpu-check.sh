#!/usr/bin/env bash
# The real path on a GPU machine, with a prebuilt binary (such machines may have no Rust
# toolchain or MPI): build here with `cargo build --release --no-default-features`, copy
# target/release/nccl-smoke there, and run this script beside it.
#   NCCL_SMOKE_NCCL_LIB=/path/to/libnccl.so.2  (when libnccl.so.2 is not on the library path)
#   OUT=dir                                    (where results go; default ./gpu-results)
set -uo pipefail
bin=${BIN:-$(dirname "$0")/../target/release/nccl-smoke}
[ -x "$bin" ] || bin=./nccl-smoke
out=${OUT:-gpu-results}
mkdir -p "$out"
nvidia-smi -L > "$out/nvidia-smi.txt" 2>&1 || true
"$bin" doctor > "$out/doctor.txt" 2>&1; echo "doctor exit $?" | tee -a "$out/doctor.txt"
"$bin" launch -n 1 run -e 256M --json "$out/run1.json" > "$out/run1.txt" 2>&1; echo "run (1 rank) exit $?" | tee -a "$out/run1.txt"
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "${ngpu:-0}" -ge 2 ]; then
  "$bin" launch -n "$ngpu" run -e 256M --json "$out/run$ngpu.json" > "$out/run$ngpu.txt" 2>&1
  echo "run ($ngpu ranks) exit $?" | tee -a "$out/run$ngpu.txt"
fi
tail -n 3 "$out"/run*.txt
