#!/usr/bin/env python3
"""The `explain` evaluation corpus: add fresh logs, and measure `explain` on both halves.

    explain-corpus.py add DIR...        add the logs of DIR/rows.tsv to the corpus
    explain-corpus.py eval [--bin PATH] [--markdown] [--misses dev]
    explain-corpus.py compare BASE_BIN [--bin PATH] [--stage]
                                        what a rule change gained and lost (--stage: the
                                        stage's agreement instead of the category's)

Layout: tests/fixtures/explain-corpus/INDEX.tsv and logs/. Each row is one log from one public
thread: file, split, expected category, expected stage, thread, family, established_by, cause.
The logs of tests/fixtures/real-logs (INDEX.tsv there) join the development half: the
classifier was written against them.

The split is decided by the thread alone, before anyone reads the log: a thread whose URL's
SHA-256 begins with a byte below 0xC0 is held out, the rest is development. Rules are written
and changed against the development half only; the held-out half is measured, never read for
tuning (`--misses` lists development misses only).

Every log of the corpus was also read a second time, blind (by a reader who saw only the log
and the category definitions: neither the first label, nor the thread, nor explain's output);
where the two readings differed, a third reading that saw the log, both labels (unnamed) and
the thread's established cause decided, and INDEX.tsv holds the label it chose.
SECOND-READING.tsv keeps the first and second categories and each decision; `eval` also
reports the logs on which both readings agree (labels that do not hang on one reader).

A log is judged right when `explain`'s verdict names the category the thread established
(`healthy`: no failure verdict: PASS, or no failure found); the stage agreement is reported
beside it. A log whose expected category is not healthy must never get PASS.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(ROOT, 'tests/fixtures/explain-corpus')
REAL = os.path.join(ROOT, 'tests/fixtures/real-logs')
HEADER = ['file', 'split', 'expect', 'stage', 'thread', 'family', 'established_by', 'cause']

# Labels as the collectors wrote them, in explain's words.
CATEGORY = {'other:topology': 'topology', 'other:misuse': 'init', 'other:plugin': 'version-mismatch'}
STAGE = {'connect-import': 'connect:buffer-import', 'connect-proxy': 'connect:proxy',
         'connect-shm': 'connect:shm', 'connect-net': 'connect:net'}


def split_of(thread):
    return 'held-out' if hashlib.sha256(thread.encode()).digest()[0] < 0xC0 else 'dev'


def read_index():
    rows = []
    path = os.path.join(CORPUS, 'INDEX.tsv')
    if os.path.exists(path):
        for line in open(path, encoding='utf-8'):
            if line.startswith('#') or not line.strip():
                continue
            rows.append(dict(zip(HEADER, line.rstrip('\n').split('\t'))))
    return rows


AGREE = 'readings agree'


def agreed():
    """The corpus logs whose first and second (blind) readings named the same category."""
    path = os.path.join(CORPUS, 'SECOND-READING.tsv')
    out = set()
    for line in open(path, encoding='utf-8'):
        c = line.rstrip('\n').split('\t')
        if not line.startswith('#') and len(c) >= 5 and c[4] == 'agree':
            out.add(c[0])
    return out


def real_rows():
    rows = []
    for line in open(os.path.join(REAL, 'INDEX.tsv'), encoding='utf-8'):
        if line.startswith('#') or not line.strip():
            continue
        c = line.rstrip('\n').split('\t')
        expect = c[1]
        if expect.startswith('advice:'):
            expect = expect[len('advice:'):]  # a slow run's advice names its category
        rows.append({'file': os.path.join('..', '..', 'real-logs', c[0]), 'split': 'dev', 'expect': expect,
                     'stage': '', 'thread': c[2], 'family': 'known', 'established_by': '', 'cause': c[3]})
    return rows


def add(dirs):
    rows = read_index()
    threads = {r['thread'] for r in rows} | {r['thread'] for r in real_rows()}
    os.makedirs(os.path.join(CORPUS, 'logs'), exist_ok=True)
    added = 0
    for d in dirs:
        for line in open(os.path.join(d, 'rows.tsv'), encoding='utf-8'):
            c = line.rstrip('\n').split('\t')
            if len(c) < 7 or line.startswith('#'):
                continue
            file, expect, stage, thread, family, by, cause = c[:7]
            if thread in threads:
                print(f'skip {file}: thread already in the corpus', file=sys.stderr)
                continue
            if os.path.exists(os.path.join(CORPUS, 'logs', file)):
                sys.exit(f'{file}: a log of that name is already in the corpus')
            shutil.copy(os.path.join(d, file), os.path.join(CORPUS, 'logs', file))
            threads.add(thread)
            rows.append({'file': file, 'split': split_of(thread), 'expect': CATEGORY.get(expect, expect),
                         'stage': STAGE.get(stage, stage), 'thread': thread, 'family': family,
                         'established_by': by, 'cause': cause.replace('\t', ' ')})
            added += 1
    rows.sort(key=lambda r: (r['split'], r['file']))
    with open(os.path.join(CORPUS, 'INDEX.tsv'), 'w', encoding='utf-8') as f:
        f.write('# One real log per public thread; see scripts/explain-corpus.py. Columns:\n')
        f.write('# ' + '\t'.join(HEADER) + '\n')
        for r in rows:
            f.write('\t'.join(r[h] for h in HEADER) + '\n')
    print(f'added {added} log(s); corpus: {len(rows)}', file=sys.stderr)


def verdict(binary, path):
    p = subprocess.run([binary, 'explain', '--json', path], capture_output=True, text=True)
    try:
        v = json.loads(p.stdout)['verdict'] or {}
    except (ValueError, KeyError):
        return {'status': 'error', 'category': None, 'stage': None, 'exit': p.returncode}
    root = v.get('root_cause') or {}
    cat = root.get('category')
    if v.get('status') == 'hang':
        cat = 'hang'
    if v.get('status') == 'advice':
        cat = next((n['category'] for n in v.get('notes', []) if n.get('severity') == 'advice'), None)
    return {'status': v.get('status'), 'category': cat, 'stage': v.get('stage'), 'exit': p.returncode}


def judge(row, got):
    failed = got['status'] in ('fail', 'hang', 'consequences-only', 'unknown', 'error')
    if row['expect'] == 'healthy':
        return not failed
    if row['expect'] == 'hang':
        return got['status'] == 'hang' or got['category'] == 'hang'
    return got['category'] == row['expect']


def stage_judged(row):
    """The stage is judged where the thread established one and the run failed."""
    return bool(row['stage']) and row['expect'] != 'healthy'


def evaluate(binary, markdown, misses):
    rows = real_rows() + read_index()
    both = agreed()
    by = defaultdict(lambda: [0, 0, 0, 0])  # right, total, stage right, stage labelled
    passed_failures = []
    miss_rows = []
    for r in rows:
        got = verdict(binary, os.path.join(CORPUS, 'logs', r['file']))
        ok = judge(r, got)
        keys = [(r['split'], 'all'), (r['split'], r['family'])]
        if r['file'] in both:
            keys.append((r['split'], AGREE))
        for key in keys:
            by[key][0] += ok
            by[key][1] += 1
            if stage_judged(r):
                by[key][3] += 1
                by[key][2] += got['stage'] == r['stage']
        if r['expect'] != 'healthy' and (got['status'] == 'pass' or got['exit'] == 0):
            passed_failures.append(r['file'])
        if not ok and r['split'] == misses:
            miss_rows.append((r['file'], r['expect'], got))
        elif r['split'] == misses and stage_judged(r) and got['stage'] != r['stage']:
            miss_rows.append((r['file'], f"{r['expect']} at {r['stage']}", got))
    order = sorted(by.items(), key=lambda kv: (kv[0][0] != 'held-out', kv[0][1] != 'all',
                                               kv[0][1] != AGREE, kv[0][1]))
    if markdown:
        print('| half | family | logs | category right | stage right (of labelled) |')
        print('|---|---|---|---|---|')
    for (split, fam), (ok, n, sok, sn) in order:
        stage = f'{sok}/{sn}' if sn else '-'
        if markdown:
            print(f'| {split} | {fam} | {n} | {ok} ({100 * ok / n:.0f} %) | {stage} |')
        else:
            print(f'{split:9} {fam:12} {ok:4}/{n:<4} {100 * ok / n:5.1f} %   stage {stage}')
    for f, want, got in miss_rows:
        print(f'miss {f}: want {want}, got {got["status"]} {got["category"]} at {got["stage"]}',
              file=sys.stderr)
    if passed_failures:
        print(f'PASS (exit 0) given to {len(passed_failures)} failed run(s)', file=sys.stderr)
        return 1
    return 0


def compare(base, binary, stage):
    """A rule earns its place when it fixes development logs without losing held-out ones: the
    development logs whose judgement changed are named, the held-out ones only counted. With
    `stage`, the judgement is the stage's agreement (where one is judged)."""
    gained = defaultdict(list)
    lost = defaultdict(list)

    def right(r, got):
        return got['stage'] == r['stage'] if stage else judge(r, got)

    for r in real_rows() + read_index():
        if stage and not stage_judged(r):
            continue
        path = os.path.join(CORPUS, 'logs', r['file'])
        before, after = right(r, verdict(base, path)), right(r, verdict(binary, path))
        if before != after:
            (gained if after else lost)[r['split']].append(r['file'])
    for split in ('dev', 'held-out'):
        print(f'{split:9} gained {len(gained[split])}, lost {len(lost[split])}')
    for f in gained['dev']:
        print(f'  dev gained {f}')
    for f in lost['dev']:
        print(f'  dev lost {f}')
    return 1 if lost['held-out'] else 0


def main():
    args = sys.argv[1:]
    if not args or args[0] not in ('add', 'eval', 'compare'):
        sys.exit(__doc__)
    if args[0] == 'add':
        add(args[1:])
        return
    binary = os.path.join(ROOT, 'target/release/nccl-smoke')
    if '--bin' in args:
        binary = args[args.index('--bin') + 1]
    if args[0] == 'compare':
        if len(args) < 2 or args[1].startswith('--'):
            sys.exit('compare: name the baseline binary')
        sys.exit(compare(args[1], binary, '--stage' in args))
    misses = args[args.index('--misses') + 1] if '--misses' in args else None
    if misses == 'held-out':
        sys.exit('the held-out half is measured, not read: --misses dev only')
    sys.exit(evaluate(binary, '--markdown' in args, misses))


if __name__ == '__main__':
    main()
