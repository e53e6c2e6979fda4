//! The layer order written in `src/lib.rs` holds: no module refers to one above it.

use std::path::Path;

/// Each top-level module's layer, lowest first; a module may refer to its own layer and those
/// below.
const LAYERS: &[&[&str]] = &[
    &["stage", "error", "data", "lossless", "progress"],
    &["ffi", "bootstrap"],
    &["comm"],
    &["patterns"],
    &["bench"],
    &["report", "diagnose"],
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
