//! The layer order written in `src/lib.rs` holds: no module refers to one above it.

use std::path::Path;

/// Each top-level module's layer, lowest first; a module may refer to its own layer and those
/// below.
const LAYERS: &[&[&str]] = &[
    &["stage", "error", "elements", "lossless", "events"],
    &["ffi", "bootstrap"],
    &["comm"],
    &["patterns"],
    &["bench"],
    &["report", "diagnose"],
    &["console"],
    &["run"],
    &["cli"],
];

fn layer(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// The source files of `path`, a file or a folder.
fn files(path: &Path, out: &mut Vec<std::path::PathBuf>) {
    if path.is_dir() {
        for e in std::fs::read_dir(path).unwrap().flatten() {
            files(&e.path(), out);
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_path_buf());
    }
}

/// The top-level modules `text` refers to as `crate::NAME`, comments left out.
fn references(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            out.push(name);
        }
    }
    out
}

#[test]
fn no_import_points_up() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut upward = Vec::new();
    for l in LAYERS.iter().flat_map(|l| l.iter()) {
        let dir = src.join(l);
        let path = if dir.is_dir() {
            dir
        } else {
            src.join(format!("{l}.rs"))
        };
        assert!(path.exists(), "{}", path.display());
        let mut fs = Vec::new();
        files(&path, &mut fs);
        for f in fs {
            let text = std::fs::read_to_string(&f).unwrap();
            for to in references(&text) {
                match layer(&to) {
                    Some(t) if t > layer(l).unwrap() => {
                        upward.push(format!("{} → {to}", f.display()))
                    }
                    _ => {}
                }
            }
        }
    }
    upward.sort();
    upward.dedup();
    assert!(
        upward.is_empty(),
        "imports pointing up:\n{}",
        upward.join("\n")
    );
}

#[test]
fn every_module_has_a_layer() {
    let lib = include_str!("../src/lib.rs");
    for line in lib.lines() {
        if let Some(m) = line.strip_prefix("pub mod ") {
            let m = m.trim_end_matches(';');
            assert!(layer(m).is_some(), "module {m} is in no layer");
        }
    }
}

/// A crate's module tree: each module's path (`["run", "worker"]`) and its text, with the items
/// that only tests compile left out (`#[cfg(test)]` blocks, and test-only modules' files).
fn modules(src: &Path) -> Vec<(Vec<String>, String)> {
    let mut fs = Vec::new();
    files(src, &mut fs);
    let mut out = Vec::new();
    let mut test_only: Vec<Vec<String>> = Vec::new();
    for f in fs {
        let rel = f.strip_prefix(src).unwrap().with_extension("");
        let mut path: Vec<String> = rel
            .iter()
            .map(|s| s.to_string_lossy().into_owned())
            .collect();
        if matches!(
            path.last().map(String::as_str),
            Some("mod" | "lib" | "main")
        ) {
            path.pop();
        }
        if path.first().is_some_and(|p| p == "bin") {
            continue;
        }
        let (text, tests) = without_tests(&std::fs::read_to_string(&f).unwrap());
        test_only.extend(tests.into_iter().map(|t| {
            let mut p = path.clone();
            p.push(t);
            p
        }));
        out.push((path, text));
    }
    out.retain(|(p, _)| {
        p.last().is_none_or(|l| l != "tests") && !test_only.iter().any(|t| p.starts_with(t))
    });
    out
}

/// `text` without comments and `#[cfg(test)]` items, and the names of the modules declared
/// test-only (`#[cfg(test)] mod NAME;`).
fn without_tests(text: &str) -> (String, Vec<String>) {
    let mut out = String::new();
    let mut tests = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let code = line.split("//").next().unwrap_or("");
        if code.trim() != "#[cfg(test)]" {
            out.push_str(code);
            out.push('\n');
            continue;
        }
        // Skip the item the attribute applies to: one line, or a block to its closing brace.
        let mut depth = 0i32;
        for item in lines.by_ref() {
            let code = item.split("//").next().unwrap_or("");
            if depth == 0
                && let Some(name) = code
                    .trim()
                    .trim_start_matches("pub(crate) ")
                    .trim_start_matches("pub ")
                    .strip_prefix("mod ")
                    .and_then(|m| m.strip_suffix(';'))
            {
                tests.push(name.trim().to_string());
                break;
            }
            depth += code.matches('{').count() as i32 - code.matches('}').count() as i32;
            if depth <= 0 && (code.contains('}') || code.trim_end().ends_with(';')) {
                break;
            }
        }
    }
    (out, tests)
}

fn ident(s: &str) -> &str {
    let n = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..n]
}

/// The module paths `text` (the module `me`) names through `crate::`, `super::` and `self::`,
/// groups (`super::{a, b}`) included.
fn named_paths(me: &[String], text: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for head in ["crate::", "super::", "self::"] {
        let mut rest = text;
        while let Some(i) = rest.find(head) {
            let before = rest[..i].chars().next_back();
            rest = &rest[i + head.len()..];
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut base: Vec<String> = match head {
                "crate::" => Vec::new(),
                "super::" => me[..me.len().saturating_sub(1)].to_vec(),
                _ => me.to_vec(),
            };
            let mut tail = rest;
            while let Some(t) = tail.strip_prefix("super::") {
                base.pop();
                tail = t;
            }
            loop {
                let name = ident(tail);
                if name.is_empty() {
                    break;
                }
                base.push(name.to_string());
                match tail[name.len()..].strip_prefix("::") {
                    Some(t) if !t.starts_with('{') => tail = t,
                    _ => break,
                }
            }
            out.push(base.clone());
            // A group after the path: each item's first name.
            let after = &tail[ident(tail).len()..];
            if let Some(group) = after.strip_prefix("::{").or_else(|| tail.strip_prefix('{')) {
                let mut depth = 0;
                let mut item_start = true;
                for (k, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => item_start = true,
                        c if c.is_whitespace() => {}
                        _ if item_start && depth == 0 => {
                            item_start = false;
                            let mut p = base.clone();
                            p.push(ident(&group[k..]).to_string());
                            out.push(p);
                        }
                        _ => {}
                    }
                }
            }
        }
    }
    out
}

/// The circles among sibling modules of the crate at `src`: each circle's modules, sorted.
/// A reference from a module to a sibling's descendant counts as one to that sibling; a
/// module may refer to its ancestors and descendants freely.
fn circles(src: &Path) -> Vec<Vec<String>> {
    let mods = modules(src);
    let known: Vec<&Vec<String>> = mods.iter().map(|(p, _)| p).collect();
    let mut edges: std::collections::BTreeMap<
        Vec<String>,
        std::collections::BTreeSet<Vec<String>>,
    > = Default::default();
    for (me, text) in &mods {
        for named in named_paths(me, text) {
            let Some(to) = (1..=named.len())
                .rev()
                .map(|k| &named[..k])
                .find(|p| known.iter().any(|m| m.as_slice() == *p))
            else {
                continue;
            };
            let common = me.iter().zip(to).take_while(|(a, b)| a == b).count();
            if common == me.len() || common == to.len() {
                continue;
            }
            edges
                .entry(me[..=common].to_vec())
                .or_default()
                .insert(to[..=common].to_vec());
        }
    }
    let reach = |from: &Vec<String>| {
        let mut seen = std::collections::BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(n) = todo.pop() {
            for m in edges.get(&n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    todo.push(m.clone());
                }
            }
        }
        seen
    };
    let mut out: Vec<Vec<String>> = Vec::new();
    for n in edges.keys() {
        let from_n = reach(n);
        if !from_n.contains(n) {
            continue;
        }
        let mut circle: Vec<String> = from_n
            .iter()
            .filter(|m| reach(m).contains(n))
            .map(|m| m.join("::"))
            .collect();
        circle.sort();
        if !out.contains(&circle) {
            out.push(circle);
        }
    }
    out.sort();
    out
}

/// No module is part of an import circle with its siblings, in nccl-smoke and in the
/// simulation crates.
#[test]
fn no_module_imports_in_a_circle() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut found = Vec::new();
    for krate in [
        ".",
        "kernels",
        "sim/fault",
        "sim/cuda",
        "sim/nccl",
        "sim/nvml",
    ] {
        let src = root.join(krate).join("src");
        for c in circles(&src) {
            found.push(format!("{}: {}", src.display(), c.join(" ↔ ")));
        }
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

#[test]
fn the_circle_check_sees_a_circle() {
    let dir = std::env::temp_dir().join(format!("layers-circle-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(dir.join("a/mod.rs"), "mod x;\nmod y;\n").unwrap();
    std::fs::write(dir.join("a/x.rs"), "use super::y::Y;\n").unwrap();
    std::fs::write(
        dir.join("a/y.rs"),
        "use super::{x, z};\n#[cfg(test)]\nmod tests {\n    use crate::b;\n}\n",
    )
    .unwrap();
    std::fs::write(dir.join("a/z.rs"), "use crate::a::x;\n").unwrap();
    std::fs::write(dir.join("b.rs"), "use crate::a::x::X; // crate::a only\n").unwrap();
    let c = circles(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        c,
        vec![vec!["a::x".to_string(), "a::y".into(), "a::z".into()]]
    );
}

/// Most lines a source file of the workspace may have: a file longer than this holds more
/// than one job. Generated bindings are the one exception (they say so in their first line).
const MAX_FILE_LINES: usize = 500;

#[test]
fn no_source_file_is_over_500_lines_but_generated_bindings() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut all = Vec::new();
    for dir in ["src", "tests", "benches", "examples", "kernels", "sim"] {
        files(&root.join(dir), &mut all);
    }
    all.retain(|p| !p.components().any(|c| c.as_os_str() == "target"));
    assert!(all.len() > 100, "found only {} source files", all.len());
    let long: Vec<String> = all
        .iter()
        .filter_map(|p| {
            let text = std::fs::read_to_string(p).unwrap();
            let generated = text
                .lines()
                .next()
                .is_some_and(|l| l.starts_with("// Generated by"));
            let n = text.lines().count();
            (n > MAX_FILE_LINES && !generated)
                .then(|| format!("{}: {n} lines", p.strip_prefix(root).unwrap().display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "over {MAX_FILE_LINES} lines:\n{}",
        long.join("\n")
    );
}

/// Only the console prints what a person reads on standard output (`src/console/`, where a
/// run's worker asks which rank it is once, in `console::rank`), and `main`; the probe
/// helper's reply to the process that started it (`diagnose::probe`) is not for a person.
#[test]
fn only_the_console_prints_to_standard_output() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    let mut found = Vec::new();
    for path in all {
        let rel = path
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .to_string();
        let exempt = rel.starts_with("console/")
            || rel == "main.rs"
            || rel == "diagnose/probe.rs"
            || rel.ends_with("tests.rs")
            || rel.contains("/tests/");
        if exempt {
            continue;
        }
        let (code, _) = without_tests(&std::fs::read_to_string(&path).unwrap());
        for (i, line) in code.lines().enumerate() {
            let t = line.trim_start();
            if t.starts_with("println!") || t.starts_with("print!") || line.contains(" println!(") {
                found.push(format!("{rel}:{}: {}", i + 1, t));
            }
        }
    }
    assert!(
        found.is_empty(),
        "printing outside the console:\n{}",
        found.join("\n")
    );
}
