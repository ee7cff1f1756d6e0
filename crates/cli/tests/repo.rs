//! Checks on the whole workspace, read as text (like
//! crates/linux/tests/layers.rs for one crate): every source file is on
//! docs/design.md's code map, and no module imports another that imports
//! it back, directly or round a loop. Here, in the crate that sits on top
//! of all the others, because they are about all of them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Import circles known today, each a set of files (relative to crates/)
/// that import one another. Remove an entry once its circle is broken: the
/// test fails while an entry matches no circle, so that none comes back
/// unnoticed.
const KNOWN_CIRCLES: &[(&str, &[&str])] = &[];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Source files as `crate/src/...rs`, the way the code map names them.
fn sources() -> Vec<(String, PathBuf)> {
    let crates = workspace().join("crates");
    let mut out = Vec::new();
    let mut dirs: Vec<_> = std::fs::read_dir(&crates).unwrap().flatten().collect();
    dirs.sort_by_key(|e| e.file_name());
    for c in dirs {
        let src = c.path().join("src");
        if src.is_dir() {
            for f in rust_files(&src) {
                let rel = f
                    .strip_prefix(&crates)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.push((rel, f));
            }
        }
    }
    out
}

#[test]
fn every_source_file_is_on_the_code_map() {
    let design = std::fs::read_to_string(workspace().join("docs/design.md")).unwrap();
    let start = design
        .find("\n## Code map")
        .expect("docs/design.md has a \"## Code map\" section");
    let map = &design[start + 1..];
    let map = &map[..map[3..].find("\n## ").map_or(map.len(), |i| i + 3)];
    let files = sources();
    let missing: Vec<&str> = files
        .iter()
        .map(|(rel, _)| rel.as_str())
        .filter(|rel| !map.contains(&format!("`{rel}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "source files not on docs/design.md's code map (name each as `crate/src/file.rs`):\n{}",
        missing.join("\n")
    );
    let known: BTreeSet<&str> = files.iter().map(|(rel, _)| rel.as_str()).collect();
    let stale: Vec<&str> = map
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| s.contains("/src/") && s.ends_with(".rs") && !known.contains(s))
        .collect();
    assert!(
        stale.is_empty(),
        "docs/design.md's code map names files that do not exist:\n{}",
        stale.join("\n")
    );
}

/// Rust source with comments, strings and character literals blanked
/// (their length kept), so that only code is searched.
fn code_only(text: &str) -> String {
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            out.push(' ');
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && (i == 0 || !(b[i - 1].is_alphanumeric() || b[i - 1] == '_'))
        {
            // Raw string r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (0..hashes).all(|k| b.get(j + 1 + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            i = j;
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                i += if b[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' {
            // A char literal ('x', '\n', '\u{..}'), else a lifetime.
            if next == Some('\\') {
                let mut j = i + 2;
                while j < b.len() && b[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
            } else if b.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Path, // ::
    Open,
    Close,
    Comma,
    Star,
    Semi,
    Other(char),
}

fn tokens(code: &str) -> Vec<Tok> {
    let b: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_alphanumeric() || c == '_' {
            let s: String = b[i..]
                .iter()
                .take_while(|c| c.is_alphanumeric() || **c == '_')
                .collect();
            i += s.chars().count();
            out.push(Tok::Ident(s));
            continue;
        }
        i += 1;
        out.push(match c {
            ':' if b.get(i) == Some(&':') => {
                i += 1;
                Tok::Path
            }
            '{' => Tok::Open,
            '}' => Tok::Close,
            ',' => Tok::Comma,
            '*' => Tok::Star,
            ';' => Tok::Semi,
            c if c.is_whitespace() => continue,
            c => Tok::Other(c),
        });
    }
    out
}

/// One path a module names (a glob's ends at the module it empties).
#[derive(Debug, Clone)]
struct Named {
    /// The module (inline modules included) the path is written in.
    at: Vec<String>,
    segs: Vec<String>,
    /// For a `pub` use: the name it is re-exported as.
    export: Option<String>,
}

/// Expands a use tree starting at `t[*i]` into paths.
fn use_tree(
    t: &[Tok],
    i: &mut usize,
    prefix: &[String],
    out: &mut Vec<(Vec<String>, bool, String)>,
) {
    let mut segs = prefix.to_vec();
    loop {
        match t.get(*i) {
            Some(Tok::Ident(s)) => {
                segs.push(s.clone());
                *i += 1;
            }
            Some(Tok::Star) => {
                *i += 1;
                out.push((segs, true, String::new()));
                return;
            }
            Some(Tok::Open) => {
                *i += 1;
                loop {
                    match t.get(*i) {
                        Some(Tok::Close) => {
                            *i += 1;
                            return;
                        }
                        Some(Tok::Comma) => *i += 1,
                        None => return,
                        _ => use_tree(t, i, &segs, out),
                    }
                }
            }
            _ => return,
        }
        match t.get(*i) {
            Some(Tok::Path) => *i += 1,
            Some(Tok::Ident(a)) if a == "as" => {
                let alias = match t.get(*i + 1) {
                    Some(Tok::Ident(x)) => x.clone(),
                    _ => String::new(),
                };
                *i += 2;
                out.push((segs, false, alias));
                return;
            }
            _ => {
                let name = segs.last().cloned().unwrap_or_default();
                out.push((segs, false, name));
                return;
            }
        }
    }
}

/// The paths a file names through `use` and in its code, with the module
/// (inline ones included) each is written in.
fn named_paths(module: &[String], text: &str) -> Vec<Named> {
    let t = tokens(&code_only(text));
    let mut out = Vec::new();
    // Inline modules: (name, brace depth inside them).
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    let here = |inline: &[(String, usize)]| -> Vec<String> {
        module
            .iter()
            .cloned()
            .chain(inline.iter().map(|(n, _)| n.clone()))
            .collect()
    };
    while i < t.len() {
        match &t[i] {
            Tok::Open => depth += 1,
            Tok::Close => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Tok::Ident(k) if k == "mod" => {
                if let (Some(Tok::Ident(name)), Some(Tok::Open)) = (t.get(i + 1), t.get(i + 2)) {
                    inline.push((name.clone(), depth + 1));
                }
            }
            Tok::Ident(k) if k == "use" => {
                // `pub use`, `pub(crate) use`, `pub(super) use`: a re-export.
                let public = i >= 1
                    && (t[i - 1] == Tok::Ident("pub".into())
                        || (t[i - 1] == Tok::Other(')')
                            && i >= 4
                            && t[i - 4] == Tok::Ident("pub".into())));
                let mut j = i + 1;
                let mut trees = Vec::new();
                use_tree(&t, &mut j, &[], &mut trees);
                for (segs, glob, name) in trees {
                    out.push(Named {
                        at: here(&inline),
                        segs,
                        export: (public && !glob).then_some(name),
                    });
                }
                while j < t.len() && t[j] != Tok::Semi {
                    j += 1;
                }
                i = j;
            }
            Tok::Ident(k)
                if (k == "crate" || k == "super")
                    && t.get(i + 1) == Some(&Tok::Path)
                    && !(i >= 1 && t[i - 1] == Tok::Other('$'))
                    && !(i >= 1 && t[i - 1] == Tok::Ident("in".into())) =>
            {
                let mut segs = vec![k.clone()];
                let mut j = i + 1;
                while t.get(j) == Some(&Tok::Path) {
                    match t.get(j + 1) {
                        Some(Tok::Ident(s)) => segs.push(s.clone()),
                        _ => break,
                    }
                    j += 2;
                }
                out.push(Named {
                    at: here(&inline),
                    segs,
                    export: None,
                });
                i = j;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// One crate's modules: module path -> file, and what each file names.
struct Krate {
    files: BTreeMap<Vec<String>, String>,
    named: BTreeMap<String, Vec<Named>>,
}

impl Krate {
    /// The file that holds `module` (an inline module's is its file's).
    fn file_of(&self, module: &[String]) -> &str {
        let mut m = module.to_vec();
        loop {
            if let Some(f) = self.files.get(&m) {
                return f;
            }
            m.pop();
        }
    }

    /// Where a path leads: the file of the deepest module it names, or of
    /// the item a module re-exports under that name. `None` for paths that
    /// leave the crate.
    fn resolve(&self, at: &[String], segs: &[String], hops: usize) -> Option<String> {
        let (mut cur, rest): (Vec<String>, &[String]) = match segs.first()?.as_str() {
            "crate" => (Vec::new(), &segs[1..]),
            "super" => {
                let ups = segs.iter().take_while(|s| *s == "super").count();
                (at[..at.len().checked_sub(ups)?].to_vec(), &segs[ups..])
            }
            "self" => (at.to_vec(), &segs[1..]),
            first => {
                // A path from the current module: its child, else not ours.
                let mut child = at.to_vec();
                child.push(first.to_string());
                if !self.files.contains_key(&child) {
                    return None;
                }
                (at.to_vec(), segs)
            }
        };
        for (k, seg) in rest.iter().enumerate() {
            let mut next = cur.clone();
            next.push(seg.clone());
            if self.files.contains_key(&next) {
                cur = next;
                continue;
            }
            // Not a module: an item of `cur`, or one it re-exports.
            if k + 1 == rest.len() && hops < 8 {
                let file = self.file_of(&cur);
                let reexport = self.named.get(file).and_then(|ns| {
                    ns.iter()
                        .find(|n| n.export.as_deref() == Some(seg.as_str()) && n.at == cur)
                });
                if let Some(n) = reexport {
                    return self
                        .resolve(&n.at, &n.segs, hops + 1)
                        .or_else(|| Some(file.to_string()));
                }
            }
            break;
        }
        Some(self.file_of(&cur).to_string())
    }
}

/// The crates' module graphs: file -> the files it imports from.
fn import_graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut by_crate: BTreeMap<String, Vec<(String, PathBuf)>> = BTreeMap::new();
    for (rel, path) in sources() {
        by_crate
            .entry(rel.split('/').next().unwrap().to_string())
            .or_default()
            .push((rel, path));
    }
    let mut graph = BTreeMap::new();
    for files in by_crate.values() {
        // A binary beside a library (workload's main.rs) is a crate of
        // its own that reaches the library by its name, not `crate::`.
        let has_lib = files.iter().any(|(r, _)| r.ends_with("/src/lib.rs"));
        let mut k = Krate {
            files: BTreeMap::new(),
            named: BTreeMap::new(),
        };
        for (rel, path) in files {
            let inner = rel.split_once("/src/").unwrap().1;
            if has_lib && inner == "main.rs" {
                continue;
            }
            let mut module: Vec<String> = inner
                .trim_end_matches(".rs")
                .split('/')
                .map(str::to_string)
                .collect();
            if matches!(
                module.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                module.pop();
            }
            let text = std::fs::read_to_string(path).unwrap();
            k.named.insert(rel.clone(), named_paths(&module, &text));
            k.files.insert(module, rel.clone());
        }
        for (file, named) in &k.named {
            let edges: &mut BTreeSet<String> = graph.entry(file.clone()).or_default();
            for n in named {
                // Only what a module takes from others: `crate::`, `super::`
                // (and `self::` or a child's name in a re-export it follows).
                if !matches!(n.segs.first().map(String::as_str), Some("crate" | "super")) {
                    continue;
                }
                if let Some(t) = k.resolve(&n.at, &n.segs, 0).filter(|t| t != file) {
                    edges.insert(t);
                }
            }
        }
    }
    graph
}

/// Strongly connected components with more than one file (Tarjan).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct S<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(s: &mut S<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        for w in s.g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let l = s.low[v].min(s.low[w]);
                s.low.insert(v, l);
            } else if s.on.contains(w) {
                let l = s.low[v].min(s.index[w]);
                s.low.insert(v, l);
            }
        }
        if s.low[v] == s.index[v] {
            let mut c = BTreeSet::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                c.insert(w.to_string());
                if w == v {
                    break;
                }
            }
            if c.len() > 1 {
                s.out.push(c);
            }
        }
    }
    let mut s = S {
        g: graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let graph = import_graph();
    let found = circles(&graph);
    let known: Vec<BTreeSet<String>> = KNOWN_CIRCLES
        .iter()
        .map(|(_, files)| files.iter().map(|f| f.to_string()).collect())
        .collect();
    let show = |c: &BTreeSet<String>| {
        c.iter()
            .map(|f| {
                let into: Vec<&str> = graph[f]
                    .iter()
                    .filter(|t| c.contains(*t))
                    .map(String::as_str)
                    .collect();
                format!("  {f} imports {}", into.join(", "))
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    let new: Vec<String> = found
        .iter()
        .filter(|c| !known.contains(c))
        .map(show)
        .collect();
    assert!(
        new.is_empty(),
        "import circles (break each: move what both need to a module of its own):\n{}",
        new.join("\n\n")
    );
    let gone: Vec<&str> = KNOWN_CIRCLES
        .iter()
        .zip(&known)
        .filter(|(_, k)| !found.contains(k))
        .map(|((name, _), _)| *name)
        .collect();
    assert!(
        gone.is_empty(),
        "circles in KNOWN_CIRCLES that no longer exist: remove them from the list:\n{}",
        gone.join("\n")
    );
}

#[test]
fn the_circle_check_finds_a_circle() {
    // Two files of a made-up crate that import each other, and a third
    // that only imports: the check must see the first two and not it.
    let a = named_paths(&["a".into()], "use crate::b::B; // crate::c\nfn f() {}");
    let b = named_paths(&["b".into()], "pub struct B;\nfn g() { super::a::f(); }");
    let c = named_paths(
        &["c".into()],
        "use crate::a::{self, *};\nconst S: &str = \"crate::b\";",
    );
    let k = Krate {
        files: [
            ("a", "x/src/a.rs"),
            ("b", "x/src/b.rs"),
            ("c", "x/src/c.rs"),
        ]
        .into_iter()
        .map(|(m, f)| (vec![m.to_string()], f.to_string()))
        .chain([(vec![], "x/src/lib.rs".to_string())])
        .collect(),
        named: [("x/src/a.rs", a), ("x/src/b.rs", b), ("x/src/c.rs", c)]
            .into_iter()
            .map(|(f, n)| (f.to_string(), n))
            .collect(),
    };
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, named) in &k.named {
        for n in named {
            if let Some(t) = k.resolve(&n.at, &n.segs, 0).filter(|t| t != file) {
                g.entry(file.clone()).or_default().insert(t);
            }
        }
    }
    let found = circles(&g);
    let want: BTreeSet<String> = ["x/src/a.rs", "x/src/b.rs"].map(String::from).into();
    assert_eq!(found, vec![want], "{g:?}");
}

/// The docs the bench tables are cited from: docs/, the top README and the
/// crates' READMEs.
fn doc_files() -> Vec<PathBuf> {
    let root = workspace();
    let mut docs: Vec<PathBuf> = ["docs", "crates"]
        .iter()
        .flat_map(|d| std::fs::read_dir(root.join(d)).expect("read_dir"))
        .map(|e| e.expect("dir entry").path())
        .flat_map(|p| {
            if p.is_dir() && p.parent().is_some_and(|d| d.ends_with("crates")) {
                vec![p.join("README.md")]
            } else {
                vec![p]
            }
        })
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.push(root.join("README.md"));
    docs.sort();
    docs
}

/// Every `bench/results/...` path in `text`, without the punctuation that
/// ends a sentence round it.
fn cited_results(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("bench/results/") {
        let path: String = rest[i..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || "_-./*".contains(*c))
            .collect();
        rest = &rest[i + path.len()..];
        out.push(path.trim_end_matches(['.', '/']).to_string());
    }
    out
}

/// `name` matches `pattern`, where `*` stands for any run of characters.
fn wildcard(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => {
            name.starts_with(head)
                && (head.len()..=name.len())
                    .any(|i| name.is_char_boundary(i) && wildcard(tail, &name[i..]))
        }
    }
}

/// The files and directories under `root` that `path` (`/`-separated, a
/// component may hold `*`) names.
fn expand(root: &Path, path: &str) -> Vec<PathBuf> {
    let mut found = vec![root.to_path_buf()];
    for part in path.split('/') {
        found = found
            .into_iter()
            .flat_map(|dir| {
                if !part.contains('*') {
                    let p = dir.join(part);
                    return if p.exists() { vec![p] } else { vec![] };
                }
                std::fs::read_dir(&dir)
                    .into_iter()
                    .flatten()
                    .map(|e| e.expect("dir entry").path())
                    .filter(|p| {
                        p.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| wildcard(part, n))
                    })
                    .collect()
            })
            .collect();
    }
    found
}

/// bench/results keeps only what the docs cite and what the scripts read
/// back (bench/results/README.md): every path the docs name must be there.
#[test]
fn every_bench_result_the_docs_cite_is_there() {
    let root = workspace();
    let mut cited = 0;
    let mut missing = Vec::new();
    for doc in doc_files() {
        let text = std::fs::read_to_string(&doc).expect("read doc");
        for path in cited_results(&text) {
            cited += 1;
            if expand(&root, &path).is_empty() {
                let doc = doc
                    .strip_prefix(&root)
                    .unwrap_or(&doc)
                    .display()
                    .to_string();
                missing.push(format!("{doc}: {path}"));
            }
        }
    }
    assert!(
        cited > 20,
        "only {cited} bench/results paths found in the docs"
    );
    assert!(
        missing.is_empty(),
        "the docs cite bench/results paths that are not in the tree (bring the file back \
         from git, see bench/results/README.md, or cite what is there):\n{}",
        missing.join("\n")
    );
}

#[test]
fn the_citation_check_reads_paths_and_globs() {
    let text = "see `bench/results/a-1/table.txt`, and bench/results/b/r*/x.json.";
    assert_eq!(
        cited_results(text),
        ["bench/results/a-1/table.txt", "bench/results/b/r*/x.json"]
    );
    assert!(wildcard("r*", "r2") && wildcard("*.json", "a.json") && !wildcard("r*", "s1"));
    let root = workspace();
    assert!(!expand(&root, "bench/results/baseline/*.json").is_empty());
    assert!(expand(&root, "bench/results/baseline/*.nothing").is_empty());
    assert!(expand(&root, "bench/results/no-such-dir").is_empty());
}

/// docs/slurm.md shows each of the site files the package installs and
/// the lanes run (dist/slurm/), as they are.
#[test]
fn the_site_configuration_in_the_docs_is_the_tested_one() {
    let doc = std::fs::read_to_string(workspace().join("docs/slurm.md")).unwrap();
    let dir = workspace().join("dist/slurm");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 3, "{files:?}");
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(
            doc.contains(&format!("```\n{text}```")),
            "docs/slurm.md does not show {} as it is (a code block of its whole text)",
            f.display()
        );
    }
}
