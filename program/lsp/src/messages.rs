//! The messages this client reads whose lsp-types types would build what it passes over, as
//! lean views with the same method: each implements lsp-types' `Request` or `Notification`
//! trait, so that every message, sent or read, is named by one trait's `METHOD` and typed by its
//! `Params` (and `Result`). lsp-types' own types build a diagnostic's `data` and
//! `relatedInformation`, a registration's `registerOptions` (any JSON, built as values at about
//! 16 times their bytes) and each configuration item; a view reads what the client keeps and
//! passes over the rest without building it (`tests/parse_memory.rs` measures a publish).

use lsp_types::notification::Notification;
use lsp_types::request::Request;
use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// `textDocument/publishDiagnostics`, its params read as [`Published`].
pub enum PublishDiagnostics {}

impl Notification for PublishDiagnostics {
    type Params = Published;
    const METHOD: &'static str = lsp_types::notification::PublishDiagnostics::METHOD;
}

/// `textDocument/diagnostic` (a pull), its answer read as a [`PullReport`].
pub enum DocumentDiagnostic {}

impl Request for DocumentDiagnostic {
    type Params = lsp_types::DocumentDiagnosticParams;
    type Result = PullReport;
    const METHOD: &'static str = lsp_types::request::DocumentDiagnosticRequest::METHOD;
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
}

/// A registration or unregistration, without its options.
#[derive(Debug, Deserialize, Serialize)]
pub struct IdAndMethod {
    /// The registration's id.
    pub id: String,
    /// The method it is for.
    pub method: String,
}

/// `client/registerCapability`'s params.
#[derive(Debug, Deserialize, Serialize)]
pub struct Registrations {
    /// The registrations.
    pub registrations: Vec<IdAndMethod>,
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
