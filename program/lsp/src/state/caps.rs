//! What a server supports ([`Caps`], read from its `initialize` answer), and what the client
//! tells it about itself ([`initialize_params`]).

use lsp_types::request as req;
use lsp_types::{TextDocumentSyncCapability, TextDocumentSyncKind};
use serde_json::value::RawValue;

#[cfg(doc)]
use super::State;
use crate::messages::{TsServerKind, TSSERVER_REQUEST};
use crate::rpc;
use crate::sys::path_of_uri;

/// What the server supports, from its `initialize` answer and later registrations.
#[derive(Debug, Clone, Default)]
pub(crate) struct Caps {
    pub pull: bool,
    pub pull_identifier: Option<String>,
    pub formatting: bool,
    /// `Some(include_text)` when the server wants `didSave`.
    pub save: Option<bool>,
    /// Whether the server takes `didChange` (else a changed document is closed and opened again).
    pub change: bool,
    /// Whether it asked for incremental changes: a new text is then sent as one edit over the
    /// whole old text, not as a change without a range (which vtsls 0.3 takes wrongly: it
    /// exits on "Bad line number" at a shorter module's edit).
    pub incremental: bool,
    /// Whether it offers [`TSSERVER_REQUEST`] (typescript-language-server, vtsls): its tsserver
    /// computes a file's diagnostics on request ([`State::checks_on_request`]).
    pub tsserver: bool,
    /// Which of them it is (its `serverInfo` name): how it takes the request and names what it
    /// answers.
    pub tsserver_kind: TsServerKind,
    /// Whether it leaves its other open documents' diagnostics as they were when a file they
    /// may include changes (clangd, by its `serverInfo` name or its program's name:
    /// [`crate::table::leaves_dependents_unchecked`]): the bridge then checks them again
    /// ([`State::recheck_others`]).
    pub stale_dependents: bool,
}

/// The part of a server's `initialize` answer the bridge reads. Each capability it uses is read
/// on its own ([`Caps::from_initialize`]): one a server spells off-spec costs only itself, and
/// the forty-odd it does not use are not read at all (lsp-types' whole `ServerCapabilities`
/// fails on any of them, and its decoder is about a hundred kilobytes of the program).
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct InitializeAnswer {
    #[serde(default)]
    capabilities: UsedCapabilities,
    server_info: Option<Box<RawValue>>,
}

/// The server capabilities the bridge uses, each as the server sent it.
#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct UsedCapabilities {
    text_document_sync: Option<Box<RawValue>>,
    document_formatting_provider: Option<Box<RawValue>>,
    execute_command_provider: Option<Box<RawValue>>,
    diagnostic_provider: Option<Box<RawValue>>,
}

/// `serverInfo`: the name only.
#[derive(serde::Deserialize)]
struct ServerName {
    name: String,
}

/// One capability as lsp-types types it: `None` when absent, `Some(Err(why))` when the server
/// spelled it off-spec.
fn capability<T: serde::de::DeserializeOwned>(
    raw: &Option<Box<RawValue>>,
    name: &str,
) -> Option<Result<T, String>> {
    raw.as_ref().map(|raw| {
        serde_json::from_str(raw.get())
            .map_err(|e| format!("its initialize answer's {name} is unreadable ({e})"))
    })
}

/// [`capability`], one spelled off-spec told in `why` and taken as absent.
fn capability_or_absent<T: serde::de::DeserializeOwned>(
    raw: &Option<Box<RawValue>>,
    name: &str,
    why: &mut Vec<String>,
) -> Option<T> {
    match capability(raw, name)? {
        Ok(v) => Some(v),
        Err(e) => {
            why.push(e);
            None
        }
    }
}

impl Caps {
    /// The capabilities of an `initialize` answer; `why` gets one line for each capability the
    /// bridge could not read, which then counts as absent (an unreadable `textDocumentSync` as
    /// full-text changes, the common case). `Err` when the answer is not an object.
    pub(super) fn from_initialize(
        result: &RawValue,
        why: &mut Vec<String>,
    ) -> Result<Caps, String> {
        let init: InitializeAnswer =
            rpc::decode_with::<req::Initialize, _>(result, |raw| serde_json::from_str(raw.get()))?;
        let c = init.capabilities;
        let name = capability_or_absent::<ServerName>(&init.server_info, "serverInfo", why)
            .map(|i| i.name);
        let formatting =
            capability_or_absent::<lsp_types::OneOf<bool, lsp_types::DocumentFormattingOptions>>(
                &c.document_formatting_provider,
                "documentFormattingProvider",
                why,
            );
        let commands = capability_or_absent::<lsp_types::ExecuteCommandOptions>(
            &c.execute_command_provider,
            "executeCommandProvider",
            why,
        );
        let diagnostics = capability_or_absent::<lsp_types::DiagnosticServerCapabilities>(
            &c.diagnostic_provider,
            "diagnosticProvider",
            why,
        );
        let sync =
            capability::<TextDocumentSyncCapability>(&c.text_document_sync, "textDocumentSync");
        let mut caps = Caps {
            pull: diagnostics.is_some(),
            formatting: match formatting {
                Some(lsp_types::OneOf::Left(b)) => b,
                Some(lsp_types::OneOf::Right(_)) => true,
                None => false,
            },
            tsserver: commands.is_some_and(|o| o.commands.iter().any(|c| c == TSSERVER_REQUEST)),
            tsserver_kind: TsServerKind::from_name(name.as_deref()),
            stale_dependents: name
                .as_deref()
                .is_some_and(crate::table::leaves_dependents_unchecked),
            ..Caps::default()
        };
        match diagnostics {
            Some(lsp_types::DiagnosticServerCapabilities::Options(o)) => {
                caps.pull_identifier = o.identifier;
            }
            Some(lsp_types::DiagnosticServerCapabilities::RegistrationOptions(o)) => {
                caps.pull_identifier = o.diagnostic_options.identifier;
            }
            None => {}
        }
        match sync {
            Some(Ok(TextDocumentSyncCapability::Kind(kind))) => {
                caps.change = kind != TextDocumentSyncKind::NONE;
                caps.incremental = kind == TextDocumentSyncKind::INCREMENTAL;
            }
            Some(Ok(TextDocumentSyncCapability::Options(o))) => {
                caps.change = o.change.is_some_and(|k| k != TextDocumentSyncKind::NONE);
                caps.incremental = o.change == Some(TextDocumentSyncKind::INCREMENTAL);
                caps.save = match o.save {
                    Some(lsp_types::TextDocumentSyncSaveOptions::Supported(true)) => Some(false),
                    Some(lsp_types::TextDocumentSyncSaveOptions::SaveOptions(s)) => {
                        Some(s.include_text.unwrap_or(false))
                    }
                    _ => None,
                };
            }
            Some(Err(e)) => {
                why.push(format!("{e}; assuming didChange"));
                caps.change = true;
            }
            None => {}
        }
        Ok(caps)
    }
}

/// What the client tells a server about itself in `initialize`.
// `rootPath` and `rootUri` are deprecated in favour of `workspaceFolders`, and still sent for
// the servers that read only them.
#[allow(deprecated)]
pub(crate) fn initialize_params(
    pid: u32,
    folders: &[lsp_types::WorkspaceFolder],
) -> lsp_types::InitializeParams {
    use lsp_types::*;
    let yes = Some(true);
    InitializeParams {
        process_id: Some(pid),
        client_info: Some(ClientInfo {
            name: "claude-ide-bridge".to_owned(),
            version: Some(env!("CARGO_PKG_VERSION").to_owned()),
        }),
        root_uri: folders.first().map(|f| f.uri.clone()),
        root_path: folders.first().and_then(|f| path_of_uri(f.uri.as_str())),
        workspace_folders: Some(folders.to_vec()),
        capabilities: ClientCapabilities {
            general: Some(GeneralClientCapabilities {
                position_encodings: Some(vec![PositionEncodingKind::UTF16]),
                ..Default::default()
            }),
            // `workspace.diagnostics.refreshSupport` is added by `initialize_json`: lsp-types
            // 0.97 names the field `diagnostic`, which servers do not read.
            // Watched files: the program looks at the disk before each question and tells each
            // server of the changes its globs are for (plain globs only: a server then sends
            // no relative ones for folders outside the workspace, which are not looked at).
            workspace: Some(WorkspaceClientCapabilities {
                did_change_watched_files: Some(DidChangeWatchedFilesClientCapabilities {
                    dynamic_registration: yes,
                    relative_pattern_support: Some(false),
                }),
                configuration: yes,
                workspace_folders: yes,
                ..Default::default()
            }),
            window: Some(WindowClientCapabilities {
                work_done_progress: yes,
                ..Default::default()
            }),
            text_document: Some(TextDocumentClientCapabilities {
                synchronization: Some(TextDocumentSyncClientCapabilities {
                    dynamic_registration: yes,
                    did_save: yes,
                    ..Default::default()
                }),
                publish_diagnostics: Some(PublishDiagnosticsClientCapabilities {
                    version_support: yes,
                    related_information: Some(false),
                    ..Default::default()
                }),
                diagnostic: Some(DiagnosticClientCapabilities {
                    dynamic_registration: yes,
                    related_document_support: Some(false),
                }),
                // Static only: a server that registers formatting dynamically (ruff) does so after
                // `initialized`, so a format asked right after the start would find none.
                formatting: Some(DocumentFormattingClientCapabilities {
                    dynamic_registration: Some(false),
                }),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// `initialize` with its params as JSON ([`initialize_json`]).
pub(crate) enum InitializeJson {}

impl lsp_types::request::Request for InitializeJson {
    type Params = serde_json::Value;
    type Result = serde_json::Value;
    const METHOD: &'static str = "initialize";
}

/// `initialize`'s params as sent: `params` with `workspace.diagnostics.refreshSupport`, which
/// lsp-types 0.97 cannot write. A server told so asks the client to pull again
/// (`workspace/diagnostic/refresh`, answered `null`: each question pulls the file anyway)
/// instead of publishing what its pulls answer: ruff, told of a changed configuration file,
/// published its findings for the open files, which were then held twice (pulled and
/// published) and kept after the file was edited.
pub(crate) fn initialize_json(params: &lsp_types::InitializeParams) -> serde_json::Value {
    let mut json = serde_json::to_value(params).unwrap_or_default();
    if let Some(workspace) = json
        .pointer_mut("/capabilities/workspace")
        .and_then(serde_json::Value::as_object_mut)
    {
        workspace.insert(
            "diagnostics".to_owned(),
            serde_json::json!({ "refreshSupport": true }),
        );
    }
    json
}
