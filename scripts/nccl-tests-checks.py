#!/usr/bin/env python3
"""nccl-tests' own failure lines, placed: which call each `file:line` of a "Test NCCL failure" or
"Test CUDA failure" line is, in every version of NVIDIA/nccl-tests, and so at which stage.

    nccl-tests-checks.py NCCL_TESTS_CLONE > src/diagnose/classify/nccl-tests-checks.tsv

nccl-tests prints `HOST: Test NCCL failure FILE:LINE '...'` (CUDACHECK / NCCLCHECK in
src/common.h, with the invoking line's __FILE__ and __LINE__). Users build whatever commit they
cloned, so every commit that changed src/ is read, not only the tags. For each file, line and
check that is a CUDACHECK ("Test CUDA failure") or NCCLCHECK ("Test NCCL failure") invocation
in some commit (every line of a call that spans several), the row gives the calls found there
and the stage they belong to; a line whose calls belong to different stages in different
commits, or to none, is left out: it places nothing. Calls of no stage (ncclGroupStart, cudaMemcpy) do not
count against the others. "NCCL /" rows are the commits whose NCCLCHECK can quote
ncclGetLastError after a slash: a log line with the slash comes from one of them.
"""

import re
import subprocess
import sys
from collections import defaultdict

# The call a check wraps, to the stage of nccl-smoke's vocabulary it belongs to (README's exit
# table). Calls not listed (cudaMemcpy, cudaMemset: data set-up inside each size's loop;
# ncclCommRegister; ncclGroupStart) place nothing.
STAGES = {
    'unique-id': ['ncclGetUniqueId'],
    'nccl-load': ['ncclGetVersion'],
    'device': ['cudaSetDevice', 'cudaGetDeviceCount', 'cudaGetDevice', 'cudaGetDeviceProperties',
               'cudaDeviceGetAttribute', 'cudaStreamCreate', 'cudaStreamCreateWithFlags',
               'cudaStreamCreateWithPriority', 'cudaDriverGetVersion', 'cudaRuntimeGetVersion',
               'cudaDeviceGetPCIBusId', 'cudaDeviceCanAccessPeer', 'cudaDeviceEnablePeerAccess'],
    'init': ['ncclCommInitRank', 'ncclCommInitAll', 'ncclCommInitRankConfig', 'ncclCommSplit',
             'ncclCommInitRankScalable', 'ncclCommCount', 'ncclCommCuDevice', 'ncclCommUserRank'],
    'alloc': ['cudaMalloc', 'cudaMallocHost', 'cudaHostAlloc', 'cudaMallocManaged', 'ncclMemAlloc',
              'cuMemCreate', 'cuMemMap', 'cuMemAddressReserve', 'cuMemSetAccess', 'AllocateBuffs'],
    'run': ['ncclAllReduce', 'ncclAllGather', 'ncclReduceScatter', 'ncclReduce', 'ncclBroadcast',
            'ncclBcast', 'ncclSend', 'ncclRecv', 'ncclAlltoAll', 'ncclAllToAll', 'ncclGather',
            'ncclScatter', 'ncclAlltoAllv', 'runColl', 'cudaStreamSynchronize', 'cudaStreamQuery',
            'cudaEventSynchronize', 'cudaEventRecord', 'cudaEventQuery', 'cudaEventElapsedTime',
            'cudaLaunchKernel', 'cudaGraphLaunch', 'cudaGraphInstantiate', 'cudaStreamBeginCapture',
            'cudaStreamEndCapture', 'ncclCommGetAsyncError', 'ncclRedOpCreatePreMulSum',
            'cudaGetLastError', 'cudaLaunchCooperativeKernel',
            # testStreamSynchronize: the communicator's asynchronous error, and the abort that
            # follows it or the -T timeout
            'ncclAsyncErr', 'ncclCommAbort'],
    'finalize': ['ncclCommDestroy', 'ncclCommFinalize', 'cudaFree', 'cudaFreeHost',
                 'ncclMemFree', 'cudaStreamDestroy', 'cudaEventDestroy', 'ncclCommDeregister',
                 'ncclRedOpDestroy', 'cuMemUnmap', 'cuMemRelease', 'cuMemAddressFree'],
}
STAGE_OF = {call: stage for stage, calls in STAGES.items() for call in calls}
CHECK = re.compile(r'\b(CUDACHECK|NCCLCHECK)\s*\(')
CALL = re.compile(r'([A-Za-z_][A-Za-z_0-9]*)\s*\(')
BARE = re.compile(r'([A-Za-z_][A-Za-z_0-9]*)')
# ncclGroupEnd finishes the calls of its group: it takes their stage.
GROUP_END = 'ncclGroupEnd'
LOOK_BACK = 40
# NCCLCHECK quotes ncclGetLastError after a slash ("'%s / %s'") from the commit that added it
# (built against NCCL 2.13 or later): a line with the slash comes from such a commit.
LAST_ERROR = 'ncclGetLastError'



def git(repo, *args):
    return subprocess.run(['git', '-C', repo, *args], check=True, capture_output=True,
                          text=True).stdout


def checks(text):
    """(first line, last line, call) of every check in a source text, in order."""
    out = []
    for m in CHECK.finditer(text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {'(': 1, ')': -1}.get(text[i], 0)
            i += 1
        inner = text[m.end():i - 1]
        # NCCLCHECK(ncclAsyncErr): a result already in hand, named by its variable.
        call = CALL.search(inner) or BARE.fullmatch(inner.strip())
        if not call:
            continue
        first = text.count('\n', 0, m.start()) + 1
        last = text.count('\n', 0, i) + 1
        out.append((first, last, m.group(1), call.group(1)))
    return out


def group_stage(lines, end):
    """The stage of the group that ends on line `end` (1-based): the calls between it and its
    ncclGroupStart (checked or not: TESTCHECK(AllocateBuffs(...)) too), where they all belong
    to one stage; a cudaSetDevice that picks each call's GPU does not count beside others."""
    for start in range(end - 1, max(0, end - LOOK_BACK), -1):
        if 'ncclGroupStart' in lines[start - 1]:
            break
    else:
        return None
    stages = {STAGE_OF[c] for ln in lines[start:end - 1] for c in CALL.findall(ln) if c in STAGE_OF}
    if len(stages) > 1:
        stages.discard('device')
    return stages.pop() if len(stages) == 1 else None


def stages_of(text, found):
    """Each check's stage; a group's end takes the stage of the calls of its group."""
    lines = text.split('\n')
    out = []
    for first, last, macro, call in found:
        stage = group_stage(lines, first) if call == GROUP_END else STAGE_OF.get(call)
        out.append((first, last, macro, call, stage))
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    repo = sys.argv[1]
    commits = git(repo, 'log', '--format=%H', '--', 'src').split()
    # (file, line, check) -> calls, stages, commits
    rows = defaultdict(lambda: (set(), set(), set()))
    for c in commits:
        names = git(repo, 'ls-tree', '-r', '--name-only', c, 'src').split()
        header = git(repo, 'show', f'{c}:src/common.h') if 'src/common.h' in names else ''
        slash = LAST_ERROR in header
        for path in names:
            if not path.endswith(('.cu', '.cc', '.h', '.cpp')):
                continue
            text = git(repo, 'show', f'{c}:{path}')
            name = path.rsplit('/', 1)[-1]
            for first, last, macro, call, stage in stages_of(text, checks(text)):
                kinds = ['CUDA'] if macro == 'CUDACHECK' else ['NCCL'] + (['NCCL /'] if slash else [])
                for line in range(first, last + 1):
                    for kind in kinds:
                        calls, stages, seen = rows[(name, line, kind)]
                        calls.add(call)
                        if stage:
                            stages.add(stage)
                        seen.add(c)
    print('# nccl-tests\' CUDACHECK/NCCLCHECK lines: file, line, check, stage, calls, commits. Generated by')
    print('# scripts/nccl-tests-checks.py from NVIDIA/nccl-tests (every commit that changed src/); do not edit.')
    print(f'# commits read: {len(commits)}, newest {commits[0][:12]}')
    for (name, line, kind), (calls, stages, seen) in sorted(rows.items()):
        if len(stages) != 1:
            continue
        stage = stages.pop()
        print(f'{name}\t{line}\t{kind}\t{stage}\t{",".join(sorted(calls))}\t{len(seen)}')


if __name__ == '__main__':
    main()
