//! The compatibility methods (docs/protocol.md, "Compatibility methods"): direct JSON-RPC methods
//! other editor plugins answer, such as `readFile` and `files/read`, answered only when the host
//! enables them.

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::value::RawValue;

use super::args::NoArgs;

/// A compatibility method (docs/protocol.md, "Compatibility methods"), called directly as a JSON-RPC method.
///
/// The host answers these only when it enables them, and resolves every path with
/// [`crate::paths::resolve_in_workspace`] first (refusing with `-32602` what falls outside).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompatRequest {
    /// `files/read {path}`.
    FilesRead {
        /// The path as sent.
        path: String,
    },
    /// `workspace/selection`.
    WorkspaceSelection,
    /// `readFile {path}`.
    ReadFile {
        /// The path as sent (often relative to the workspace).
        path: String,
    },
    /// `writeFile {path, content}`.
    WriteFile {
        /// The path as sent.
        path: String,
        /// The new contents.
        content: String,
    },
    /// `listFiles {pattern?}`.
    ListFiles {
        /// A glob such as `*.js`.
        pattern: Option<String>,
    },
    /// `getWorkspaceInfo`.
    GetWorkspaceInfo,
    /// `getOpenFiles`.
    GetOpenFiles,
    /// `getCurrentFile`.
    GetCurrentFile,
}

impl CompatRequest {
    /// The method names, as on the wire.
    pub const METHODS: [&'static str; 8] = [
        "files/read",
        "workspace/selection",
        "readFile",
        "writeFile",
        "listFiles",
        "getWorkspaceInfo",
        "getOpenFiles",
        "getCurrentFile",
    ];

    /// Parses a JSON-RPC request that may be a compatibility method.
    ///
    /// `None`: `method` is not one of them. `Some(Err(message))`: it is, but the params are invalid (answer
    /// `-32602` with the message). Absent or `null` params count as `{}`; params must otherwise be an object,
    /// and unknown members are ignored.
    ///
    /// ```
    /// use claude_ide_bridge::CompatRequest;
    /// use serde_json::value::RawValue;
    /// let params = RawValue::from_string(r#"{"path":"notes/a.md"}"#.into()).unwrap();
    /// let req = CompatRequest::parse("readFile", Some(&params)).unwrap().unwrap();
    /// assert_eq!(req.path(), Some("notes/a.md"));
    /// assert!(CompatRequest::parse("readFile", None).unwrap().is_err());
    /// assert!(CompatRequest::parse("tools/list", None).is_none());
    /// ```
    pub fn parse(method: &str, params: Option<&RawValue>) -> Option<Result<CompatRequest, String>> {
        #[derive(Deserialize)]
        struct PathParams {
            path: String,
        }
        #[derive(Deserialize)]
        struct WriteParams {
            path: String,
            content: String,
        }
        #[derive(Deserialize)]
        struct ListParams {
            #[serde(default)]
            pattern: Option<String>,
        }
        fn params_of<T: DeserializeOwned>(method: &str, json: &str) -> Result<T, String> {
            if !json.starts_with('{') {
                return Err(format!("invalid params for {method}: expected an object"));
            }
            serde_json::from_str(json).map_err(|e| {
                format!(
                    "invalid params for {method}: {}",
                    crate::jsonrpc::echoed_error(&e)
                )
            })
        }
        let json = match params.map(|raw| raw.get().trim()) {
            None | Some("null") => "{}",
            Some(json) => json,
        };
        let no_params = |req: CompatRequest| params_of::<NoArgs>(method, json).map(|_| req);
        Some(match method {
            "files/read" => params_of::<PathParams>(method, json)
                .map(|p| CompatRequest::FilesRead { path: p.path }),
            "readFile" => params_of::<PathParams>(method, json)
                .map(|p| CompatRequest::ReadFile { path: p.path }),
            "writeFile" => {
                params_of::<WriteParams>(method, json).map(|p| CompatRequest::WriteFile {
                    path: p.path,
                    content: p.content,
                })
            }
            "listFiles" => params_of::<ListParams>(method, json)
                .map(|p| CompatRequest::ListFiles { pattern: p.pattern }),
            "workspace/selection" => no_params(CompatRequest::WorkspaceSelection),
            "getWorkspaceInfo" => no_params(CompatRequest::GetWorkspaceInfo),
            "getOpenFiles" => no_params(CompatRequest::GetOpenFiles),
            "getCurrentFile" => no_params(CompatRequest::GetCurrentFile),
            _ => return None,
        })
    }

    /// The method name on the wire.
    pub const fn method(&self) -> &'static str {
        match self {
            CompatRequest::FilesRead { .. } => "files/read",
            CompatRequest::WorkspaceSelection => "workspace/selection",
            CompatRequest::ReadFile { .. } => "readFile",
            CompatRequest::WriteFile { .. } => "writeFile",
            CompatRequest::ListFiles { .. } => "listFiles",
            CompatRequest::GetWorkspaceInfo => "getWorkspaceInfo",
            CompatRequest::GetOpenFiles => "getOpenFiles",
            CompatRequest::GetCurrentFile => "getCurrentFile",
        }
    }

    /// The file path the request touches, which the host must resolve inside the workspace.
    pub fn path(&self) -> Option<&str> {
        match self {
            CompatRequest::FilesRead { path }
            | CompatRequest::ReadFile { path }
            | CompatRequest::WriteFile { path, .. } => Some(path),
            _ => None,
        }
    }
}
