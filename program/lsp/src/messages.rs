//! The messages this client reads whose lsp-types types would build what it passes over, as
//! lean views with the same method: each implements lsp-types' `Request` or `Notification`
//! trait, so that every message, sent or read, is named by one trait's `METHOD` and typed by its
//! `Params` (and `Result`). lsp-types' own types build a diagnostic's `data` and
//! `relatedInformation`, a registration's `registerOptions` (any JSON, built as values at about
//! 16 times their bytes) and each configuration item; a view reads what the client keeps and
//! passes over the rest without building it (`tests/parse_memory.rs` measures a publish).

use std::fmt;
use std::marker::PhantomData;

use lsp_types::notification::Notification;
use lsp_types::request::Request;
use serde::de::{DeserializeSeed, IgnoredAny, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

/// `textDocument/publishDiagnostics`, its params read as [`Published`].
pub enum PublishDiagnostics {}

impl Notification for PublishDiagnostics {
    type Params = Published;
    const METHOD: &'static str = lsp_types::notification::PublishDiagnostics::METHOD;
}

/// `textDocument/diagnostic` (a pull), sent as [`PullParams`], its answer read as a
/// [`PullReport`].
pub enum DocumentDiagnostic {}

impl Request for DocumentDiagnostic {
    type Params = PullParams;
    type Result = PullReport;
    const METHOD: &'static str = lsp_types::request::DocumentDiagnosticRequest::METHOD;
}

/// The params of a pull (`textDocument/diagnostic`). lsp-types' `DocumentDiagnosticParams`
/// writes an `identifier` or `previousResultId` it has no value for as `null`, which the
/// protocol does not allow (`identifier?: string`: a string, or the member left out) and which
/// a strict server refuses: TypeScript 7's (`tsc --lsp`) answered every such pull "null value is
/// not allowed", so its diagnostics were never known. This type leaves them out.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PullParams {
    /// The file.
    pub text_document: lsp_types::TextDocumentIdentifier,
    /// The identifier the server registered its pulls under, if it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identifier: Option<String>,
    /// The `resultId` of the server's last answer for the file, if it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_result_id: Option<String>,
}

/// `client/registerCapability`, its params read as ids and methods.
pub enum RegisterCapability {}

impl Request for RegisterCapability {
    type Params = Registrations;
    type Result = ();
    const METHOD: &'static str = lsp_types::request::RegisterCapability::METHOD;
}

/// `client/unregisterCapability`, its params read as ids and methods.
pub enum UnregisterCapability {}

impl Request for UnregisterCapability {
    type Params = Unregistrations;
    type Result = ();
    const METHOD: &'static str = lsp_types::request::UnregisterCapability::METHOD;
}

/// `workspace/configuration`, its params read as a count of items: the answer is one `null` per
/// item (the server's defaults).
pub enum WorkspaceConfiguration {}

impl Request for WorkspaceConfiguration {
    type Params = ConfigurationItems;
    type Result = Vec<serde_json::Value>;
    const METHOD: &'static str = lsp_types::request::WorkspaceConfiguration::METHOD;
}

/// A diagnostic as a server sends it, with only what the client keeps: `data`, `relatedInformation`,
/// `tags` and `codeDescription` are passed over without being built.
#[derive(Debug, Deserialize, Serialize)]
pub struct ServerDiagnostic {
    /// Where.
    pub range: lsp_types::Range,
    /// How bad (absent: an error).
    #[serde(default)]
    pub severity: Option<lsp_types::DiagnosticSeverity>,
    /// The server's code for it.
    #[serde(default)]
    pub code: Option<lsp_types::NumberOrString>,
    /// Who says so (`rustc`, `pyright`).
    #[serde(default)]
    pub source: Option<String>,
    /// What.
    pub message: String,
}

impl ServerDiagnostic {
    /// How severe, for keeping the most severe: 0 an error (or no severity), 1 a warning, 2
    /// information, 3 a hint.
    pub fn rank(&self) -> u8 {
        severity_rank(self.severity)
    }
}

/// The rank of a server's severity ([`ServerDiagnostic::rank`]).
pub fn severity_rank(severity: Option<lsp_types::DiagnosticSeverity>) -> u8 {
    match severity {
        Some(lsp_types::DiagnosticSeverity::WARNING) => 1,
        Some(lsp_types::DiagnosticSeverity::INFORMATION) => 2,
        Some(lsp_types::DiagnosticSeverity::HINT) => 3,
        _ => 0,
    }
}

/// A JSON array read keeping, as it is read, at most `max` of its items: the most severe by
/// `rank` (0 the most severe, 3 the least; higher counts as 3), in the array's order. What is
/// kept is what keeping the `max` most severe of the whole array would keep, and it costs the
/// memory of those kept: a server's message of thousands of diagnostics is not built whole.
/// An item that is not a `T` is dropped and counted ([`Dropped`]), the others kept: one
/// malformed diagnostic (a `code` that is an object, a negative position) would otherwise lose
/// all of a server's diagnostics for the file. It reads only from serde_json (each item is
/// taken as its raw JSON first), which is what [`MostSevere::read`] does.
pub struct MostSevere<T, F> {
    max: usize,
    rank: F,
    item: PhantomData<fn() -> T>,
}

impl<T, F: Fn(&T) -> u8> MostSevere<T, F> {
    /// Keeping at most `max`, ranked by `rank`.
    pub fn new(max: usize, rank: F) -> MostSevere<T, F> {
        MostSevere {
            max,
            rank,
            item: PhantomData,
        }
    }

    /// The array `raw`, read: the items kept, and what was dropped as unreadable.
    pub fn read<'de>(self, raw: &'de RawValue) -> serde_json::Result<(Vec<T>, Dropped)>
    where
        T: Deserialize<'de>,
    {
        self.deserialize(&mut serde_json::Deserializer::from_str(raw.get()))
    }
}

/// The items of an array [`MostSevere`] dropped because they were not what it reads: how many,
/// and why the first was refused.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Dropped {
    /// How many.
    pub count: usize,
    /// serde's words for the first.
    pub why: Option<String>,
    /// How many readable ones were left out past the most kept: `(left out, kept)`, when some
    /// were.
    pub over: Option<(usize, usize)>,
}

impl Dropped {
    /// The log line for them in a message of `method` (`None`: none was dropped).
    pub fn line(&self, method: &str) -> Option<String> {
        let over = self.over.map(|(left, kept)| {
            format!(
                "kept the {kept} most severe diagnostics of {method}, of {}",
                left + kept
            )
        });
        let Some(why) = self.why.as_deref() else {
            return over;
        };
        let s = if self.count == 1 { "" } else { "s" };
        let unreadable = format!(
            "dropped {} unreadable diagnostic{s} of {method} (the first: {why}); kept the others",
            self.count
        );
        Some(match over {
            Some(over) => format!("{unreadable}; {over}"),
            None => unreadable,
        })
    }
}

/// An item of an array, or why it is not a `T`.
enum Readable<T> {
    Read(T),
    Unreadable(String),
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Readable<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Readable<T>, D::Error> {
        // Taken as its raw JSON (borrowed, not copied), then read: an item that is not a `T`
        // fails on its own, and the array goes on being read after it.
        let raw = <&'de RawValue>::deserialize(deserializer)?;
        Ok(match serde_json::from_str(raw.get()) {
            Ok(item) => Readable::Read(item),
            Err(e) => Readable::Unreadable(e.to_string()),
        })
    }
}

impl<'de, T: Deserialize<'de>, F: Fn(&T) -> u8> DeserializeSeed<'de> for MostSevere<T, F> {
    type Value = (Vec<T>, Dropped);

    fn deserialize<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<(Vec<T>, Dropped), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de, T: Deserialize<'de>, F: Fn(&T) -> u8> Visitor<'de> for MostSevere<T, F> {
    type Value = (Vec<T>, Dropped);

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(Vec<T>, Dropped), A::Error> {
        let rank = |item: &T| usize::from((self.rank)(item).min(3));
        let mut kept = Vec::new();
        let mut dropped = Dropped::default();
        // How many of each rank are kept: the least severe kept is known without a walk.
        let mut counts = [0usize; 4];
        while let Some(item) = seq.next_element::<Readable<T>>()? {
            let item = match item {
                Readable::Read(item) => item,
                Readable::Unreadable(why) => {
                    dropped.count += 1;
                    dropped.why.get_or_insert(why);
                    continue;
                }
            };
            let r = rank(&item);
            if kept.len() < self.max {
                counts[r] += 1;
                kept.push(item);
                continue;
            }
            let (left, _) = dropped.over.get_or_insert((0, self.max));
            *left += 1;
            // Full: this one goes in only if it is more severe than the least severe kept, which
            // then goes (the last of its rank: earlier ones come first in the array's order).
            let Some(worst) = (0..4).rev().find(|&w| counts[w] > 0) else {
                continue;
            };
            if r < worst {
                let at = kept
                    .iter()
                    .rposition(|k| rank(k) == worst)
                    .expect("counted");
                kept.remove(at);
                counts[worst] -= 1;
                counts[r] += 1;
                kept.push(item);
            }
        }
        Ok((kept, dropped))
    }
}

/// `textDocument/publishDiagnostics`' params, read as [`ServerDiagnostic`]s; the URI is kept as
/// sent (a server's string, checked for its length before anything is kept for it).
#[derive(Debug, Deserialize, Serialize)]
pub struct Published {
    /// The file.
    pub uri: String,
    /// The document version they are for, if the server says.
    #[serde(default)]
    pub version: Option<i32>,
    /// Its diagnostics.
    pub diagnostics: Vec<ServerDiagnostic>,
    /// Those not read (not diagnostics as the protocol has them).
    #[serde(skip)]
    pub dropped: Dropped,
}

impl Published {
    /// The params `raw`, keeping at most `max` diagnostics, the most severe ([`MostSevere`]).
    pub fn read(raw: &RawValue, max: usize) -> serde_json::Result<Published> {
        #[derive(Deserialize)]
        struct Fields<'a> {
            uri: String,
            #[serde(default)]
            version: Option<i32>,
            #[serde(borrow)]
            diagnostics: &'a RawValue,
        }
        let fields: Fields = serde_json::from_str(raw.get())?;
        let (diagnostics, dropped) =
            MostSevere::new(max, ServerDiagnostic::rank).read(fields.diagnostics)?;
        Ok(Published {
            uri: fields.uri,
            version: fields.version,
            diagnostics,
            dropped,
        })
    }
}

/// A `textDocument/diagnostic` answer, read as [`ServerDiagnostic`]s and without buffering: `lsp_types` reads
/// it as an untagged enum of internally tagged ones, which builds the whole answer in memory first. Related
/// documents are passed over (the client asks for one file); a report without `kind` is a partial one.
#[derive(Debug, Deserialize, Serialize)]
pub struct PullReport {
    /// `full`, `unchanged`, or absent (a partial result).
    #[serde(default)]
    pub kind: Option<String>,
    /// The id to send back as `previousResultId`.
    #[serde(rename = "resultId", default)]
    pub result_id: Option<String>,
    /// A full report's diagnostics.
    #[serde(default)]
    pub items: Vec<ServerDiagnostic>,
    /// Those not read (not diagnostics as the protocol has them).
    #[serde(skip)]
    pub dropped: Dropped,
}

impl PullReport {
    /// The answer `raw`, keeping at most `max` diagnostics, the most severe ([`MostSevere`]).
    pub fn read(raw: &RawValue, max: usize) -> serde_json::Result<PullReport> {
        #[derive(Deserialize)]
        struct Fields<'a> {
            #[serde(default)]
            kind: Option<String>,
            #[serde(rename = "resultId", default)]
            result_id: Option<String>,
            // `null` is there, and then refused as an array.
            #[serde(default, borrow, deserialize_with = "crate::rpc::present")]
            items: Option<&'a RawValue>,
        }
        let fields: Fields = serde_json::from_str(raw.get())?;
        let (items, dropped) = match fields.items {
            Some(items) => MostSevere::new(max, ServerDiagnostic::rank).read(items)?,
            None => Default::default(),
        };
        Ok(PullReport {
            kind: fields.kind,
            result_id: fields.result_id,
            items,
            dropped,
        })
    }
}

/// A registration or unregistration, without its options.
#[derive(Debug, Deserialize, Serialize)]
pub struct IdAndMethod {
    /// The registration's id.
    pub id: String,
    /// The method it is for.
    pub method: String,
}

/// A registration: its id, method and options, the options kept unread (they are read only for
/// the methods the client acts on with them: `workspace/didChangeWatchedFiles`).
#[derive(Debug, Deserialize, Serialize)]
pub struct Registered {
    /// The registration's id.
    pub id: String,
    /// The method it is for.
    pub method: String,
    /// Its `registerOptions`, as sent.
    #[serde(
        rename = "registerOptions",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub options: Option<Box<RawValue>>,
}

/// `client/registerCapability`'s params.
#[derive(Debug, Deserialize, Serialize)]
pub struct Registrations {
    /// The registrations.
    pub registrations: Vec<Registered>,
}

/// The `registerOptions` of `workspace/didChangeWatchedFiles`: the files a server wants to be
/// told of when they change on disk.
#[derive(Debug, Deserialize)]
pub struct WatchOptions {
    /// The globs, each with the kinds of change it is for.
    pub watchers: Vec<FileWatcher>,
}

/// One glob a server watches, and for which changes (`kind`: 1 created, 2 changed, 4 deleted,
/// or'ed; all three when absent).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct FileWatcher {
    /// The glob.
    #[serde(rename = "globPattern")]
    pub glob: GlobPattern,
    /// The kinds of change, as bits.
    #[serde(default)]
    pub kind: Option<u32>,
}

/// A glob: matched against a file's whole path, or (`relative`) against its path below a folder.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum GlobPattern {
    /// Matched against the whole path (`**/*.py`).
    Plain(String),
    /// Matched against the path below `baseUri`.
    Relative {
        /// The folder: a URI, or a workspace folder (`{uri, name}`).
        #[serde(rename = "baseUri")]
        base: BaseUri,
        /// The glob below it.
        pattern: String,
    },
}

/// A relative glob's folder, as a URI or as a workspace folder.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum BaseUri {
    /// A URI.
    Uri(String),
    /// A workspace folder: its `uri` (its `name` passed over).
    Folder {
        /// The folder's URI.
        uri: String,
    },
}

impl BaseUri {
    /// The folder's URI, however it was given.
    pub fn uri(&self) -> &str {
        match self {
            BaseUri::Uri(u) | BaseUri::Folder { uri: u } => u,
        }
    }
}

/// `client/unregisterCapability`'s params (`unregisterations`: the protocol's own spelling).
#[derive(Debug, Deserialize, Serialize)]
pub struct Unregistrations {
    /// The registrations withdrawn.
    pub unregisterations: Vec<IdAndMethod>,
}

/// `workspace/configuration`'s params: its items, each passed over (a `Vec` of a type without
/// size holds no memory, however many there are).
#[derive(Debug, Deserialize, Serialize)]
pub struct ConfigurationItems {
    /// One entry per item.
    pub items: Vec<Item>,
}

/// A configuration item, passed over (written as `{}`).
#[derive(Debug, Clone, Copy)]
pub struct Item;

impl<'de> Deserialize<'de> for Item {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Item, D::Error> {
        IgnoredAny::deserialize(deserializer).map(|_| Item)
    }
}

impl Serialize for Item {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        serializer.serialize_map(Some(0))?.end()
    }
}

/// `$/progress`, its params read as the token and the kind of report (`begin`, `report`, `end`);
/// the rest (title, message, percentage) is passed over.
pub enum Progress {}

impl Notification for Progress {
    type Params = ProgressParams;
    const METHOD: &'static str = lsp_types::notification::Progress::METHOD;
}

/// The params of `$/progress` as this client reads them.
#[derive(Debug, Deserialize, Serialize)]
pub struct ProgressParams {
    /// The token, a number or a string.
    pub token: lsp_types::NumberOrString,
    /// The report.
    pub value: ProgressValue,
}

/// A progress report as this client reads it.
#[derive(Debug, Deserialize, Serialize)]
pub struct ProgressValue {
    /// `begin`, `report` or `end` (absent for a partial result).
    #[serde(default)]
    pub kind: Option<String>,
}

/// The command typescript-language-server and vtsls offer (in `executeCommandProvider`) to pass
/// one request to their tsserver: `arguments` are the tsserver command, its args and a config.
pub const TSSERVER_REQUEST: &str = "typescript.tsserverRequest";

/// Which server passes [`TSSERVER_REQUEST`] on: they take the file differently and publish
/// tsserver's diagnostics in their own terms, which a check's answer is given in too (a later
/// publish of the same diagnostics then changes nothing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TsServerKind {
    /// typescript-language-server: the file as its URI (it finds the document it has by it);
    /// diagnostics from `typescript`.
    #[default]
    TypescriptLanguageServer,
    /// vtsls, VS Code's TypeScript extension as a language server (its `serverInfo` name): the
    /// file as tsserver's own path (a URI goes to tsserver as it is, which finds it in no
    /// project and fails, answered `null`); diagnostics from `ts`, and VS Code's style checks
    /// (unused names, unreachable code, switch fall-through, missing returns) as warnings when
    /// tsserver says error, as its `typescript.reportStyleChecksAsWarnings` does by default.
    Vtsls,
}

impl TsServerKind {
    /// The kind of a server from its `initialize` answer's `serverInfo` name.
    pub fn from_name(name: Option<&str>) -> TsServerKind {
        match name {
            Some("vtsls") => TsServerKind::Vtsls,
            _ => TsServerKind::TypescriptLanguageServer,
        }
    }

    /// The `file` of a request about `path` (whose URI is `uri`).
    pub fn file_arg(self, path: &str, uri: &str) -> String {
        match self {
            TsServerKind::TypescriptLanguageServer => uri.to_owned(),
            TsServerKind::Vtsls => path.to_owned(),
        }
    }
}

/// The TypeScript codes VS Code reports as warnings though tsserver says error (its
/// `styleCheckDiagnostics`): declared but never read (6133, 6138, 6192, 6196, 6198, 6199,
/// 6205), unreachable code (7027), unused label (7028), fall-through case (7029), not all paths
/// return a value (7030).
const STYLE_CHECKS: [i32; 11] = [
    6133, 6138, 6192, 6196, 6198, 6199, 6205, 7027, 7028, 7029, 7030,
];

/// `workspace/executeCommand` of [`TSSERVER_REQUEST`], its answer read as the tsserver response
/// of a diagnostics request (`syntacticDiagnosticsSync`, `semanticDiagnosticsSync`,
/// `suggestionDiagnosticsSync`); `null` from a server that does not know the command.
pub enum TsServerRequest {}

impl Request for TsServerRequest {
    type Params = lsp_types::ExecuteCommandParams;
    type Result = Option<TsServerResponse>;
    const METHOD: &'static str = lsp_types::request::ExecuteCommand::METHOD;
}

/// A tsserver response as typescript-language-server passes it on: `type` is `response` for an
/// answer (`noContent` and `cancelled` are not), `body` the diagnostics.
#[derive(Debug, Deserialize, Serialize)]
pub struct TsServerResponse {
    /// `response`, `noContent` or `cancelled`.
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    /// False when tsserver failed the request.
    #[serde(default)]
    pub success: Option<bool>,
    /// The diagnostics.
    #[serde(default)]
    pub body: Option<Vec<TsDiagnostic>>,
    /// The diagnostics of `body` that could not be read, left out of it.
    #[serde(skip)]
    pub dropped: Dropped,
}

impl TsServerResponse {
    /// The answer `raw` from `kind` of server (`null` is `None`), keeping at most `max`
    /// diagnostics, the most severe in that server's terms ([`MostSevere`]).
    pub fn read(
        raw: &RawValue,
        max: usize,
        kind: TsServerKind,
    ) -> serde_json::Result<Option<TsServerResponse>> {
        #[derive(Deserialize)]
        struct Fields<'a> {
            #[serde(rename = "type", default)]
            kind: Option<String>,
            #[serde(default)]
            success: Option<bool>,
            #[serde(default, borrow)]
            body: Option<&'a RawValue>,
        }
        let Some(fields) = serde_json::from_str::<Option<Fields>>(raw.get())? else {
            return Ok(None);
        };
        let rank = |d: &TsDiagnostic| severity_rank(Some(d.severity(kind)));
        // A tsserver diagnostic it cannot read is dropped, as a published one is.
        let (body, dropped) = match fields.body {
            Some(body) => {
                let (kept, dropped) = MostSevere::new(max, rank).read(body)?;
                (Some(kept), dropped)
            }
            None => (None, Dropped::default()),
        };
        Ok(Some(TsServerResponse {
            kind: fields.kind,
            success: fields.success,
            body,
            dropped,
        }))
    }
}

/// A tsserver diagnostic (`protocol.Diagnostic`) with only what the client keeps: positions are
/// 1-based lines and UTF-16 offsets; related information and tags are passed over.
#[derive(Debug, Deserialize, Serialize)]
pub struct TsDiagnostic {
    /// Where it starts.
    pub start: TsLocation,
    /// Where it ends.
    pub end: TsLocation,
    /// What.
    pub text: String,
    /// TypeScript's number for it.
    #[serde(default)]
    pub code: Option<i32>,
    /// `error`, `warning`, `suggestion` or `message`.
    #[serde(default)]
    pub category: String,
    /// Who says so, when not TypeScript itself (a plugin).
    #[serde(default)]
    pub source: Option<String>,
}

/// A position in tsserver's terms.
#[derive(Debug, Deserialize, Serialize)]
pub struct TsLocation {
    /// 1-based line.
    pub line: u32,
    /// 1-based UTF-16 offset in the line.
    pub offset: u32,
}

impl TsDiagnostic {
    /// Its category as `kind` of server gives it as a severity: `suggestion` a hint, `warning` a
    /// warning, anything else an error, but for vtsls' style checks (warnings).
    pub fn severity(&self, kind: TsServerKind) -> lsp_types::DiagnosticSeverity {
        match self.category.as_str() {
            "warning" => lsp_types::DiagnosticSeverity::WARNING,
            "suggestion" => lsp_types::DiagnosticSeverity::HINT,
            "error"
                if kind == TsServerKind::Vtsls
                    && self.code.is_some_and(|c| STYLE_CHECKS.contains(&c)) =>
            {
                lsp_types::DiagnosticSeverity::WARNING
            }
            _ => lsp_types::DiagnosticSeverity::ERROR,
        }
    }

    /// The diagnostic as `kind` of server publishes it: 0-based positions, the category as
    /// severity ([`TsDiagnostic::severity`]), its source (`typescript` or `ts`) unless one is
    /// given.
    pub fn into_lsp(self, kind: TsServerKind) -> ServerDiagnostic {
        let severity = self.severity(kind);
        let pos = |l: TsLocation| lsp_types::Position {
            line: l.line.saturating_sub(1),
            character: l.offset.saturating_sub(1),
        };
        ServerDiagnostic {
            range: lsp_types::Range {
                start: pos(self.start),
                end: pos(self.end),
            },
            severity: Some(severity),
            code: self.code.map(lsp_types::NumberOrString::Number),
            source: Some(self.source.unwrap_or_else(|| {
                match kind {
                    TsServerKind::TypescriptLanguageServer => "typescript",
                    TsServerKind::Vtsls => "ts",
                }
                .to_owned()
            })),
            message: self.text,
        }
    }
}
