//! The arguments of each tool as typed structs, and [`ToolCall::parse`], which reads them from the
//! `arguments` of a `tools/call`.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

use super::{ToolCall, ToolName, ToolSet};
use crate::jsonrpc::{RpcError, Scanner};
use crate::types::Asker;

/// Arguments of `openDiff`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenDiffArgs {
    /// Path of the file before the change (may not exist: a new file).
    pub old_file_path: String,
    /// Path of the file after the change (the real client sends the same path as `old_file_path`).
    pub new_file_path: String,
    /// The proposed contents.
    pub new_file_contents: String,
    /// Name of the diff tab, for example `✻ [Claude Code] main.rs (4f025d) ⧉`.
    pub tab_name: String,
}

/// Arguments of `close_tab`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CloseTabArgs {
    /// Name of the tab.
    pub tab_name: String,
}

/// Arguments of `openFile` (wire names in camelCase).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OpenFileArgs {
    /// Path of the file (`filePath`).
    pub file_path: String,
    /// Open in a preview tab.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<bool>,
    /// Text where the selection starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_text: Option<String>,
    /// Text where the selection ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_text: Option<String>,
    /// Extend the selection to the end of its last line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select_to_end_of_line: Option<bool>,
    /// Bring the editor to the front (default true); when false the answer is an [`OpenFileResult`](super::OpenFileResult).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub make_frontmost: Option<bool>,
    /// Line where the selection starts.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "line_number"
    )]
    pub start_line: Option<u64>,
    /// Line where the selection ends.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "line_number"
    )]
    pub end_line: Option<u64>,
}

/// A line number as the schema (`{"type": "integer", "minimum": 0}`) allows it: JSON Schema
/// (draft 6 on) counts any number with a zero fraction as an integer, so `3.0` is line 3, and one
/// past `u64::MAX` is taken as `u64::MAX` (no file has that many lines). A negative number or a
/// fraction is refused.
struct LineNumber(u64);

impl<'de> Deserialize<'de> for LineNumber {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = LineNumber;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a non-negative integer")
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<LineNumber, E> {
                Ok(LineNumber(n))
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<LineNumber, E> {
                u64::try_from(n)
                    .map(LineNumber)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(n), &self))
            }
            fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<LineNumber, E> {
                if n >= 0.0 && n.fract() == 0.0 {
                    // `as` saturates: a number past u64::MAX is u64::MAX.
                    Ok(LineNumber(n as u64))
                } else {
                    Err(E::invalid_value(serde::de::Unexpected::Float(n), &self))
                }
            }
        }
        d.deserialize_u64(V)
    }
}

/// An optional [`LineNumber`] (`null` or absent: none).
fn line_number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Ok(Option::<LineNumber>::deserialize(d)?.map(|n| n.0))
}

impl OpenFileArgs {
    /// `makeFrontmost` with its default applied (true).
    pub fn wants_frontmost(&self) -> bool {
        self.make_frontmost.unwrap_or(true)
    }
}

/// Arguments of `open_files`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenFilesArgs {
    /// Paths of the files (`file_paths`).
    pub file_paths: Vec<String>,
}

/// Arguments of `getDiagnostics`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct GetDiagnosticsArgs {
    /// `file://` URI of one file, as the client writes it (the real client: the path unescaped,
    /// `file:///a/my app.py`); `None` asks for every file. Answer under this very string
    /// ([`FileDiagnostics::uri`](crate::FileDiagnostics::uri)), also in later answers to `{}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
}

/// Arguments of `checkDocumentDirty`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckDocumentDirtyArgs {
    /// Path of the document (`filePath`).
    pub file_path: String,
}

/// Arguments of `saveDocument`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SaveDocumentArgs {
    /// Path of the document (`filePath`).
    pub file_path: String,
}

/// Arguments of `reformat_file`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReformatFileArgs {
    /// Path of the file (`file_path`).
    pub file_path: String,
}

/// Arguments of `executeCode`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecuteCodeArgs {
    /// The code to run.
    pub code: String,
}

/// Arguments of a tool that takes none: any object is accepted, its members ignored.
#[derive(Deserialize)]
pub(super) struct NoArgs {}

/// A deserializer that only lets a JSON object through: serde's derived structs would also accept
/// a positional array, which is not a valid `arguments` value.
pub(super) struct OnlyMap<D>(pub(super) D);

impl<'de, D: Deserializer<'de>> Deserializer<'de> for OnlyMap<D> {
    type Error = D::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_map(v)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

/// `T` read from `json` only when it is an object, with nothing after it: a derived struct would
/// also take an array by position, and MCP's params are objects (docs/protocol.md, "MCP
/// lifecycle").
pub(crate) fn from_object<'a, T: Deserialize<'a>>(json: &'a str) -> serde_json::Result<T> {
    let mut de = serde_json::Deserializer::from_str(json);
    let value = T::deserialize(OnlyMap(&mut de))?;
    de.end()?;
    Ok(value)
}

impl ToolCall {
    /// Parses the `name` and `arguments` of a `tools/call`.
    ///
    /// `arguments` absent or JSON `null` counts as `{}`; otherwise it must be an object. Unknown members are
    /// ignored (the real client adds some); tools without arguments accept any object. Both errors map to
    /// JSON-RPC `-32602`. This does not check whether the host offers the tool: compare [`ToolCall::name`]
    /// with its [`ToolSet`].
    ///
    /// ```
    /// use claude_ide_bridge::{ToolCall, ToolCallError};
    /// use serde_json::value::RawValue;
    /// let args = RawValue::from_string(r#"{"tab_name":"✻ [Claude Code] a.rs ⧉","extra":1}"#.into()).unwrap();
    /// match ToolCall::parse("close_tab", Some(&args)).unwrap() {
    ///     ToolCall::CloseTab(a) => assert_eq!(a.tab_name, "✻ [Claude Code] a.rs ⧉"),
    ///     other => panic!("{other:?}"),
    /// }
    /// assert_eq!(ToolCall::parse("closeAllDiffTabs", None).unwrap(), ToolCall::CloseAllDiffTabs);
    /// assert!(matches!(ToolCall::parse("rm_rf", None), Err(ToolCallError::UnknownTool(_))));
    /// assert!(matches!(ToolCall::parse("close_tab", None), Err(ToolCallError::InvalidArguments(_))));
    /// ```
    pub fn parse(name: &str, arguments: Option<&RawValue>) -> Result<ToolCall, ToolCallError> {
        let tool =
            ToolName::from_name(name).ok_or_else(|| ToolCallError::UnknownTool(name.to_owned()))?;
        ToolCall::parse_arguments(tool, arguments.map(RawValue::get))
    }

    /// [`ToolCall::parse`] for a known tool, `arguments` as JSON text.
    fn parse_arguments(tool: ToolName, arguments: Option<&str>) -> Result<ToolCall, ToolCallError> {
        let json = match arguments.map(str::trim) {
            None | Some("null") => "{}",
            Some(json) => json,
        };
        if !json.starts_with('{') {
            return Err(ToolCallError::InvalidArguments(format!(
                "invalid arguments for {tool}: expected an object"
            )));
        }
        let mut de = serde_json::Deserializer::from_str(json);
        ToolCall::deserialize_arguments(tool, &mut de)
            .and_then(|call| de.end().map(|()| call))
            .map_err(|e| {
                ToolCallError::InvalidArguments(format!(
                    "invalid arguments for {tool}: {}",
                    crate::jsonrpc::echoed_error(&e)
                ))
            })
    }
}

/// Why `tools/call` params are not a call of an offered tool.
#[derive(Debug)]
pub(crate) enum CallRefused {
    /// The params are malformed, or the tool is unknown or not offered: a protocol error.
    Params(RpcError),
    /// The tool's arguments do not fit its schema (the message names the fault): since MCP
    /// 2025-11-25 (SEP-1303) a tool error, which the model reads and can correct; before, `-32602`.
    Arguments(String),
}

impl From<RpcError> for CallRefused {
    fn from(e: RpcError) -> CallRefused {
        CallRefused::Params(e)
    }
}

impl From<CallRefused> for RpcError {
    fn from(e: CallRefused) -> RpcError {
        match e {
            CallRefused::Params(e) => e,
            CallRefused::Arguments(message) => RpcError::invalid_params(message),
        }
    }
}

/// The `_meta` member that names the model's tool use: the real client sends it on the calls the
/// model asked for, and not on its own (its diagnostics checks around an edit).
const TOOL_USE_ID: &str = "claudecode/toolUseId";

/// A `tools/call` read: the call, and who asked for it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Called {
    pub(crate) tool: ToolCall,
    pub(crate) asker: Asker,
}

/// Who asked, as a `_meta` tells: an object naming a tool use ([`TOOL_USE_ID`], a string; the last
/// of its kind) is the model's call, any other object the client's own; none, or a `_meta` that
/// is no object, tells nothing.
struct MetaAsker(Asker);

impl<'de> Deserialize<'de> for MetaAsker {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = MetaAsker;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("_meta")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<MetaAsker, A::Error> {
                let mut asker = Asker::Client;
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    if key == TOOL_USE_ID {
                        // Raw: any value the other members could hold passes, as the scanner's.
                        let value: &'de RawValue = map.next_value()?;
                        asker = if value.get().starts_with('"') {
                            Asker::Model
                        } else {
                            Asker::Client
                        };
                    } else {
                        map.next_value::<serde::de::IgnoredAny>()?;
                    }
                }
                Ok(MetaAsker(asker))
            }
        }
        d.deserialize_map(V)
    }
}

/// The params of a `tools/call` (`name`, `arguments`, `_meta`, ignored members) by the
/// general rules: the tool must be one `offered`, and every fault is named. What `_meta` tells
/// ([`Asker`]) refuses nothing: one that cannot be read tells nothing.
pub(crate) fn parse_call_params(offered: ToolSet, params: &str) -> Result<Called, CallRefused> {
    let p: CallParams<'_> = from_object(params).map_err(|e| {
        RpcError::invalid_params(format!(
            "invalid tools/call params: {}",
            crate::jsonrpc::echoed_error(&e)
        ))
    })?;
    offered.resolve(&p.name).map_err(RpcError::from)?;
    // `arguments` is an object in CallToolRequest's schema: anything else is a malformed request
    // (a protocol error in every version), not arguments that miss the tool's own schema.
    if p.arguments
        .is_some_and(|a| !matches!(a.get().trim_start().as_bytes(), [b'{', ..] | b"null"))
    {
        return Err(RpcError::invalid_params(
            "invalid tools/call params: arguments must be an object",
        )
        .into());
    }
    let tool = ToolCall::parse(&p.name, p.arguments).map_err(|e| match e {
        ToolCallError::InvalidArguments(message) => CallRefused::Arguments(message),
        e => CallRefused::Params(e.into()),
    })?;
    let asker = p
        .meta
        .and_then(|m| serde_json::from_str::<MetaAsker>(m.get()).ok())
        .map_or(Asker::Unknown, |m| m.0);
    Ok(Called { tool, asker })
}

/// The members of `tools/call` params: `name` and `arguments` once each (a repeated one is
/// refused), `_meta` the last of its kind (as unknown members, it refuses nothing).
struct CallParams<'a> {
    name: std::borrow::Cow<'a, str>,
    arguments: Option<&'a RawValue>,
    meta: Option<&'a RawValue>,
}

impl<'de> Deserialize<'de> for CallParams<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = CallParams<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("tools/call params")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<CallParams<'de>, A::Error> {
                let (mut name, mut arguments, mut meta) = (None, None, None);
                while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                    match &*key {
                        "name" if name.is_some() => return Err(A::Error::duplicate_field("name")),
                        "name" => name = Some(map.next_value()?),
                        "arguments" if arguments.is_some() => {
                            return Err(A::Error::duplicate_field("arguments"))
                        }
                        "arguments" => arguments = Some(map.next_value::<Option<&'de RawValue>>()?),
                        "_meta" => meta = Some(map.next_value()?),
                        _ => drop(map.next_value::<serde::de::IgnoredAny>()?),
                    }
                }
                Ok(CallParams {
                    name: name.ok_or_else(|| A::Error::missing_field("name"))?,
                    arguments: arguments.flatten(),
                    meta,
                })
            }
        }
        d.deserialize_map(V)
    }
}

/// Who asked, as the `_meta` here tells ([`MetaAsker`]), read past; `None` where the scanner
/// gives up.
fn scan_asker(s: &mut Scanner<'_>) -> Option<Asker> {
    if s.next_byte()? != b'{' {
        return s.value().map(|_| Asker::Unknown);
    }
    let mut asker = Asker::Client;
    s.object_with_keys(&[TOOL_USE_ID], |s, key| {
        if key == TOOL_USE_ID {
            asker = if s.next_byte()? == b'"' {
                Asker::Model
            } else {
                Asker::Client
            };
        }
        s.value().map(drop)
    })?;
    Some(asker)
}

/// The params of a `tools/call` (`name`, `arguments`, `_meta`, ignored members) as the fast
/// path of [`jsonrpc::decode_with`] reads them: `None`, to have the general decoder read the message
/// and report it precisely, for a tool that is not offered, arguments that do not parse, or anything
/// the scanner does not read.
///
/// [`jsonrpc::decode_with`]: crate::jsonrpc::decode_with
pub(crate) fn scan_call_params(offered: ToolSet, s: &mut Scanner<'_>) -> Option<Called> {
    let (mut tool, mut arguments, mut call, mut asker) = (None, None, None, None);
    s.object_with_keys(&["name", "arguments", "_meta"], |s, key| {
        match key {
            "name" if tool.is_none() => tool = Some(offered.resolve(s.plain_str()?).ok()?),
            // The real client's order, the name first: the arguments are read where they stand.
            "arguments" if arguments.is_none() && call.is_none() => match tool {
                Some(tool) if s.next_byte()? == b'{' => {
                    call = Some(ToolCall::deserialize_object_arguments(tool, &mut *s).ok()?);
                }
                _ => arguments = Some(s.value()?),
            },
            "_meta" if asker.is_none() => asker = Some(scan_asker(s)?),
            "name" | "arguments" | "_meta" => return None,
            _ => drop(s.value()?),
        }
        Some(())
    })?;
    let tool = match call {
        Some(call) => call,
        None => ToolCall::parse_arguments(tool?, arguments).ok()?,
    };
    Some(Called {
        tool,
        asker: asker.unwrap_or(Asker::Unknown),
    })
}

/// Why a `tools/call` could not be parsed. Both cases map to JSON-RPC `-32602` (invalid params).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolCallError {
    /// No tool has this name (the name as sent).
    UnknownTool(String),
    /// The arguments do not match the tool's schema; the message names the field or type problem.
    InvalidArguments(String),
}

impl ToolCallError {
    /// The JSON-RPC error code to answer with: always invalid params (`-32602`,
    /// [`RpcError::INVALID_PARAMS`](crate::RpcError::INVALID_PARAMS)); the error becomes
    /// that answer through `From<ToolCallError> for RpcError`.
    pub const fn json_rpc_code(&self) -> i32 {
        crate::jsonrpc::INVALID_PARAMS
    }
}

impl fmt::Display for ToolCallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolCallError::UnknownTool(name) => {
                write!(f, "unknown tool: {}", crate::jsonrpc::echoed_name(name))
            }
            ToolCallError::InvalidArguments(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for ToolCallError {}

impl From<ToolCallError> for RpcError {
    /// Invalid params (`-32602`) with the error's message.
    fn from(e: ToolCallError) -> RpcError {
        RpcError::invalid_params(e.to_string())
    }
}
