//! Which servers serve which file: file extension → language id → the set of servers run together
//! for it: the first of its commands found on `PATH` (a type checker such as pyright), and beside it
//! each of its `also` commands found (a linter and formatter such as `ruff server`), at most
//! [`MAX_SERVERS`]. [`ServerTable::builtin`] knows the common servers; [`parse_override`] reads
//! `LANG=COMMAND`; [`ServerTable::plan`] tells `doctor` what would run for a workspace and how to
//! install what is missing.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::path::{Component, Path, PathBuf};

use crate::sys;

/// The most servers run together for one language (the first found of its commands and its
/// `also` commands found): each is a process with its own memory and its own copy of the files
/// it is given.
pub const MAX_SERVERS: usize = 4;

/// One language: its id (sent in `didOpen`), its file extensions and the server commands tried in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Language {
    /// The LSP language id, such as `python` or `typescriptreact`.
    pub id: String,
    /// File extensions without the dot, matched case-sensitively (`C` is C++).
    pub extensions: Vec<String>,
    /// Commands (program then arguments), tried in order: the first found runs.
    pub commands: Vec<Vec<String>>,
    /// Commands run beside it, each one found (for Python, `ruff server`: lint findings and
    /// formatting beside pyright's type errors). Formatting goes to the last server of the set
    /// that formats, so a formatter here is preferred to the main server's.
    pub also: Vec<Vec<String>>,
}

/// The table of languages and their servers.
///
/// ```
/// use claude_ide_bridge_lsp::{parse_override, ServerTable};
/// use std::path::Path;
/// let mut table = ServerTable::builtin();
/// assert_eq!(table.language_for(Path::new("src/app.py")), Some("python"));
/// assert_eq!(table.language_for(Path::new("README")), None);
/// table.set(parse_override("python=pylsp -v").unwrap());
/// assert_eq!(table.commands("python"), [vec!["pylsp".to_string(), "-v".to_string()]]);
/// table.add(parse_override("python=ruff server").unwrap()).unwrap(); // run beside it
/// assert_eq!(table.also("python"), [vec!["ruff".to_string(), "server".to_string()]]);
/// table.set(parse_override("zig=zls").unwrap()); // a new language: `zig` is also its extension
/// assert_eq!(table.language_for(Path::new("main.zig")), Some("zig"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerTable {
    languages: Vec<Language>,
    /// The commands an override named (`--lsp`): run as given, never passed over by [`serves`].
    given: BTreeSet<Vec<String>>,
}

fn cmd(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| (*w).to_owned()).collect()
}

impl ServerTable {
    /// No language at all (`--no-lsp`).
    pub fn empty() -> ServerTable {
        ServerTable::default()
    }

    /// The built-in table: Python, TypeScript/JavaScript, Rust, Go, C/C++. Python runs a type
    /// checker (pyright, basedpyright or pylsp, the first found) and `ruff server` beside it.
    pub fn builtin() -> ServerTable {
        let python = vec![
            cmd(&["pyright-langserver", "--stdio"]),
            cmd(&["basedpyright-langserver", "--stdio"]),
            cmd(&["pylsp"]),
        ];
        // TypeScript 7's own server first (`tsc --lsp`, the native compiler's; a `tsc` of an
        // earlier TypeScript has none and is passed over, see `serves`): since 7, npm's
        // `typescript` has no `tsserver.js`, which the other two drive, so beside it they find
        // none. Then typescript-language-server, the more widely installed of those, and vtsls
        // (VS Code's TypeScript extension as a server) when it is the one installed.
        let ts = vec![
            cmd(&["tsc", "--lsp", "--stdio"]),
            cmd(&["typescript-language-server", "--stdio"]),
            cmd(&["vtsls", "--stdio"]),
        ];
        let clangd = vec![cmd(&["clangd"])];
        let lang = |id: &str, exts: &[&str], commands: &Vec<Vec<String>>| Language {
            id: id.to_owned(),
            extensions: exts.iter().map(|e| (*e).to_owned()).collect(),
            commands: commands.clone(),
            also: Vec::new(),
        };
        let mut python = lang("python", &["py", "pyi"], &python);
        python.also = vec![cmd(&["ruff", "server"])];
        ServerTable {
            languages: vec![
                python,
                lang("typescript", &["ts", "mts", "cts"], &ts),
                lang("typescriptreact", &["tsx"], &ts),
                lang("javascript", &["js", "mjs", "cjs"], &ts),
                lang("javascriptreact", &["jsx"], &ts),
                lang("rust", &["rs"], &vec![cmd(&["rust-analyzer"])]),
                lang("go", &["go"], &vec![cmd(&["gopls"])]),
                lang("c", &["c", "h"], &clangd),
                lang(
                    "cpp",
                    &["cc", "cpp", "cxx", "c++", "hh", "hpp", "hxx", "C", "H"],
                    &clangd,
                ),
            ],
            given: BTreeSet::new(),
        }
    }

    /// The languages, in table order.
    pub fn languages(&self) -> &[Language] {
        &self.languages
    }

    /// The language of a file, by its extension.
    pub fn language_for(&self, path: &Path) -> Option<&str> {
        let ext = path.extension().and_then(OsStr::to_str)?;
        self.languages
            .iter()
            .find(|l| l.extensions.iter().any(|e| e == ext))
            .map(|l| l.id.as_str())
    }

    /// The commands of a language (empty when it is unknown).
    pub fn commands(&self, language: &str) -> &[Vec<String>] {
        self.languages
            .iter()
            .find(|l| l.id == language)
            .map_or(&[], |l| l.commands.as_slice())
    }

    /// The commands run beside the main server of a language (empty when it is unknown).
    pub fn also(&self, language: &str) -> &[Vec<String>] {
        self.languages
            .iter()
            .find(|l| l.id == language)
            .map_or(&[], |l| l.also.as_slice())
    }

    /// Adds a language, or replaces the one with the same id.
    pub fn push(&mut self, language: Language) {
        match self.languages.iter_mut().find(|l| l.id == language.id) {
            Some(old) => *old = language,
            None => self.languages.push(language),
        }
    }

    /// Applies an override: replaces the servers of its language (its commands, and those run
    /// beside them) by this one, or adds the language.
    pub fn set(&mut self, ov: Override) {
        self.given.insert(ov.command.clone());
        let lang = self.language_of(&ov.language);
        lang.commands = vec![ov.command];
        lang.also.clear();
    }

    /// Adds an override's command to the servers run together for its language (`--lsp` given
    /// again for a language), or adds the language. Refused past [`MAX_SERVERS`] commands.
    pub fn add(&mut self, ov: Override) -> Result<(), String> {
        let name = ov.language.clone();
        self.given.insert(ov.command.clone());
        let lang = self.language_of(&ov.language);
        if lang.commands.is_empty() {
            lang.commands = vec![ov.command];
            return Ok(());
        }
        if 1 + lang.also.len() >= MAX_SERVERS {
            return Err(format!(
                "{name}: at most {MAX_SERVERS} language servers run together for a language"
            ));
        }
        if !lang.commands.contains(&ov.command) && !lang.also.contains(&ov.command) {
            lang.also.push(ov.command);
        }
        Ok(())
    }

    /// The id of the language an override's name means: its own, or that of the language with
    /// this extension (`py` is `python`). `None` for a language not in the table.
    ///
    /// ```
    /// use claude_ide_bridge_lsp::ServerTable;
    /// let table = ServerTable::builtin();
    /// assert_eq!(table.named("py"), Some("python"));
    /// assert_eq!(table.named("python"), Some("python"));
    /// assert_eq!(table.named("zig"), None);
    /// ```
    pub fn named(&self, name: &str) -> Option<&str> {
        self.position(name).map(|at| self.languages[at].id.as_str())
    }

    fn position(&self, name: &str) -> Option<usize> {
        self.languages
            .iter()
            .position(|l| l.id == name)
            .or_else(|| {
                self.languages
                    .iter()
                    .position(|l| l.extensions.iter().any(|e| e == name))
            })
    }

    /// The language an override names (see [`ServerTable::named`]), or a new language without
    /// servers whose extension is the same word.
    fn language_of(&mut self, name: &str) -> &mut Language {
        let at = self.position(name).unwrap_or_else(|| {
            self.languages.push(Language {
                id: name.to_owned(),
                extensions: vec![name.to_owned()],
                commands: Vec::new(),
                also: Vec::new(),
            });
            self.languages.len() - 1
        });
        &mut self.languages[at]
    }

    /// The servers run together for `language`, whose programs are found (on `PATH`, or as given
    /// when they have a `/`): the first of its commands found, then each of its `also` commands
    /// found; at most [`MAX_SERVERS`], without repeats. Empty when none is found. A built-in
    /// command found that [`serves`] says is no server (a `tsc` before TypeScript 7) is passed
    /// over; one an override named is run as given.
    pub fn resolve(&self, language: &str) -> Vec<Vec<String>> {
        let found = |c: &&Vec<String>| {
            let program = c.first().and_then(|p| find_program(p));
            program.is_some_and(|p| self.given.contains(*c) || serves(c, &p))
        };
        let mut set: Vec<Vec<String>> = Vec::new();
        let main = self.commands(language).iter().find(found);
        for command in main
            .into_iter()
            .chain(self.also(language).iter().filter(found))
        {
            if set.len() < MAX_SERVERS && !set.contains(command) {
                set.push(command.clone());
            }
        }
        set
    }

    /// The programs of `language`'s servers that are not found, `servers` being the set that
    /// runs ([`ServerTable::resolve`]): when none of its commands runs (nothing runs, or only
    /// servers run beside them, as ruff without pyright: lint findings and no type errors),
    /// every one of them ([`Missing::first`]); and those run beside them that are not found.
    ///
    /// ```
    /// use claude_ide_bridge_lsp::{parse_override, ServerTable};
    /// let mut table = ServerTable::builtin();
    /// table.set(parse_override("zz=surely-not-installed-lsp").unwrap());
    /// let missing = table.missing("zz", &table.resolve("zz"));
    /// assert_eq!(missing[0].program, "surely-not-installed-lsp");
    /// assert!(missing[0].first);
    /// ```
    pub fn missing(&self, language: &str, servers: &[Vec<String>]) -> Vec<Missing> {
        let commands = self.commands(language);
        let first = !commands.iter().any(|c| servers.contains(c));
        let tried = if first { commands } else { &[] };
        let missing = |commands: &[Vec<String>], first: bool| -> Vec<Missing> {
            (commands.iter())
                .filter(|c| !servers.contains(*c))
                .filter_map(|c| c.first())
                .map(|program| {
                    let (install, wrong_path) = match not_a_program(program) {
                        Some(why) => (why, true),
                        None => (install_hint(program).to_owned(), false),
                    };
                    Missing {
                        program: program.clone(),
                        install,
                        wrong_path,
                        first,
                    }
                })
                .collect()
        };
        let mut all = missing(tried, true);
        all.extend(missing(self.also(language), false));
        all
    }

    /// What would run for these files: per language present, the command found or what is missing.
    /// The files are the caller's to find (`doctor` walks the workspace as `listFiles` does, and
    /// sets [`Plan::truncated`] when that walk was cut short).
    ///
    /// ```
    /// use claude_ide_bridge_lsp::{parse_override, ServerTable};
    /// use std::path::Path;
    /// let mut table = ServerTable::builtin();
    /// table.set(parse_override("zz=surely-not-installed-lsp").unwrap());
    /// let plan = table.plan([Path::new("/w/a.zz"), Path::new("/w/b.zz"), Path::new("/w/README")]);
    /// assert_eq!((plan.languages[0].language.as_str(), plan.languages[0].files), ("zz", 2));
    /// assert!(plan.languages[0].servers.is_empty());
    /// assert_eq!(plan.languages[0].missing[0].program, "surely-not-installed-lsp");
    /// ```
    pub fn plan<'a>(&self, files: impl IntoIterator<Item = &'a Path>) -> Plan {
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for file in files {
            if let Some(lang) = self.language_for(file) {
                *counts.entry(lang.to_owned()).or_default() += 1;
            }
        }
        let languages = counts
            .into_iter()
            .map(|(language, files)| {
                let servers = self.resolve(&language);
                let missing = self.missing(&language, &servers);
                PlannedLanguage {
                    language,
                    files,
                    servers,
                    missing,
                }
            })
            .collect();
        Plan {
            languages,
            truncated: false,
        }
    }
}

/// One `LANG=COMMAND` override.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    /// A language id (`python`), an extension of a known language (`py`), or a new language whose extension
    /// is the same word (`zig`).
    pub language: String,
    /// The program and its arguments.
    pub command: Vec<String>,
}

/// Reads `LANG=COMMAND`. The command is split into words as the system's own command lines are:
/// on Unix as a POSIX shell splits them (the `shell-words` crate: single quotes keep everything,
/// double quotes keep spaces and take `\"`, `\\`, `\$` and `` \` `` as escapes, a backslash
/// outside quotes keeps the character after it); on Windows as its programs split their command
/// line (backslashes are path separators, double quotes group, `\"` is a quote). Nothing is
/// expanded (no variables, no `~`, no globs); an unclosed quote is an error. A program named by a
/// path is absolute, or relative to the bridge's working directory as `./prog` (`.\prog`).
///
/// ```
/// use claude_ide_bridge_lsp::parse_override;
/// let ov = parse_override(r#"python=pylsp -v --name "a b""#).unwrap();
/// assert_eq!(ov.command, ["pylsp", "-v", "--name", "a b"]);
/// if cfg!(unix) {
///     let ov = parse_override(r#"python=/opt/my\ lsp/pylsp --name 'a "b"'"#).unwrap();
///     assert_eq!(ov.command, ["/opt/my lsp/pylsp", "--name", r#"a "b""#]);
/// } else {
///     let ov = parse_override(r#"python="C:\Program Files\pylsp.exe" --name "a \"b\"""#).unwrap();
///     assert_eq!(ov.command, [r"C:\Program Files\pylsp.exe", "--name", r#"a "b""#]);
/// }
/// let here = std::env::current_dir().unwrap();
/// assert_eq!(parse_override("zig=./zls").unwrap().command, [here.join("zls").to_str().unwrap()]);
/// assert!(parse_override("python=lib/pylsp").is_err());
/// assert!(parse_override("=pylsp").is_err());
/// assert!(parse_override("python=").is_err());
/// ```
pub fn parse_override(spec: &str) -> Result<Override, String> {
    let (language, command) = spec
        .split_once('=')
        .ok_or_else(|| format!("{spec:?}: expected LANG=COMMAND"))?;
    let language = language.trim();
    if language.is_empty()
        || !language
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-_".contains(c))
    {
        return Err(format!(
            "{spec:?}: the language must be a word such as python or ts"
        ));
    }
    let mut command = sys::split_words(command)
        .ok_or_else(|| format!("{spec:?}: the command has an unclosed quote"))?;
    if command.is_empty() {
        return Err(format!("{spec:?}: the command is empty"));
    }
    let program = Path::new(&command[0]);
    // A path (a separator in it, or a Windows drive: `C:pylsp` is relative to that drive's
    // working directory) rather than a name looked for on PATH.
    let is_path = command[0].chars().any(std::path::is_separator)
        || matches!(program.components().next(), Some(Component::Prefix(_)));
    if is_path && !program.is_absolute() {
        let mut parts = program.components();
        if parts.next() != Some(Component::CurDir) {
            return Err(format!(
                "{spec:?}: a program path must be absolute (or a name found on PATH)"
            ));
        }
        // Found and run from here: the server's own working directory is the workspace folder,
        // where `./prog` would be another program, or none.
        let here = std::env::current_dir().map_err(|e| format!("{spec:?}: {e}"))?;
        let path = parts.fold(here, |path, part| path.join(part));
        command[0] = path.to_string_lossy().into_owned();
    }
    Ok(Override {
        language: language.to_owned(),
        command,
    })
}

/// The path of an executable program: `program` itself when it names a directory too (`/` in it;
/// on Windows `\\` or a drive as well), else the first match on `PATH`. On Windows a match is a
/// name with one of `PATHEXT`'s extensions (see [`candidate_names`]).
/// A rustup proxy (such as `~/.cargo/bin/rust-analyzer`) whose component no toolchain has is not a program:
/// running it only prints that the component is missing.
pub fn find_program(program: &str) -> Option<PathBuf> {
    let exts = sys::exe_extensions();
    let given = Path::new(program);
    let path = if given.parent().is_some_and(|p| !p.as_os_str().is_empty()) {
        let dir = given.parent()?;
        let name = given.file_name()?.to_str()?;
        candidate_names(name, exts.as_deref())
            .into_iter()
            .map(|n| dir.join(n))
            .find(|candidate| is_executable(candidate))?
    } else {
        on_path(program, &std::env::var_os("PATH")?, exts.as_deref())?
    };
    let rustup_home = std::env::var_os("RUSTUP_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".rustup")));
    (!is_empty_rustup_proxy(&path, rustup_home.as_deref())).then_some(path)
}

/// The name a server goes by, from its program as a command names it: the file name, without a
/// `PATHEXT` extension on Windows (`pyright-langserver` for `pyright-langserver`,
/// `/opt/bin/pyright-langserver`, or on Windows `C:\\npm\\pyright-langserver.cmd`), as the table and
/// [`install_hint`] name the servers. Its log lines are labelled with it, and its diagnostics
/// without a `source` take it as theirs: merged with another server's, they are told apart.
pub fn server_name(program: &str) -> String {
    let name = Path::new(program)
        .file_name()
        .and_then(OsStr::to_str)
        .unwrap_or(program);
    let name = split_extension(name, sys::exe_extensions().as_deref()).0;
    match name.is_empty() {
        true => program.to_owned(),
        false => name.to_owned(),
    }
}

/// Whether the server named `name` (its `serverInfo` name, or its program's [`server_name`])
/// leaves the diagnostics of its other open documents as they were when a file they may include
/// changes: clangd checks a document again when its own text changes (then it also reads again
/// the headers changed on disk since its last check), and watches no files; told of a save, it
/// checks its open documents again under the versions they had, an answer the client cannot
/// tell from the one for the header's old text. The other
/// servers of the table check their open documents again themselves (pyright, tsserver,
/// rust-analyzer and gopls do when another document changes). The bridge checks such a
/// server's other open documents again when a file they may include changes
/// ([`may_be_included`]).
///
/// ```
/// use claude_ide_bridge_lsp::table::leaves_dependents_unchecked;
/// assert!(leaves_dependents_unchecked("clangd"));
/// assert!(leaves_dependents_unchecked("clangd-17"));
/// assert!(!leaves_dependents_unchecked("pyright-langserver"));
/// ```
pub fn leaves_dependents_unchecked(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name == "clangd" || name.starts_with("clangd-")
}

/// Whether the file at `path` is one C and C++ code includes (`#include`): a header by its
/// extension (`.h`, `.hh`, `.hpp`, `.hxx`, `.h++`, `.H`, `.inc`, `.inl`, `.ipp`, `.tcc`, `.tpp`,
/// `.def`), or a name without one (`<vector>`). A translation unit's own source (`.c`, `.cpp`,
/// ...) is compiled on its own: its change leaves the other open documents of a server that
/// [`leaves_dependents_unchecked`] as they were (each check again costs the server a rebuild of
/// the document's headers: seconds for a large C++ file).
///
/// ```
/// use claude_ide_bridge_lsp::table::may_be_included;
/// assert!(may_be_included("/ws/x.h"));
/// assert!(may_be_included("/ws/defs.inc"));
/// assert!(may_be_included("/ws/include/vector"));
/// assert!(!may_be_included("/ws/main.c"));
/// assert!(!may_be_included("/ws/app.cpp"));
/// assert!(!may_be_included("/ws/notes.txt"));
/// ```
pub fn may_be_included(path: &str) -> bool {
    // In any case where names are (macOS, Windows: `X.HPP`), as the look at the disk matches them.
    let same = |a: &str, b: &str| match crate::sys::GLOBS_IGNORE_CASE {
        true => a.eq_ignore_ascii_case(b),
        false => a == b,
    };
    match Path::new(path).extension() {
        Some(ext) => (ext.to_str()).is_some_and(|e| HEADERS.iter().any(|h| same(h, e))),
        None => true,
    }
}

/// The extensions of the files [`may_be_included`] takes for headers.
pub(crate) const HEADERS: [&str; 12] = [
    "h", "hh", "hpp", "hxx", "h++", "H", "inc", "inl", "ipp", "tcc", "tpp", "def",
];

/// Whether `command`, its program found at `found`, is a language server: `tsc --lsp` only when
/// that `tsc` is TypeScript 7's or later's, as its package's `package.json` says (an earlier
/// `tsc` has no `--lsp`: it would print its usage and exit, where the next server of the table
/// would have worked). A `tsc` whose package is not found (another package manager's shim, such
/// as Volta's) is not taken for one either: `--lsp typescript='tsc --lsp --stdio'` runs it
/// anyway. Every other command is taken as a server.
///
/// ```
/// use claude_ide_bridge_lsp::table::serves;
/// use std::path::Path;
/// let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
/// let dir = tempfile::tempdir().unwrap();
/// let package = dir.path().join("node_modules/typescript");
/// std::fs::create_dir_all(package.join("bin")).unwrap();
/// std::fs::write(package.join("package.json"), r#"{"name":"typescript","version":"5.9.3"}"#).unwrap();
/// let tsc = package.join("bin/tsc");
/// std::fs::write(&tsc, "").unwrap();
/// assert!(!serves(&words(&["tsc", "--lsp", "--stdio"]), &tsc)); // TypeScript 5: no server
/// assert!(serves(&words(&["pyright-langserver", "--stdio"]), Path::new("/usr/bin/pyright-langserver")));
/// ```
pub fn serves(command: &[String], found: &Path) -> bool {
    let lsp_mode = command.iter().skip(1).any(|a| a == "--lsp");
    let name = command.first().map(|p| server_name(p));
    if !lsp_mode || !name.is_some_and(|n| n.eq_ignore_ascii_case("tsc")) {
        return true;
    }
    typescript_major(found).is_some_and(|major| major >= 7)
}

/// The major version of the TypeScript whose `tsc` is at `found`: the `typescript` package in
/// one of [`npm_folders`] (its own, as npm's link leads into it, first). `None` when no such
/// package (a `package.json` named `typescript`, at most 64 KiB) is found.
fn typescript_major(found: &Path) -> Option<u64> {
    npm_folders(found).iter().find_map(|modules| {
        use std::io::Read;
        let mut text = String::new();
        std::fs::File::open(modules.join("typescript").join("package.json"))
            .ok()?
            .take(64 << 10)
            .read_to_string(&mut text)
            .ok()?;
        let package: serde_json::Value = serde_json::from_str(&text).ok()?;
        if package["name"] != "typescript" {
            return None;
        }
        package["version"].as_str()?.split('.').next()?.parse().ok()
    })
}

/// The folders npm installs packages in that may hold the packages installed with the program
/// found at `found`, nearest first: each `node_modules` folder its real path is in (npm's link
/// on Unix leads into its package: `lib/node_modules/typescript/bin/tsc`, a project's
/// `node_modules/.bin/tsc`), after the `node_modules` of the package within it (its own
/// dependencies); then those beside where it was found (npm's `.cmd` shim on Windows sits beside
/// `node_modules`, its `bin` folder on Unix beside `lib/node_modules`).
fn npm_folders(found: &Path) -> Vec<PathBuf> {
    let real = sys::real_path(found);
    let mut folders = Vec::new();
    for dir in real.ancestors().skip(1) {
        if dir.file_name().is_some_and(|n| n == "node_modules") {
            if let Some(package) = real.strip_prefix(dir).ok().and_then(|p| p.iter().next()) {
                folders.push(dir.join(package).join("node_modules"));
            }
            folders.push(dir.to_path_buf());
        }
    }
    if let Some(bin) = found.parent() {
        folders.push(bin.join("node_modules"));
        if let Some(prefix) = bin.parent() {
            folders.push(prefix.join("lib").join("node_modules"));
        }
    }
    folders
}

/// What the client sends a server as `initializationOptions`, for the server `program` found at
/// `found`: for typescript-language-server, the TypeScript installed beside it (`tsserver.path`),
/// so that it does not run the workspace's own (`node_modules/typescript/lib/tsserver.js`), which
/// it prefers otherwise: a workspace's code run as soon as claude connects, which no editor does
/// without asking (VS Code uses its own TypeScript unless told to trust the workspace's). `None`
/// for the other servers, and when no such TypeScript is found (the server then picks one).
pub fn initialization_options(program: &str, found: Option<&Path>) -> Option<serde_json::Value> {
    let name = Path::new(program).file_stem()?.to_str()?;
    if !name.eq_ignore_ascii_case("typescript-language-server") {
        return None;
    }
    let tsserver = installed_tsserver(found?)?;
    Some(serde_json::json!({"tsserver": {"path": tsserver}}))
}

/// The `tsserver.js` of the TypeScript installed with the typescript-language-server at
/// `found`, in one of [`npm_folders`]: npm puts both packages in one `node_modules` folder (`npm
/// install -g typescript-language-server typescript`), or TypeScript in the server's own.
fn installed_tsserver(found: &Path) -> Option<String> {
    npm_folders(found).iter().find_map(|modules| {
        let p = modules.join("typescript").join("lib").join("tsserver.js");
        p.is_file().then(|| p.to_string_lossy().into_owned())
    })
}

/// The first executable file named as `program` may be ([`candidate_names`]) in a folder of
/// `path` (a `PATH` value). Only absolute folders: an empty entry (`a::b`, a trailing `:` or
/// `;`) or a relative one would name a folder of the bridge's working directory, where a
/// workspace's own `pyright-langserver` would be taken for the installed one (std's own search
/// on Windows passes over empty entries too).
fn on_path(program: &str, path: &std::ffi::OsStr, exts: Option<&str>) -> Option<PathBuf> {
    let names = candidate_names(program, exts);
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
        .find(|candidate| is_executable(candidate))
}

/// The file names a program called `program` may have, in the order looked for: with no
/// `PATHEXT` (Unix), the name itself; with one (Windows, `.COM;.EXE;.BAT;.CMD` and so on), the
/// name followed by each extension, and the name itself only when it already ends with one of
/// them (npm installs `pyright-langserver.cmd` beside `pyright-langserver`, a shell script that
/// Windows cannot start).
///
/// ```
/// use claude_ide_bridge_lsp::table::candidate_names;
/// assert_eq!(candidate_names("clangd", None), ["clangd"]);
/// assert_eq!(
///     candidate_names("pyright-langserver", Some(".EXE;.CMD")),
///     ["pyright-langserver.EXE", "pyright-langserver.CMD"]
/// );
/// ```
pub fn candidate_names(program: &str, pathext: Option<&str>) -> Vec<String> {
    let Some(pathext) = pathext else {
        return vec![program.to_owned()];
    };
    let exts: Vec<&str> = pathext
        .split(';')
        .map(str::trim)
        .filter(|e| e.len() > 1 && e.starts_with('.'))
        .collect();
    let has_ext = !split_extension(program, Some(pathext)).1.is_empty();
    has_ext
        .then(|| program.to_owned())
        .into_iter()
        .chain(exts.iter().map(|e| format!("{program}{e}")))
        .collect()
}

/// Whether `path` is rustup itself under another name (a proxy; rustup links them, hard or symbolic) for a
/// component that no installed toolchain has.
fn is_empty_rustup_proxy(path: &Path, rustup_home: Option<&Path>) -> bool {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(OsStr::to_str)) else {
        return false;
    };
    // On Windows the proxy and rustup both carry the extension (`rust-analyzer.exe`).
    let exts = sys::exe_extensions();
    let (stem, ext) = split_extension(name, exts.as_deref());
    if stem == "rustup" {
        return false;
    }
    let same = match (
        std::fs::metadata(path),
        std::fs::metadata(dir.join(format!("rustup{ext}"))),
    ) {
        (Ok(a), Ok(b)) => sys::same_file(&a, &b),
        _ => false,
    };
    if !same {
        return false;
    }
    let Some(Ok(toolchains)) = rustup_home.map(|h| std::fs::read_dir(h.join("toolchains"))) else {
        return false; // cannot tell: take it as a program
    };
    let names = candidate_names(stem, exts.as_deref());
    !toolchains.flatten().take(100).any(|t| {
        let bin = t.path().join("bin");
        names.iter().any(|n| is_executable(&bin.join(n)))
    })
}

/// `name` split before the `PATHEXT` extension it ends with (`("rustup", ".exe")`), or whole.
fn split_extension<'a>(name: &'a str, pathext: Option<&str>) -> (&'a str, &'a str) {
    let lower = name.to_ascii_lowercase();
    pathext
        .into_iter()
        .flat_map(|p| p.split(';'))
        .map(str::trim)
        .filter(|e| e.len() > 1 && e.starts_with('.'))
        .find(|e| lower.ends_with(&e.to_ascii_lowercase()))
        .and_then(|e| {
            name.is_char_boundary(name.len() - e.len())
                .then(|| name.split_at(name.len() - e.len()))
        })
        .unwrap_or((name, ""))
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| sys::is_executable(&m))
}

/// For a path (one with a directory) that is there but is no program, what it is instead
/// (`/etc/passwd is not executable`, `/usr is a directory`): installing it and putting it on
/// `PATH` would not help, the path is wrong. `None` for anything else.
pub fn not_a_program(program: &str) -> Option<String> {
    let given = Path::new(program);
    if given.parent().is_some_and(|p| !p.as_os_str().is_empty()) {
        if let Ok(meta) = std::fs::metadata(given) {
            if meta.is_dir() {
                return Some(format!("{program} is a directory"));
            }
            // On Windows a program is a file named with one of `PATHEXT`'s extensions.
            let exts = sys::exe_extensions();
            let named = exts.is_none()
                || given
                    .file_name()
                    .and_then(OsStr::to_str)
                    .is_some_and(|n| !split_extension(n, exts.as_deref()).1.is_empty());
            if !sys::is_executable(&meta) || !named {
                return Some(format!("{program} is not executable"));
            }
        }
    }
    None
}

/// How to install a known server program (a generic hint for others).
pub fn install_hint(program: &str) -> &'static str {
    match program {
        "pyright-langserver" => "npm install -g pyright",
        "basedpyright-langserver" => "pip install basedpyright",
        "pylsp" => "pip install python-lsp-server",
        "ruff" => "pip install ruff",
        "tsc" => "npm install -g typescript (7 or later: its tsc --lsp is the server)",
        "typescript-language-server" => "npm install -g typescript-language-server typescript@5",
        "vtsls" => "npm install -g @vtsls/language-server",
        "rust-analyzer" => "rustup component add rust-analyzer",
        "gopls" => "go install golang.org/x/tools/gopls@latest",
        "clangd" => sys::CLANGD_INSTALL,
        _ => "install it and put it on PATH",
    }
}

/// What `doctor` shows: per language present, the servers that would run or what is missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// One entry per language found, by language id.
    pub languages: Vec<PlannedLanguage>,
    /// Whether the workspace walk stopped at its entry limit (languages may be missing from the plan).
    pub truncated: bool,
}

/// One language of a [`Plan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedLanguage {
    /// The language id.
    pub language: String,
    /// How many of the files given (or found) are in this language.
    pub files: usize,
    /// The servers that would run together (see [`ServerTable::resolve`]); empty when none is found.
    pub servers: Vec<Vec<String>>,
    /// When none is found: every program tried, with how to install it; else the programs that
    /// would run beside the found ones and are not installed.
    pub missing: Vec<Missing>,
}

/// A server program that is not installed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// The program name.
    pub program: String,
    /// How to install it, such as `npm install -g pyright`; with [`Missing::wrong_path`], what
    /// the path names instead ([`not_a_program`]).
    pub install: String,
    /// The program is a path to something that is no program: installing would not help.
    pub wrong_path: bool,
    /// One of the language's commands, of which the first found runs, none being found (rather
    /// than one run beside them).
    pub first: bool,
}

/// A server's command as one line a shell would read back as the same words: a word with a
/// space, a quote or another character a shell treats apart is put in single quotes (joined by
/// spaces, `sh -c 'exit 3'` read as `sh -c exit 3`, which is another command).
///
/// ```
/// use claude_ide_bridge_lsp::table::command_line;
/// let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
/// assert_eq!(command_line(&words(&["ruff", "server"])), "ruff server");
/// assert_eq!(command_line(&words(&["sh", "-c", "exit 3"])), "sh -c 'exit 3'");
/// assert_eq!(command_line(&words(&["echo", "it's", ""])), r#"echo 'it'\''s' ''"#);
/// ```
pub fn command_line(words: &[String]) -> String {
    let plain = |w: &str| {
        !w.is_empty()
            && w.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_@%+=:,./-".contains(&b) || !b.is_ascii())
    };
    let quoted: Vec<String> = (words.iter())
        .map(|w| match plain(w) {
            true => w.clone(),
            false => format!("'{}'", w.replace('\'', r"'\''")),
        })
        .collect();
    quoted.join(" ")
}

#[cfg(test)]
mod tests {
    /// A program given as a path that is there but is no program is said to be what it is, not
    /// to be installed and put on `PATH`.
    #[test]
    fn a_path_that_is_no_program_is_said_so() {
        use super::{parse_override, ServerTable};
        use std::path::Path;
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("notes.txt");
        std::fs::write(&file, "").unwrap();
        let hint = |program: &Path| {
            let mut table = ServerTable::empty();
            // Double quotes keep a temporary folder's path whole on every OS.
            let spec = format!("zz=\"{}\"", program.display());
            table.set(parse_override(&spec).unwrap());
            let plan = table.plan([Path::new("/w/a.zz")]);
            plan.languages[0].missing[0].install.clone()
        };
        assert_eq!(hint(&file), format!("{} is not executable", file.display()));
        assert_eq!(
            hint(d.path()),
            format!("{} is a directory", d.path().display())
        );
        // Not there at all: how to install it.
        assert_eq!(
            hint(&d.path().join("gone")),
            "install it and put it on PATH"
        );
        assert_eq!(
            super::not_a_program("/bin"),
            Some("/bin is a directory".into())
        );
        assert_eq!(super::not_a_program("pyright-langserver"), None);
    }

    /// A server is named by its program's file name, as the table names it.
    #[test]
    fn a_server_is_named_by_its_programs_file_name() {
        use super::server_name;
        assert_eq!(server_name("pyright-langserver"), "pyright-langserver");
        assert_eq!(server_name("/opt/bin/ruff"), "ruff");
        assert_eq!(server_name("python3"), "python3");
        #[cfg(windows)]
        assert_eq!(
            server_name(r"C:\npm\pyright-langserver.CMD"),
            "pyright-langserver"
        );
    }

    /// typescript-language-server is told the `tsserver.js` installed beside it: through npm's
    /// link into its package on Unix, beside npm's shim on Windows, or in its own `node_modules`;
    /// nothing for another server, or when none is found.
    #[test]
    fn typescript_is_told_the_installed_tsserver() {
        use super::initialization_options;
        let d = tempfile::tempdir().unwrap();
        let modules = d.path().join("lib").join("node_modules");
        let package = modules.join("typescript-language-server");
        std::fs::create_dir_all(package.join("lib")).unwrap();
        std::fs::write(package.join("lib").join("cli.mjs"), "").unwrap();
        let program = "typescript-language-server";
        assert_eq!(
            initialization_options(program, Some(&package.join("lib/cli.mjs"))),
            None
        );
        let tsserver = modules.join("typescript").join("lib").join("tsserver.js");
        std::fs::create_dir_all(tsserver.parent().unwrap()).unwrap();
        std::fs::write(&tsserver, "").unwrap();
        let told = |found: &std::path::Path| {
            initialization_options(program, Some(found))
                .and_then(|o| o["tsserver"]["path"].as_str().map(str::to_owned))
        };
        let expected = Some(tsserver.to_string_lossy().into_owned());
        // npm's shim beside the package folder (Windows' layout: `prefix\name.cmd` and
        // `prefix\node_modules`), and its bin folder beside `lib/node_modules` (Unix's).
        let shim = d.path().join("lib").join("typescript-language-server.cmd");
        std::fs::write(&shim, "").unwrap();
        assert_eq!(told(&shim), expected);
        let bin = d.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("typescript-language-server"), "").unwrap();
        assert_eq!(told(&bin.join("typescript-language-server")), expected);
        #[cfg(unix)]
        {
            // A link into the package, found elsewhere.
            let other = tempfile::tempdir().unwrap();
            let link = other.path().join("typescript-language-server");
            std::os::unix::fs::symlink(package.join("lib").join("cli.mjs"), &link).unwrap();
            assert_eq!(told(&link), expected);
        }
        // The package's own TypeScript first.
        let own = package
            .join("node_modules")
            .join("typescript")
            .join("lib")
            .join("tsserver.js");
        std::fs::create_dir_all(own.parent().unwrap()).unwrap();
        std::fs::write(&own, "").unwrap();
        assert_eq!(
            told(&package.join("lib/cli.mjs")),
            Some(own.to_string_lossy().into_owned())
        );
        assert_eq!(
            initialization_options("pyright-langserver", Some(&shim)),
            None
        );
        assert_eq!(initialization_options(program, None), None);
    }

    /// Only `PATH`'s absolute folders are looked in: an empty entry or a relative one (the
    /// working directory's folders) is passed over, as the bridge's working directory may be a
    /// workspace holding a program of the same name.
    #[cfg(unix)]
    #[test]
    fn only_absolute_path_folders_are_looked_in() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let prog = dir.path().join("some-langserver");
        std::fs::write(&prog, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
        // The same folder named from the working directory.
        let here = std::env::current_dir().unwrap();
        let mut relative = PathBuf::new();
        for _ in here.components().skip(1) {
            relative.push("..");
        }
        relative.push(dir.path().strip_prefix("/").unwrap());
        assert!(relative.is_relative() && relative.join("some-langserver").exists());
        let path = |entries: &[&Path]| std::env::join_paths(entries).unwrap();
        let found = super::on_path(
            "some-langserver",
            &path(&[Path::new("/nowhere"), dir.path()]),
            None,
        );
        assert_eq!(found.as_deref(), Some(prog.as_path()));
        assert_eq!(
            super::on_path("some-langserver", &path(&[&relative]), None),
            None
        );
    }

    use super::*;

    /// `tsc --lsp` is a server only from TypeScript 7 on: npm's global link, a project's
    /// `.bin` link and Windows' shim beside `node_modules` each lead to the package that says
    /// which; an unknown layout is passed over unless an override names it; other commands are
    /// untouched.
    #[test]
    fn tsc_serves_from_typescript_7() {
        let root = tempfile::tempdir().unwrap();
        let lsp = cmd(&["tsc", "--lsp", "--stdio"]);
        let package = |dir: &Path, version: &str| {
            let pkg = dir.join("node_modules").join("typescript");
            std::fs::create_dir_all(pkg.join("bin")).unwrap();
            std::fs::write(
                pkg.join("package.json"),
                format!(r#"{{"name": "typescript", "version": "{version}"}}"#),
            )
            .unwrap();
            std::fs::write(pkg.join("bin").join("tsc"), "").unwrap();
            pkg.join("bin").join("tsc")
        };
        for (version, serves_lsp) in [
            ("5.9.3", false),
            ("6.0.3", false),
            ("7.0.2", true),
            ("10.1.0", true),
        ] {
            let dir = root.path().join(version);
            let tsc = package(&dir, version);
            // The package's own bin, and Windows' shim beside `node_modules`.
            assert_eq!(serves(&lsp, &tsc), serves_lsp, "{version}");
            let shim = dir.join("tsc.cmd");
            std::fs::write(&shim, "").unwrap();
            assert_eq!(serves(&lsp, &shim), serves_lsp, "{version} shim");
            // A link to it, as npm makes on Unix.
            #[cfg(unix)]
            {
                let bin = dir.join("bin");
                std::fs::create_dir_all(&bin).unwrap();
                std::os::unix::fs::symlink(&tsc, bin.join("tsc")).unwrap();
                assert_eq!(serves(&lsp, &bin.join("tsc")), serves_lsp, "{version} link");
            }
            // Without `--lsp`, `tsc` is not asked to serve: nothing to refuse.
            assert!(serves(&cmd(&["tsc", "--watch"]), &tsc));
        }
        let lone = root.path().join("elsewhere").join("tsc");
        std::fs::create_dir_all(lone.parent().unwrap()).unwrap();
        std::fs::write(&lone, "").unwrap();
        assert!(
            !serves(&lsp, &lone),
            "an unknown layout is not taken for a server"
        );
        // Another package's package.json on the way says nothing.
        std::fs::write(
            root.path().join("elsewhere").join("package.json"),
            r#"{"name": "tsc-wrapper", "version": "1.0.0"}"#,
        )
        .unwrap();
        assert!(!serves(&lsp, &lone));
        assert!(serves(&cmd(&["pyright-langserver", "--stdio"]), &lone));
        // Named by an override, it runs as given.
        let dir = tempfile::tempdir().unwrap();
        let unknown = dir
            .path()
            .join(if cfg!(windows) { "tsc.cmd" } else { "tsc" });
        std::fs::write(&unknown, "").unwrap();
        #[cfg(unix)]
        std::fs::set_permissions(
            &unknown,
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let named = format!("{} --lsp --stdio", unknown.display());
        let mut t = ServerTable::builtin();
        assert!(t
            .resolve("typescript")
            .iter()
            .all(|c| c[0] != unknown.to_str().unwrap()));
        t.set(parse_override(&format!("ts={named}")).unwrap());
        assert_eq!(
            t.resolve("typescript"),
            [cmd(&[unknown.to_str().unwrap(), "--lsp", "--stdio"])]
        );
        // The built-in table tries it first for TypeScript and JavaScript.
        let table = ServerTable::builtin();
        for language in [
            "typescript",
            "typescriptreact",
            "javascript",
            "javascriptreact",
        ] {
            assert_eq!(table.commands(language)[0], lsp, "{language}");
        }
    }

    /// A program named by a path is absolute, or relative to the bridge's folder as `./prog`
    /// (`.\prog` on Windows), and is then made absolute; any other relative path is refused (the
    /// server runs in the workspace folder, where it would name another file). A name is looked
    /// for on `PATH`, as given.
    #[test]
    fn a_program_path_is_absolute_or_from_here() {
        let here = std::env::current_dir().unwrap();
        let program = |spec: &str| parse_override(spec).map(|o| o.command[0].clone());
        assert_eq!(program("zig=zls").unwrap(), "zls");
        assert_eq!(
            program("zig=./bin/zls").unwrap(),
            here.join("bin").join("zls").to_str().unwrap()
        );
        assert!(program("zig=bin/zls").is_err());
        assert!(program("zig=../zls").is_err());
        if cfg!(windows) {
            assert_eq!(
                program(r"zig=.\bin\zls.exe").unwrap(),
                here.join("bin").join("zls.exe").to_str().unwrap()
            );
            assert_eq!(
                program(r"zig=C:\tools\zls.exe -v").unwrap(),
                r"C:\tools\zls.exe"
            );
            assert!(program(r"zig=bin\zls.exe").is_err());
            // A drive without a root is that drive's working folder: refused too.
            assert!(program("zig=C:zls.exe").is_err());
        } else {
            assert_eq!(program("zig=/opt/zls -v").unwrap(), "/opt/zls");
        }
    }

    #[test]
    fn extensions_map_to_languages() {
        let t = ServerTable::builtin();
        for (file, lang) in [
            ("a.py", "python"),
            ("a.tsx", "typescriptreact"),
            ("a.mjs", "javascript"),
            ("a.rs", "rust"),
            ("a.go", "go"),
            ("a.h", "c"),
            ("a.hpp", "cpp"),
            ("a.C", "cpp"),
        ] {
            assert_eq!(t.language_for(Path::new(file)), Some(lang), "{file}");
        }
        assert_eq!(t.language_for(Path::new("a.PY")), None);
        assert_eq!(t.commands("python")[0], ["pyright-langserver", "--stdio"]);
        assert_eq!(t.also("python"), [["ruff", "server"]]);
    }

    #[cfg(unix)] // Unix's programs (`/bin/sh`) and words; Windows': sys::windows' tests.
    #[test]
    fn overrides_replace_by_id_or_extension() {
        let mut t = ServerTable::builtin();
        t.set(parse_override("ts=deno lsp").unwrap());
        assert_eq!(t.commands("typescript"), [cmd(&["deno", "lsp"])]);
        assert_eq!(
            t.commands("javascript"),
            [
                cmd(&["tsc", "--lsp", "--stdio"]),
                cmd(&["typescript-language-server", "--stdio"]),
                cmd(&["vtsls", "--stdio"])
            ]
        );
        assert!(parse_override("python=rel/path").is_err());
        assert!(parse_override("py thon=x").is_err());
        // An override replaces the whole set; `add` builds one, bounded.
        t.set(parse_override("py=/bin/sh").unwrap());
        assert!(t.also("python").is_empty());
        for i in 1..MAX_SERVERS {
            t.add(parse_override(&format!("python=/bin/sh -{i}")).unwrap())
                .unwrap();
        }
        t.add(parse_override("python=/bin/sh -1").unwrap())
            .expect_err("full");
        let set = t.resolve("python");
        assert_eq!(set.len(), MAX_SERVERS);
        assert_eq!((set[0].len(), set[1].join(" ")), (1, "/bin/sh -1".into()));
        // A new language from `add` alone.
        t.add(parse_override("zz=/bin/sh").unwrap()).unwrap();
        assert_eq!(t.language_for(Path::new("a.zz")), Some("zz"));
        assert_eq!(t.resolve("zz"), [["/bin/sh"]]);
    }

    /// The set is the first found of the commands, and each found of those run beside it.
    #[cfg(unix)] // Unix's programs (`/bin/sh`) and words; Windows': sys::windows' tests.
    #[test]
    fn the_set_is_the_first_found_and_each_found_beside_it() {
        let mut t = ServerTable::empty();
        t.push(Language {
            id: "zz".into(),
            extensions: vec!["zz".into()],
            commands: vec![
                cmd(&["surely-not-installed-lsp"]),
                cmd(&["/bin/sh"]),
                cmd(&["/bin/cat"]),
            ],
            also: vec![
                cmd(&["/bin/true"]),
                cmd(&["surely-not-a-linter"]),
                cmd(&["/bin/sh"]),
            ],
        });
        assert_eq!(t.resolve("zz"), [cmd(&["/bin/sh"]), cmd(&["/bin/true"])]);
        let plan = t.plan([Path::new("/w/a.zz")]);
        let missing: Vec<_> = plan.languages[0]
            .missing
            .iter()
            .map(|m| m.program.as_str())
            .collect();
        assert_eq!(missing, ["surely-not-a-linter"]);
    }

    /// Commands are split as a shell splits words: quotes of both kinds, backslash escapes
    /// inside double quotes and outside quotes, none inside single quotes; nothing expanded.
    #[cfg(unix)] // Unix's programs (`/bin/sh`) and words; Windows': sys::windows' tests.
    #[test]
    fn commands_are_split_as_a_shell_splits_words() {
        let words = |command: &str| parse_override(&format!("x={command}")).map(|o| o.command);
        for (command, want) in [
            (r#"a "b c"  'd"e' """#, &["a", "b c", "d\"e", ""][..]),
            (
                r"/opt/my\ lsp/bin/pylsp -v",
                &["/opt/my lsp/bin/pylsp", "-v"],
            ),
            (
                r#"srv "a \"quoted\" word" 'it''s'"#,
                &["srv", r#"a "quoted" word"#, "its"],
            ),
            (
                r#"srv 'back\slash' "back\\slash" back\\slash"#,
                &["srv", r"back\slash", r"back\slash", r"back\slash"],
            ),
            (
                r#"srv "\$HOME" $HOME ~ *"#,
                &["srv", "$HOME", "$HOME", "~", "*"],
            ),
            ("srv\targ\ttab", &["srv", "arg", "tab"]),
            // A backslash with nothing after it is kept.
            (r"srv trailing\", &["srv", r"trailing\"]),
        ] {
            assert_eq!(words(command).unwrap(), want, "{command}");
        }
        for bad in ["srv 'open", r#"srv "open"#, r#"srv "escaped quote\""#] {
            let err = words(bad).unwrap_err();
            assert!(err.contains("unclosed quote"), "{bad}: {err}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_rustup_proxy_without_its_component_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        let toolchain = dir.path().join("rustup/toolchains/stable/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&toolchain).unwrap();
        let rustup = bin.join("rustup");
        std::fs::write(&rustup, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&rustup, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        std::os::unix::fs::symlink("rustup", bin.join("rust-analyzer")).unwrap();
        std::fs::hard_link(&rustup, bin.join("gopls")).unwrap(); // a hard link, as some installs make
        std::fs::copy(&rustup, bin.join("clangd")).unwrap(); // a copy is a program of its own
        let home = dir.path().join("rustup");
        let proxy = |name: &str| is_empty_rustup_proxy(&bin.join(name), Some(&home));
        assert!(proxy("rust-analyzer"));
        assert!(proxy("gopls"));
        assert!(!proxy("clangd"));
        assert!(!proxy("rustup"));
        assert!(
            !is_empty_rustup_proxy(&bin.join("gopls"), None),
            "no rustup home: cannot tell"
        );
        // Once a toolchain has the component, the proxy runs it.
        std::fs::copy(&rustup, toolchain.join("rust-analyzer")).unwrap();
        assert!(!proxy("rust-analyzer"));
    }

    /// What Windows looks for on `PATH`: npm's shim `name.cmd`, never its extensionless
    /// shell-script twin; a name given with its extension as it is too; extensions in any case.
    #[test]
    fn programs_on_windows_are_found_by_their_pathext_names() {
        let pathext = Some(".COM;.EXE;.BAT;.CMD;;.x; EXE");
        assert_eq!(
            candidate_names("pyright-langserver", pathext),
            [
                "pyright-langserver.COM",
                "pyright-langserver.EXE",
                "pyright-langserver.BAT",
                "pyright-langserver.CMD",
                "pyright-langserver.x",
            ]
        );
        let given = candidate_names("clangd.exe", pathext);
        assert_eq!(given[0], "clangd.exe");
        assert_eq!(given.len(), 6);
        assert_eq!(split_extension("Rustup.EXE", pathext), ("Rustup", ".EXE"));
        assert_eq!(
            split_extension("rust-analyzer", pathext),
            ("rust-analyzer", "")
        );
        assert_eq!(
            split_extension("rust-analyzer.exe", None),
            ("rust-analyzer.exe", "")
        );
        assert_eq!(candidate_names("a.cmd", None), ["a.cmd"]);
        // Found on a PATH as Windows would (the extensionless twin is there, and skipped).
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("pyright-langserver"), "#!/bin/sh\n").unwrap();
        std::fs::write(dir.path().join("pyright-langserver.cmd"), "@echo off\n").unwrap();
        let found = candidate_names("pyright-langserver", Some(".EXE;.cmd"))
            .into_iter()
            .map(|n| dir.path().join(n))
            .find(|p| p.is_file());
        assert_eq!(found, Some(dir.path().join("pyright-langserver.cmd")));
    }

    #[cfg(unix)] // Unix's programs (`/bin/sh`) and words; Windows': sys::windows' tests.
    #[test]
    fn plan_reports_found_and_missing() {
        let mut t = ServerTable::builtin();
        t.set(parse_override("python=/bin/sh").unwrap());
        t.set(parse_override("zz=surely-not-installed-lsp --stdio").unwrap());
        let files = ["/w/src/a.py", "/w/src/b.py", "/w/d.zz", "/w/notes.txt"];
        let plan = t.plan(files.iter().map(Path::new));
        assert!(!plan.truncated);
        let names: Vec<_> = plan
            .languages
            .iter()
            .map(|l| (l.language.as_str(), l.files))
            .collect();
        assert_eq!(names, [("python", 2), ("zz", 1)]);
        assert_eq!(plan.languages[0].servers, [["/bin/sh"]]);
        assert!(plan.languages[1].servers.is_empty());
        assert_eq!(
            plan.languages[1].missing[0].program,
            "surely-not-installed-lsp"
        );
        // A command given first that is not found, with one run beside it that is: the one
        // beside runs, and the first is said to be missing (it was left out silently).
        let mut t = ServerTable::builtin();
        t.set(parse_override("python=surely-not-installed-pylsp").unwrap());
        t.add(parse_override("python=/bin/sh lint").unwrap())
            .unwrap();
        let plan = t.plan([Path::new("/w/a.py")]);
        assert_eq!(plan.languages[0].servers, [["/bin/sh", "lint"]]);
        let missing: Vec<&str> = (plan.languages[0].missing.iter())
            .map(|m| m.program.as_str())
            .collect();
        assert_eq!(missing, ["surely-not-installed-pylsp"]);
    }
}
