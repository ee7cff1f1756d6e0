//! Checks on the whole workspace, read as text (like
//! crates/linux/tests/layers.rs for one crate): every source file is on
//! docs/design.md's code map; no module imports another that imports it
//! back, directly or round a loop, nor reaches back into its crate's root
//! for an item the root defines; no source file or function is too long.
//! Here, in the crate that sits on top of all the others, because they are
//! about all of them.

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
    /// A glob import (`use crate::x::*`): `segs` name the module emptied.
    glob: bool,
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
                        glob,
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
                    glob: false,
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
    /// The functions, macros, consts and statics the root file (lib.rs,
    /// main.rs) defines itself.
    root_items: BTreeSet<String>,
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

/// The workspace's crates, each with its modules and what they name.
fn krates() -> Vec<Krate> {
    let mut by_crate: BTreeMap<String, Vec<(String, PathBuf)>> = BTreeMap::new();
    for (rel, path) in sources() {
        by_crate
            .entry(rel.split('/').next().unwrap().to_string())
            .or_default()
            .push((rel, path));
    }
    let mut out = Vec::new();
    for files in by_crate.values() {
        // A binary beside a library (workload's main.rs) is a crate of
        // its own that reaches the library by its name, not `crate::`.
        let has_lib = files.iter().any(|(r, _)| r.ends_with("/src/lib.rs"));
        let mut k = Krate {
            files: BTreeMap::new(),
            named: BTreeMap::new(),
            root_items: BTreeSet::new(),
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
            if module.is_empty() {
                k.root_items = helpers(&text);
            }
            k.named.insert(rel.clone(), named_paths(&module, &text));
            k.files.insert(module, rel.clone());
        }
        out.push(k);
    }
    out
}

/// The crates' module graphs: file -> the files it imports from.
fn import_graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut graph = BTreeMap::new();
    for k in krates() {
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

/// The functions, macros, consts and statics a file defines at its top
/// level (not in an inline module, an `impl` or a function).
fn helpers(text: &str) -> BTreeSet<String> {
    let t = tokens(&code_only(text));
    let mut out = BTreeSet::new();
    let mut depth = 0usize;
    for (i, tok) in t.iter().enumerate() {
        match tok {
            Tok::Open => depth += 1,
            Tok::Close => depth = depth.saturating_sub(1),
            Tok::Ident(k) if depth == 0 => {
                let kinds = ["fn", "const", "static"];
                // `macro_rules! m`, `static mut X`: the name comes second.
                let second = (k == "macro_rules" && t.get(i + 1) == Some(&Tok::Other('!')))
                    || (k == "static" && t.get(i + 1) == Some(&Tok::Ident("mut".into())));
                let name = if second {
                    t.get(i + 2)
                } else if kinds.contains(&k.as_str()) {
                    t.get(i + 1)
                } else {
                    None
                };
                // `const fn f`: the name comes with the `fn`.
                if let Some(Tok::Ident(n)) = name {
                    if !["fn", "unsafe", "async", "extern", "_"].contains(&n.as_str()) {
                        out.insert(n.clone());
                    }
                }
            }
            _ => {}
        }
    }
    out
}

impl Krate {
    /// Where a `crate::`/`super::` path leads inside the crate: the
    /// deepest module it names and the first segment after it that is not
    /// a module (an item of that module), if any.
    fn walk(&self, at: &[String], segs: &[String]) -> Option<(Vec<String>, Option<String>)> {
        let (mut cur, rest): (Vec<String>, &[String]) = match segs.first()?.as_str() {
            "crate" => (Vec::new(), &segs[1..]),
            "super" => {
                let ups = segs.iter().take_while(|s| *s == "super").count();
                (at[..at.len().checked_sub(ups)?].to_vec(), &segs[ups..])
            }
            _ => return None,
        };
        for seg in rest {
            let mut next = cur.clone();
            next.push(seg.clone());
            if !self.files.contains_key(&next) {
                return Some((cur, Some(seg.clone())));
            }
            cur = next;
        }
        Some((cur, None))
    }

    /// The helpers the crate's other files take from its root file: each
    /// as `file: path`. The rule: a module may name the root's modules,
    /// what the root re-exports, and the types and traits it defines (a
    /// library's vocabulary, as memgang-proto's `Request`); not a
    /// function, macro, const or static the root defines. Those are shared
    /// helpers (as `humantime_arg` was in the cli's main.rs): reaching
    /// back up for them inverts the crate's layers, the root being its
    /// entry point and table of contents, so they go in a module of their
    /// own. Globs of the root (`use crate::*`) count too: they would hide
    /// such a reach.
    fn root_reaches(&self) -> Vec<String> {
        let Some(root) = self.files.get(&Vec::new()) else {
            return Vec::new();
        };
        let reexports: BTreeSet<&str> = self.named[root]
            .iter()
            .filter(|n| n.at.is_empty())
            .filter_map(|n| n.export.as_deref())
            .collect();
        let mut out = Vec::new();
        for (file, named) in &self.named {
            if file == root {
                continue;
            }
            for n in named {
                let Some((module, item)) = self.walk(&n.at, &n.segs) else {
                    continue;
                };
                if !module.is_empty() {
                    continue;
                }
                let reach = match item {
                    None => n.glob,
                    Some(item) => {
                        self.root_items.contains(&item) && !reexports.contains(item.as_str())
                    }
                };
                if reach {
                    let glob = if n.glob { "::*" } else { "" };
                    out.push(format!("{file}: {}{glob}", n.segs.join("::")));
                }
            }
        }
        out
    }
}

#[test]
fn no_module_reaches_back_into_its_crate_root() {
    let found: Vec<String> = krates().iter().flat_map(Krate::root_reaches).collect();
    assert!(
        found.is_empty(),
        "modules that take a function, macro, const or static their crate's root (lib.rs, \
         main.rs) defines: move what they share into a module of its own (as crates/cli/src/args.rs holds the \
         verbs' argument parsers) and import it from there:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_root_check_finds_a_module_that_reaches_back() {
    // A made-up binary: main.rs defines helpers and a type, declares two
    // modules and re-exports an item of one. `a` reaches back for the
    // helpers (in a `use` and in expressions) and by a glob; its use of
    // the type is allowed. `b` takes only modules, a re-export and the
    // type, and its inline tests' glob is of `b`.
    let main = "mod a;\nmod b;\npub use b::Thing;\nconst fn limit() -> u32 { 1 }\n\
                pub fn helper() {}\nstruct Cli;\nimpl Cli { fn new() {} }\n\
                static mut N: u8 = 0;\nmacro_rules! say { () => {} }\n\
                mod tests { fn inner() {} }\nfn main() { a::f(); }";
    let a = "use crate::helper;\nuse super::*;\n\
             pub fn f() { super::limit(); crate::Cli::new(); crate::b::g(); crate::say!(); }";
    let b = "pub struct Thing;\npub fn g() { let _ = crate::Thing; crate::a::f(); }\n\
             fn h(_: crate::Cli) {}\n\
             // crate::helper\nconst S: &str = \"crate::helper\";\n\
             mod tests { use super::*; use crate::b::*; }";
    let k = Krate {
        files: [
            (vec![], "x/src/main.rs"),
            (vec!["a".to_string()], "x/src/a.rs"),
            (vec!["b".to_string()], "x/src/b.rs"),
        ]
        .into_iter()
        .map(|(m, f)| (m, f.to_string()))
        .collect(),
        named: [
            ("x/src/main.rs", named_paths(&[], main)),
            ("x/src/a.rs", named_paths(&["a".into()], a)),
            ("x/src/b.rs", named_paths(&["b".into()], b)),
        ]
        .into_iter()
        .map(|(f, n)| (f.to_string(), n))
        .collect(),
        root_items: helpers(main),
    };
    assert_eq!(
        k.root_items,
        ["N", "helper", "limit", "main", "say"]
            .map(String::from)
            .into()
    );
    assert_eq!(
        k.root_reaches(),
        [
            "x/src/a.rs: crate::helper",
            "x/src/a.rs: super::*",
            "x/src/a.rs: super::limit",
            "x/src/a.rs: crate::say",
        ]
    );
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
        root_items: BTreeSet::new(),
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

/// docs/README.md is the index of docs/: it links every page there, and
/// every page it links is there.
#[test]
fn docs_readme_lists_every_doc() {
    let docs = workspace().join("docs");
    let index = std::fs::read_to_string(docs.join("README.md")).expect("docs/README.md");
    let linked: BTreeSet<String> = index
        .split("](")
        .skip(1)
        .filter_map(|s| s.split_once(')').map(|(target, _)| target.to_string()))
        .filter(|t| !t.contains('/') && t.ends_with(".md"))
        .collect();
    let pages: BTreeSet<String> = std::fs::read_dir(&docs)
        .expect("read docs/")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md") && n != "README.md")
        .collect();
    assert!(pages.len() > 5, "only {} pages in docs/", pages.len());
    let missing: Vec<_> = pages.difference(&linked).collect();
    let gone: Vec<_> = linked.difference(&pages).collect();
    assert!(
        missing.is_empty() && gone.is_empty(),
        "docs/README.md leaves out {missing:?} (add a line each) and links {gone:?}, which are not in docs/"
    );
}

/// The guide's limits (docs/design.md): a source file under 1,000 lines, a
/// function at most 150 (aim under 100).
const MAX_FILE_LINES: usize = 1000;
const MAX_FN_LINES: usize = 150;

/// Files held to no length: memadapt's pure algorithm, kept whole so that
/// it reads as the paper's (crates/memadapt/README.md). Tests are not
/// held to the file limit: `tests/` are not sources here, and a file's
/// inline `#[cfg(test)] mod` is not counted (a test module in a file of
/// its own, as runtime's executor/tests.rs, is). Functions are held to
/// theirs everywhere.
const LONG_ALLOWED: &[&str] = &["memadapt/src/adapt.rs", "memadapt/src/store.rs"];

/// Each function of `text` with a body: its name, the line its `fn` is on
/// (from 1) and its length in lines, from that line to its closing brace.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let code: Vec<char> = code_only(text).chars().collect();
    let line_at = |i: usize| code[..i].iter().filter(|c| **c == '\n').count() + 1;
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    let mut i = 0;
    while i + 2 < code.len() {
        let is_fn = code[i] == 'f'
            && code[i + 1] == 'n'
            && code[i + 2].is_whitespace()
            && (i == 0 || !word(code[i - 1]));
        if !is_fn {
            i += 1;
            continue;
        }
        let mut j = i + 2;
        while j < code.len() && code[j].is_whitespace() {
            j += 1;
        }
        let name: String = code[j..].iter().take_while(|c| word(**c)).collect();
        if name.is_empty() {
            i += 2;
            continue;
        }
        // The body's `{`, or a `;` that ends a declaration without one
        // (neither inside the signature's brackets: `[u8; 4]`).
        let mut nest = 0i32;
        while j < code.len() {
            match code[j] {
                '(' | '[' => nest += 1,
                ')' | ']' => nest -= 1,
                '{' | ';' if nest == 0 => break,
                _ => {}
            }
            j += 1;
        }
        if code.get(j) != Some(&'{') {
            i = j;
            continue;
        }
        let mut depth = 0;
        let mut end = j;
        for (k, c) in code.iter().enumerate().skip(j) {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => continue,
            }
            if depth == 0 {
                end = k;
                break;
            }
        }
        let first = line_at(i);
        out.push((name, first, line_at(end) - first + 1));
        // Nested functions are measured too: go on inside the body.
        i = j + 1;
    }
    out
}

/// The lines of `text` outside its `#[cfg(test)] mod NAME { ... }` blocks.
fn lines_but_tests(text: &str) -> usize {
    let code = code_only(text);
    let mut tests = 0;
    let mut rest = code.as_str();
    while let Some(i) = rest.find("#[cfg(test)]") {
        let after = &rest[i + "#[cfg(test)]".len()..];
        let head = after.trim_start();
        let is_mod = head.starts_with("mod ") || head.starts_with("pub mod ");
        let open = head
            .find(['{', ';'])
            .filter(|o| head[*o..].starts_with('{'));
        let (true, Some(open)) = (is_mod, open) else {
            rest = after;
            continue;
        };
        let body = &head[open..];
        let mut depth = 0;
        let mut end = body.len();
        for (k, c) in body.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => continue,
            }
            if depth == 0 {
                end = k + 1;
                break;
            }
        }
        let block = &rest[i..rest.len() - head.len() + open + end];
        tests += block.matches('\n').count() + 1;
        rest = &head[open + end..];
    }
    text.lines().count() - tests.min(text.lines().count())
}

/// Source files over [`MAX_FILE_LINES`] and functions over
/// [`MAX_FN_LINES`], as `file: N lines` and `file:LINE fn NAME: N lines`.
fn too_long() -> Vec<String> {
    let mut out = Vec::new();
    for (rel, path) in sources() {
        if LONG_ALLOWED.contains(&rel.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let lines = lines_but_tests(&text);
        if lines > MAX_FILE_LINES {
            out.push(format!("{rel}: {lines} lines besides tests"));
        }
        for (name, line, len) in functions(&text) {
            if len > MAX_FN_LINES {
                out.push(format!("{rel}:{line} fn {name}: {len} lines"));
            }
        }
    }
    out
}

#[test]
fn no_source_file_or_function_is_too_long() {
    let found = too_long();
    assert!(
        found.is_empty(),
        "over the limits ({MAX_FILE_LINES} lines a file, {MAX_FN_LINES} a function): split \
         each by the concerns it holds (one function per action arm, one file per \
         room):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_length_check_measures_functions() {
    let text = "fn short() {}\n\
                /// fn in a comment { { {\n\
                pub(crate) fn long(x: [u8; 4], f: fn(u8) -> u8) -> u32 {\n\
                    let s = \"}\";\n    let c = '{';\n\
                    fn inner() {\n        let _ = 1;\n    }\n\
                    0\n}\n\
                trait T {\n    fn declared(&self);\n    fn given(&self) {}\n}\n";
    assert_eq!(
        functions(text),
        [
            ("short".to_string(), 1, 1),
            ("long".to_string(), 3, 8),
            ("inner".to_string(), 6, 3),
            ("given".to_string(), 13, 1),
        ]
    );
    // A file of 151 lines that is one function is over; 150 is not.
    let body = |n: usize| format!("fn f() {{\n{}}}\n", "    let _ = 0;\n".repeat(n - 2));
    assert_eq!(functions(&body(151))[0].2, 151);
    assert!(functions(&body(MAX_FN_LINES))[0].2 <= MAX_FN_LINES);
    // A file's inline test module does not count towards its length; a
    // module that only some configuration builds does.
    let file = "fn a() {}\n#[cfg(test)]\nmod tests {\n    fn t() { let _ = \"}\"; }\n}\n\
                #[cfg(unix)]\nmod unix {\n}\n#[cfg(test)]\nmod other;\nfn b() {}\n";
    assert_eq!(file.lines().count(), 11);
    assert_eq!(lines_but_tests(file), 7);
}

/// The dependencies `manifest` (a crate's Cargo.toml) declares with a
/// version or path of its own rather than `workspace = true`, as
/// `section: name`.
fn own_declarations(manifest: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut section = String::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            section = line.trim_matches(['[', ']']).to_string();
            continue;
        }
        let deps = section.ends_with("dependencies") && !section.starts_with("workspace");
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        if !deps || key.starts_with('#') {
            continue;
        }
        let shared = key.ends_with(".workspace") && value == "true"
            || value.replace(' ', "").contains("workspace=true");
        if !shared {
            out.push(format!("{section}: {key}"));
        }
    }
    out
}

/// Workspace dependencies are declared once, in the root Cargo.toml: a
/// crate names them with `workspace = true` (features may be added).
#[test]
fn dependencies_are_declared_once_in_the_workspace() {
    let crates = workspace().join("crates");
    let mut found = Vec::new();
    for e in std::fs::read_dir(&crates).unwrap().flatten() {
        let manifest = e.path().join("Cargo.toml");
        if let Ok(text) = std::fs::read_to_string(&manifest) {
            let name = e.file_name().to_string_lossy().into_owned();
            found.extend(
                own_declarations(&text)
                    .into_iter()
                    .map(|d| format!("crates/{name}/Cargo.toml [{d}]")),
            );
        }
    }
    found.sort();
    assert!(
        found.is_empty(),
        "dependencies declared in a crate rather than in the root Cargo.toml's \
         [workspace.dependencies] (declare them there, and `name.workspace = true` here):\n{}",
        found.join("\n")
    );
    let own = own_declarations(
        "[package]\nname = \"x\"\n[dependencies]\na.workspace = true\n\
         b = { workspace = true, features = [\"f\"] }\nc = \"1\"\n\
         [dev-dependencies]\nd = { path = \"../d\" }\n[features]\ntesting = []\n",
    );
    assert_eq!(own, ["dependencies: c", "dev-dependencies: d"]);
}

/// Only the cli draws on a terminal: the libraries (the runtime, the
/// experiment runner) tell it what happens through the runtime's
/// `Progress` callback, and memgangd logs.
#[test]
fn only_the_cli_draws_progress_bars() {
    let crates = workspace().join("crates");
    let mut found = Vec::new();
    for e in std::fs::read_dir(&crates).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(e.path().join("Cargo.toml")).unwrap_or_default();
        if name != "cli"
            && text
                .lines()
                .any(|l| l.trim_start().starts_with("indicatif"))
        {
            found.push(name);
        }
    }
    assert!(
        found.is_empty(),
        "crates other than the cli depend on indicatif: {found:?}"
    );
}
