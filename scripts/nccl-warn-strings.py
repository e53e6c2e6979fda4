#!/usr/bin/env python3
"""List the WARN format strings of one NCCL release, one per line: `path:line<TAB>format`.

Usage: nccl-warn-strings.py NCCL_GIT_DIR TAG > tests/fixtures/nccl-warns/TAG.tsv

NCCL_GIT_DIR is a clone of github.com/NVIDIA/nccl (bare or not); TAG a release tag such as
v2.19.3-1. Adjacent string literals are joined; a macro name between them (`"Call to " name`)
becomes `%s`. The coverage test (tests/nccl_warn_coverage.rs) classifies a line made from each
format and lists the ones no signature covers, so a new release is a diff of two listings.
"""
import re
import subprocess
import sys

WARN = re.compile(r'(?<![A-Za-z_])WARN\s*\(')


def literal_run(text, i):
    """Joins the string literals (and macro names between them) from text[i] on."""
    out = []
    n = len(text)
    while i < n:
        c = text[i]
        if c in ' \t\r\n\\':
            i += 1
        elif c == '"':
            j = i + 1
            s = []
            while j < n and text[j] != '"':
                if text[j] == '\\' and j + 1 < n and text[j + 1] == '\n':
                    j += 2  # a line continuation inside the literal
                elif text[j] == '\\' and j + 1 < n:
                    s.append(text[j:j + 2])
                    j += 2
                else:
                    s.append(text[j])
                    j += 1
            out.append(''.join(s))
            i = j + 1
        elif c.isalpha() or c == '_':
            m = re.match(r'[A-Za-z_][A-Za-z0-9_]*', text[i:])
            word = m.group(0)
            # A macro between literals (`"Call to " name " failed"`, PRIu64): an argument.
            k = i + len(word)
            while k < n and text[k] in ' \t\r\n\\':
                k += 1
            if k < n and text[k] == '"' and out is not None:
                out.append('%' + ('lu' if word.startswith('PRI') else 's'))
                i = k
            else:
                break
        else:
            break
    return ''.join(out)


def main():
    git, tag = sys.argv[1], sys.argv[2]
    files = subprocess.run(['git', '-C', git, 'grep', '-l', '-E', r'WARN *\(', tag, '--', 'src/'],
                           check=True, capture_output=True, text=True).stdout.split()
    for ref in files:
        path = ref.split(':', 1)[1]
        if not re.search(r'\.(cc|cu|h|c|cpp)$', path):
            continue
        text = subprocess.run(['git', '-C', git, 'show', ref], check=True, capture_output=True,
                              text=True, errors='replace').stdout
        for m in WARN.finditer(text):
            # Skip the macro's own definition and NOWARN/…NOWARN wrappers.
            before = text[max(0, m.start() - 8):m.start()]
            if before.endswith('define ') or before.endswith('NO'):
                continue
            fmt = literal_run(text, m.end())
            if not fmt:
                continue
            line = text.count('\n', 0, m.start()) + 1
            fmt = fmt.replace('\\n', ' ').replace('\\t', ' ')
            fmt = re.sub(r'\s+', ' ', fmt).strip()
            print(f'{path}:{line}\t{fmt}')


if __name__ == '__main__':
    main()
