//! The crate's modules form layers: a module names only modules of lower
//! layers (README "Layers"), so there is no import circle and each layer
//! can be read without the ones above it.

use std::collections::BTreeMap;
use std::path::Path;

/// Module → layer. A new module gets a row here, where its imports put it.
const LAYERS: &[(&str, u32)] = &[
    ("error", 0),
    ("sysfs", 1),
    ("files", 1),
    ("limits", 1),
    ("proc", 2),
    ("process", 2),
    ("criu", 2),
    ("runs", 2),
    ("sockets", 2),
    ("taskstats", 2),
    ("perf", 2),
    ("counters", 3),
    ("pidfd", 3),
    ("swap", 3),
    ("wss", 3),
    ("cgroup", 4),
    ("paging", 4),
    ("freeze", 5),
    ("faults", 5),
    ("testing", 6),
];

#[test]
fn modules_import_only_lower_layers() {
    let layer: BTreeMap<&str, u32> = LAYERS.iter().copied().collect();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for dir in [src.clone(), src.join("cgroup")] {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            if e.path().extension().is_some_and(|x| x == "rs") {
                files.push(e.path());
            }
        }
    }
    let mut wrong = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
        let module = rel.split(['/', '.']).next().unwrap();
        if module == "lib" {
            continue;
        }
        let own = *layer
            .get(module)
            .unwrap_or_else(|| panic!("src/{rel}: module {module} has no layer in LAYERS"));
        let text = std::fs::read_to_string(&f).unwrap();
        for (i, _) in text.match_indices("crate::") {
            let name: String = text[i + 7..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if name == module {
                continue;
            }
            match layer.get(name.as_str()) {
                Some(l) if *l < own => {}
                _ => wrong.push(format!("src/{rel} (layer {own}) names crate::{name}")),
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layers:\n{}",
        wrong.join("\n")
    );
}
