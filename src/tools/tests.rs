//! Tests of the tool catalogue, arguments, results and compatibility requests.

use super::*;
use crate::Asker;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::collections::HashSet;

fn raw(json: &str) -> Box<RawValue> {
    RawValue::from_string(json.to_owned()).unwrap()
}

/// Parses a whole `tools/call` params object the way the server does: `name`, `arguments`, and an ignored
/// `_meta`.
fn call(params: &str) -> Result<ToolCall, ToolCallError> {
    #[derive(Deserialize)]
    struct Params<'a> {
        name: &'a str,
        #[serde(borrow, default)]
        arguments: Option<&'a RawValue>,
    }
    let p: Params<'_> = serde_json::from_str(params).unwrap();
    ToolCall::parse(p.name, p.arguments)
}

fn result_json(r: &ToolResult) -> String {
    let mut out = b"[".to_vec();
    r.write_json(&mut out);
    String::from_utf8(out[1..].to_vec()).unwrap()
}

const META: &str = r#""_meta":{"progressToken":7,"claudecode/toolUseId":"toolu_01ABC"}"#;

fn expected_required(tool: ToolName) -> &'static [&'static str] {
    match tool {
        ToolName::OpenDiff => &[
            "old_file_path",
            "new_file_path",
            "new_file_contents",
            "tab_name",
        ],
        ToolName::CloseTab => &["tab_name"],
        ToolName::OpenFile => &["filePath"],
        ToolName::OpenFiles => &["file_paths"],
        ToolName::CheckDocumentDirty | ToolName::SaveDocument => &["filePath"],
        ToolName::ReformatFile => &["file_path"],
        ToolName::ExecuteCode => &["code"],
        _ => &[],
    }
}

#[test]
fn names_round_trip() {
    let mut seen = HashSet::new();
    for (i, tool) in ToolName::ALL.into_iter().enumerate() {
        assert_eq!(tool as usize, i, "ALL is in declaration order");
        assert_eq!(ToolName::from_name(tool.as_str()), Some(tool));
        assert_eq!(tool.to_string(), tool.as_str());
        assert!(seen.insert(tool.as_str()));
        assert!(!tool.description().is_empty());
    }
    assert_eq!(ToolName::from_name("OpenDiff"), None);
    assert_eq!(ToolName::from_name(""), None);
    assert_eq!(
        ToolName::from_name("getDiagnostics ").map(ToolName::as_str),
        None
    );
}

#[test]
fn schemas_are_object_schemas_naming_required_fields() {
    for tool in ToolName::ALL {
        let schema = tool.input_schema();
        let obj = schema.as_object().unwrap();
        assert_eq!(obj["$schema"], "http://json-schema.org/draft-07/schema#");
        assert_eq!(obj["type"], "object", "{tool}");
        assert!(!obj.contains_key("additionalProperties"), "{tool}");
        let props = obj["properties"].as_object().unwrap();
        for (name, prop) in props {
            let kind = prop["type"].as_str().unwrap();
            assert!(
                ["string", "boolean", "integer", "array"].contains(&kind),
                "{tool}.{name}"
            );
            assert!(prop["description"].is_string(), "{tool}.{name}");
        }
        let required: Vec<&str> = obj
            .get("required")
            .map(|r| {
                r.as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap())
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(required, expected_required(tool), "{tool}");
        for r in &required {
            assert!(props.contains_key(*r), "{tool} requires unknown {r}");
        }
    }
    let open_file = ToolName::OpenFile.input_schema();
    let keys: HashSet<&str> = open_file["properties"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let want: HashSet<&str> = [
        "filePath",
        "preview",
        "startText",
        "endText",
        "selectToEndOfLine",
        "makeFrontmost",
        "startLine",
        "endLine",
    ]
    .into_iter()
    .collect();
    assert_eq!(keys, want);
    assert_eq!(open_file["properties"]["makeFrontmost"]["default"], true);
    assert_eq!(
        ToolName::OpenFiles.input_schema()["properties"]["file_paths"]["items"]["type"],
        "string"
    );
    assert_eq!(
        ToolName::GetDiagnostics.input_schema()["properties"]["uri"]["type"],
        "string"
    );
}

#[test]
fn tool_set_operations() {
    assert_eq!(ToolSet::default(), ToolSet::none());
    assert!(ToolSet::none().is_empty());
    assert_eq!(ToolSet::all().len(), 15);
    assert_eq!(
        ToolSet::all().iter().collect::<Vec<_>>(),
        ToolName::ALL.to_vec()
    );
    let mut set = ToolSet::none();
    assert!(set.insert(ToolName::ExecuteCode));
    assert!(!set.insert(ToolName::ExecuteCode));
    assert!(set.insert(ToolName::OpenDiff));
    assert_eq!(
        set.iter().collect::<Vec<_>>(),
        vec![ToolName::OpenDiff, ToolName::ExecuteCode]
    );
    assert!(set.remove(ToolName::OpenDiff));
    assert!(!set.remove(ToolName::OpenDiff));
    assert_eq!(set.len(), 1);
    assert!(!set.contains(ToolName::OpenDiff));
    assert_eq!(
        ToolSet::all()
            .without(ToolName::OpenDiff)
            .with(ToolName::OpenDiff),
        ToolSet::all()
    );
    let collected: ToolSet = [ToolName::CloseTab, ToolName::GetDiagnostics]
        .into_iter()
        .collect();
    assert_eq!(
        collected,
        ToolSet::none()
            .with(ToolName::GetDiagnostics)
            .with(ToolName::CloseTab)
    );
}

#[test]
fn tools_list_json() {
    let mut out = Vec::new();
    write_tools_list(&mut out, ToolSet::none());
    assert_eq!(out, br#"{"tools":[]}"#);

    let mut out = b"xx".to_vec();
    let set = ToolSet::none()
        .with(ToolName::ExecuteCode)
        .with(ToolName::GetDiagnostics);
    write_tools_list(&mut out, set);
    assert!(out.starts_with(br#"xx{"tools":[{"name":"getDiagnostics","description":""#));
    let v: Value = serde_json::from_slice(&out[2..]).unwrap();
    assert_eq!(
        v,
        json!({"tools": [
            {
                "name": "getDiagnostics",
                "description": ToolName::GetDiagnostics.description(),
                "inputSchema": ToolName::GetDiagnostics.input_schema(),
            },
            {
                "name": "executeCode",
                "description": ToolName::ExecuteCode.description(),
                "inputSchema": ToolName::ExecuteCode.input_schema(),
            },
        ]})
    );

    let mut out = Vec::new();
    write_tools_list(&mut out, ToolSet::all());
    let v: Value = serde_json::from_slice(&out).unwrap();
    let names: Vec<&str> = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ToolName::ALL.map(ToolName::as_str).to_vec());
}

#[test]
fn parse_open_diff_as_the_real_client_sends_it() {
    let params = format!(
        r#"{{"name":"openDiff","arguments":{{"old_file_path":"/ws/src/main.rs","new_file_path":"/ws/src/main.rs","new_file_contents":"fn main() {{\n    println!(\"hi\");\n}}\n","tab_name":"✻ [Claude Code] main.rs (4f025d) ⧉","_meta":{{"x":1}}}},{META}}}"#
    );
    let c = call(&params).unwrap();
    assert_eq!(c.name(), ToolName::OpenDiff);
    assert_eq!(
        c,
        ToolCall::OpenDiff(OpenDiffArgs {
            old_file_path: "/ws/src/main.rs".into(),
            new_file_path: "/ws/src/main.rs".into(),
            new_file_contents: "fn main() {\n    println!(\"hi\");\n}\n".into(),
            tab_name: "✻ [Claude Code] main.rs (4f025d) ⧉".into(),
        })
    );
}

#[test]
fn parse_every_tool_with_extra_members() {
    let cases: Vec<(&str, &str, ToolCall)> = vec![
        (
            "close_tab",
            r#"{"tab_name":"t","unknown":[1,2]}"#,
            ToolCall::CloseTab(CloseTabArgs {
                tab_name: "t".into(),
            }),
        ),
        ("closeAllDiffTabs", "{}", ToolCall::CloseAllDiffTabs),
        (
            "openFile",
            r#"{"filePath":"/ws/a.rs","preview":false,"startText":"fn main","endText":"}","selectToEndOfLine":true,"makeFrontmost":false,"startLine":3,"endLine":9,"other":"x"}"#,
            ToolCall::OpenFile(OpenFileArgs {
                file_path: "/ws/a.rs".into(),
                preview: Some(false),
                start_text: Some("fn main".into()),
                end_text: Some("}".into()),
                select_to_end_of_line: Some(true),
                make_frontmost: Some(false),
                start_line: Some(3),
                end_line: Some(9),
            }),
        ),
        (
            "open_files",
            r#"{"file_paths":["/ws/a.rs","/ws/b c.rs"],"z":null}"#,
            ToolCall::OpenFiles(OpenFilesArgs {
                file_paths: vec!["/ws/a.rs".into(), "/ws/b c.rs".into()],
            }),
        ),
        (
            "getDiagnostics",
            r#"{"uri":"file:///ws/src/main.rs","q":{}}"#,
            ToolCall::GetDiagnostics(GetDiagnosticsArgs {
                uri: Some("file:///ws/src/main.rs".into()),
            }),
        ),
        (
            "getDiagnostics",
            "{}",
            ToolCall::GetDiagnostics(GetDiagnosticsArgs::default()),
        ),
        (
            "getDiagnostics",
            r#"{"uri":null}"#,
            ToolCall::GetDiagnostics(GetDiagnosticsArgs::default()),
        ),
        (
            "getCurrentSelection",
            r#"{"a":1}"#,
            ToolCall::GetCurrentSelection,
        ),
        ("getLatestSelection", "{}", ToolCall::GetLatestSelection),
        ("getOpenEditors", "{}", ToolCall::GetOpenEditors),
        (
            "getWorkspaceFolders",
            r#"{"x":"y"}"#,
            ToolCall::GetWorkspaceFolders,
        ),
        (
            "checkDocumentDirty",
            r#"{"filePath":"/ws/a.rs","x":1}"#,
            ToolCall::CheckDocumentDirty(CheckDocumentDirtyArgs {
                file_path: "/ws/a.rs".into(),
            }),
        ),
        (
            "saveDocument",
            r#"{"filePath":"/ws/a.rs","x":1}"#,
            ToolCall::SaveDocument(SaveDocumentArgs {
                file_path: "/ws/a.rs".into(),
            }),
        ),
        (
            "get_all_opened_file_paths",
            "{}",
            ToolCall::GetAllOpenedFilePaths,
        ),
        (
            "reformat_file",
            r#"{"file_path":"/ws/a.rs","x":1}"#,
            ToolCall::ReformatFile(ReformatFileArgs {
                file_path: "/ws/a.rs".into(),
            }),
        ),
        (
            "executeCode",
            r#"{"code":"print(1 + 1)","x":1}"#,
            ToolCall::ExecuteCode(ExecuteCodeArgs {
                code: "print(1 + 1)".into(),
            }),
        ),
    ];
    let mut covered = ToolSet::none();
    for (name, args, want) in cases {
        let params = format!(r#"{{"name":"{name}","arguments":{args},{META},"extra":true}}"#);
        let got = call(&params).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got, want, "{name}");
        assert_eq!(got.name().as_str(), name);
        covered.insert(got.name());
    }
    covered.insert(ToolName::OpenDiff);
    assert_eq!(covered, ToolSet::all());
}

#[test]
fn open_file_defaults() {
    let c = ToolCall::parse("openFile", Some(&raw(r#"{"filePath":"/a"}"#))).unwrap();
    let ToolCall::OpenFile(args) = c else {
        panic!()
    };
    assert!(args.wants_frontmost());
    assert_eq!(args.preview, None);
    assert_eq!(
        serde_json::to_string(&args).unwrap(),
        r#"{"filePath":"/a"}"#
    );
}

#[test]
fn absent_or_null_arguments() {
    for tool in ToolName::ALL {
        let none = ToolCall::parse(tool.as_str(), None);
        let null = ToolCall::parse(tool.as_str(), Some(&raw("null")));
        let empty = ToolCall::parse(tool.as_str(), Some(&raw(" {} ")));
        assert_eq!(none, null, "{tool}");
        assert_eq!(none, empty, "{tool}");
        if expected_required(tool).is_empty() {
            assert_eq!(none.unwrap().name(), tool);
        } else {
            let Err(ToolCallError::InvalidArguments(msg)) = none else {
                panic!("{tool}")
            };
            assert!(msg.contains("missing field"), "{msg}");
        }
    }
}

#[test]
fn missing_required_fields_are_named() {
    let full: Vec<(ToolName, Value)> = vec![
        (
            ToolName::OpenDiff,
            json!({"old_file_path": "/a", "new_file_path": "/a", "new_file_contents": "x", "tab_name": "t"}),
        ),
        (ToolName::CloseTab, json!({"tab_name": "t"})),
        (ToolName::OpenFile, json!({"filePath": "/a"})),
        (ToolName::OpenFiles, json!({"file_paths": []})),
        (ToolName::CheckDocumentDirty, json!({"filePath": "/a"})),
        (ToolName::SaveDocument, json!({"filePath": "/a"})),
        (ToolName::ReformatFile, json!({"file_path": "/a"})),
        (ToolName::ExecuteCode, json!({"code": "1"})),
    ];
    for (tool, args) in full {
        assert!(
            ToolCall::parse(tool.as_str(), Some(&raw(&args.to_string()))).is_ok(),
            "{tool}"
        );
        for field in expected_required(tool) {
            let mut partial = args.clone();
            partial.as_object_mut().unwrap().remove(*field);
            let err = ToolCall::parse(tool.as_str(), Some(&raw(&partial.to_string()))).unwrap_err();
            let ToolCallError::InvalidArguments(msg) = &err else {
                panic!("{err:?}")
            };
            assert!(msg.contains(&format!("missing field `{field}`")), "{msg}");
            assert!(msg.contains(tool.as_str()), "{msg}");
            assert_eq!(err.json_rpc_code(), -32602);
        }
    }
}

#[test]
fn wrong_types_are_refused() {
    let cases = [
        ("close_tab", r#"{"tab_name":5}"#, "invalid type"),
        (
            "openDiff",
            r#"{"old_file_path":"/a","new_file_path":"/a","new_file_contents":null,"tab_name":"t"}"#,
            "invalid type",
        ),
        (
            "openFile",
            r#"{"filePath":"/a","preview":"yes"}"#,
            "invalid type",
        ),
        (
            "openFile",
            r#"{"filePath":"/a","startLine":-1}"#,
            "invalid value",
        ),
        (
            "openFile",
            r#"{"filePath":"/a","startLine":1.5}"#,
            "invalid value",
        ),
        (
            "openFile",
            r#"{"filePath":"/a","endLine":-1.0}"#,
            "invalid value",
        ),
        (
            "openFile",
            r#"{"filePath":"/a","endLine":"1"}"#,
            "invalid type",
        ),
        ("open_files", r#"{"file_paths":"/a"}"#, "invalid type"),
        ("open_files", r#"{"file_paths":["/a",3]}"#, "invalid type"),
        ("getDiagnostics", r#"{"uri":42}"#, "invalid type"),
        (
            "reformat_file",
            r#"{"filePath":"/a"}"#,
            "missing field `file_path`",
        ),
        (
            "checkDocumentDirty",
            r#"{"file_path":"/a"}"#,
            "missing field `filePath`",
        ),
        ("executeCode", r#"{"code":["x"]}"#, "invalid type"),
        (
            "close_tab",
            r#"{"tab_name":"a","tab_name":"b"}"#,
            "duplicate field",
        ),
    ];
    for (name, args, want) in cases {
        match ToolCall::parse(name, Some(&raw(args))) {
            Err(ToolCallError::InvalidArguments(msg)) => {
                assert!(msg.contains(want), "{name} {args}: {msg}")
            }
            other => panic!("{name} {args}: {other:?}"),
        }
    }
}

/// `startLine` and `endLine` take what their schema (`"type": "integer", "minimum": 0`) allows:
/// JSON Schema counts a number with a zero fraction as an integer, and a line past `u64::MAX` is
/// read as `u64::MAX`; both the general decoder and the fast path read them so.
#[test]
fn line_numbers_take_every_integer_the_schema_allows() {
    let cases = [
        ("3", Some(3)),
        ("3.0", Some(3)),
        ("3e2", Some(300)),
        ("-0", Some(0)),
        ("-0.0", Some(0)),
        ("18446744073709551615", Some(u64::MAX)),
        ("18446744073709551616", Some(u64::MAX)),
        ("1e300", Some(u64::MAX)),
        ("null", None),
    ];
    for (n, want) in cases {
        let args = format!(r#"{{"filePath":"/a","startLine":{n},"endLine":{n}}}"#);
        let want = ToolCall::OpenFile(OpenFileArgs {
            file_path: "/a".into(),
            preview: None,
            start_text: None,
            end_text: None,
            select_to_end_of_line: None,
            make_frontmost: None,
            start_line: want,
            end_line: want,
        });
        assert_eq!(
            ToolCall::parse("openFile", Some(&raw(&args))),
            Ok(want.clone()),
            "{n}"
        );
        let params = format!(r#"{{"name":"openFile","arguments":{args}}}"#);
        let read = parse_call_params(ToolSet::all(), &params).map(|c| c.tool);
        assert_eq!(read.ok(), Some(want), "{n}");
    }
}

#[test]
fn non_object_arguments_are_refused() {
    for tool in [
        ToolName::CloseTab,
        ToolName::GetOpenEditors,
        ToolName::OpenDiff,
    ] {
        for args in ["[]", r#"["t"]"#, r#""t""#, "5", "true"] {
            match ToolCall::parse(tool.as_str(), Some(&raw(args))) {
                Err(ToolCallError::InvalidArguments(msg)) => {
                    assert!(msg.contains("expected an object"), "{msg}")
                }
                other => panic!("{tool} {args}: {other:?}"),
            }
        }
    }
    // A positional array must not sneak in as a struct.
    let positional = r#"["/a","/a","x","t"]"#;
    assert!(ToolCall::parse("openDiff", Some(&raw(positional))).is_err());
}

#[test]
fn unknown_tools() {
    assert_eq!(
        ToolCall::parse("deleteEverything", None),
        Err(ToolCallError::UnknownTool("deleteEverything".into()))
    );
    assert_eq!(
        ToolCall::parse("deleteEverything", Some(&raw("{}")))
            .unwrap_err()
            .to_string(),
        "unknown tool: deleteEverything"
    );
    let long = "x".repeat(1000);
    let shown = ToolCall::parse(&long, None).unwrap_err().to_string();
    assert_eq!(shown, format!("unknown tool: {}...", "x".repeat(64)));
    assert_eq!(
        ToolCallError::UnknownTool("a".into()).json_rpc_code(),
        -32602
    );
    assert!(matches!(
        call(r#"{"name":"getdiagnostics","arguments":{}}"#),
        Err(ToolCallError::UnknownTool(_))
    ));
}

#[test]
fn result_constructors_exact_json() {
    let cases = [
        (
            ToolResult::text("hi"),
            r#"{"content":[{"type":"text","text":"hi"}]}"#,
        ),
        (
            ToolResult::texts(["a", "b"]),
            r#"{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}"#,
        ),
        (ToolResult::texts(Vec::<String>::new()), r#"{"content":[]}"#),
        (
            ToolResult::error("disk full"),
            r#"{"content":[{"type":"text","text":"disk full"}],"isError":true}"#,
        ),
        (
            ToolResult::file_saved("line \"1\"\n"),
            r#"{"content":[{"type":"text","text":"FILE_SAVED"},{"type":"text","text":"line \"1\"\n"}]}"#,
        ),
        (
            ToolResult::tab_closed(),
            r#"{"content":[{"type":"text","text":"TAB_CLOSED"}]}"#,
        ),
        (
            ToolResult::diff_rejected("✻ [Claude Code] a.rs ⧉"),
            r#"{"content":[{"type":"text","text":"DIFF_REJECTED"},{"type":"text","text":"✻ [Claude Code] a.rs ⧉"}]}"#,
        ),
        (
            ToolResult::closed_diff_tabs(0),
            r#"{"content":[{"type":"text","text":"CLOSED_0_DIFF_TABS"}]}"#,
        ),
        (
            ToolResult::closed_diff_tabs(3),
            r#"{"content":[{"type":"text","text":"CLOSED_3_DIFF_TABS"}]}"#,
        ),
        (
            ToolResult::ok(),
            r#"{"content":[{"type":"text","text":"OK"}]}"#,
        ),
        (
            ToolResult::file_not_found(),
            r#"{"content":[{"type":"text","text":"File not found"}]}"#,
        ),
        (
            ToolResult::json(&OpenedFiles {
                opened_files: vec!["/a".into()],
            }),
            r#"{"content":[{"type":"text","text":"{\"opened_files\":[\"/a\"]}"}]}"#,
        ),
        (
            ToolResult::text("out").with_image("iVBORw0KGgo=", "image/png"),
            r#"{"content":[{"type":"text","text":"out"},{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}]}"#,
        ),
    ];
    for (result, want) in cases {
        let got = result_json(&result);
        assert_eq!(got, want);
        let back: ToolResult = serde_json::from_str(&got).unwrap();
        assert_eq!(back, result);
    }
    assert!(!ToolResult::ok().is_error);
    assert!(ToolResult::error("x").is_error);
}

#[test]
fn json_result_that_cannot_serialise_is_an_error() {
    let mut map = std::collections::BTreeMap::new();
    map.insert(vec![1u8], 1);
    let r = ToolResult::json(&map);
    assert!(r.is_error);
}

#[test]
fn content_deserialisation_errors() {
    assert!(serde_json::from_str::<Content>(r#"{"type":"audio","data":"x"}"#).is_err());
    assert!(serde_json::from_str::<Content>(r#"{"type":"text"}"#).is_err());
    assert!(serde_json::from_str::<Content>(r#"{"type":"image","data":"x"}"#).is_err());
}

#[test]
fn result_structs_exact_json() {
    let s = |v: &dyn erased::Ser| v.json();
    assert_eq!(
        s(&OpenFileResult {
            success: true,
            file_path: "/ws/a.rs".into(),
            language_id: "rust".into(),
            line_count: 12,
        }),
        r#"{"success":true,"filePath":"/ws/a.rs","languageId":"rust","lineCount":12}"#
    );
    assert_eq!(
        s(&OpenedFiles {
            opened_files: vec!["/a".into(), "/b".into()]
        }),
        r#"{"opened_files":["/a","/b"]}"#
    );
    assert_eq!(
        s(&vec![FileDiagnostics {
            uri: "file:///ws/a.rs".into(),
            diagnostics: vec![Diagnostic {
                message: "expected `;`".into(),
                severity: Diagnostic::ERROR.into(),
                range: Range::new(Position::new(4, 10), Position::new(4, 11)),
                source: Some("rust-analyzer".into()),
                code: Some(json!(1003)),
            }],
        }]),
        r#"[{"uri":"file:///ws/a.rs","diagnostics":[{"message":"expected `;`","severity":"Error","range":{"start":{"line":4,"character":10},"end":{"line":4,"character":11}},"source":"rust-analyzer","code":1003}]}]"#
    );
    assert_eq!(
        s(&CurrentSelection {
            success: true,
            text: "x".into(),
            file_path: "/ws/a.rs".into(),
            file_url: "file:///ws/a.rs".into(),
            selection: Selection::new(Position::new(0, 0), Position::new(0, 1)),
        }),
        r#"{"success":true,"text":"x","filePath":"/ws/a.rs","fileUrl":"file:///ws/a.rs","selection":{"start":{"line":0,"character":0},"end":{"line":0,"character":1},"isEmpty":false}}"#
    );
    assert_eq!(
        s(&SelectionUnavailable::new("No active editor found")),
        r#"{"success":false,"message":"No active editor found"}"#
    );
    let mut extra = serde_json::Map::new();
    extra.insert("isPinned".into(), json!(false));
    assert_eq!(
        s(&OpenEditors {
            tabs: vec![EditorTab {
                uri: "file:///ws/a.rs".into(),
                is_active: true,
                is_dirty: false,
                label: "a.rs".into(),
                language_id: "rust".into(),
                line_count: 3,
                extra,
            }],
        }),
        r#"{"tabs":[{"uri":"file:///ws/a.rs","isActive":true,"isDirty":false,"label":"a.rs","languageId":"rust","lineCount":3,"isPinned":false}]}"#
    );
    assert_eq!(
        s(&WorkspaceFolders {
            success: true,
            folders: vec![WorkspaceFolder {
                name: "ws".into(),
                uri: "file:///ws".into(),
                path: "/ws".into(),
            }],
            root_path: "/ws".into(),
        }),
        r#"{"success":true,"folders":[{"name":"ws","uri":"file:///ws","path":"/ws"}],"rootPath":"/ws"}"#
    );
    assert_eq!(
        s(&DocumentDirty {
            success: true,
            file_path: "/ws/a.rs".into(),
            is_dirty: true,
            is_untitled: false,
        }),
        r#"{"success":true,"filePath":"/ws/a.rs","isDirty":true,"isUntitled":false}"#
    );
    assert_eq!(
        s(&SaveDocumentResult {
            success: true,
            file_path: "/ws/a.rs".into(),
            saved: true,
            message: "Document saved successfully".into(),
        }),
        r#"{"success":true,"filePath":"/ws/a.rs","saved":true,"message":"Document saved successfully"}"#
    );
    let tab: EditorTab = serde_json::from_str(
        r#"{"uri":"u","isActive":false,"isDirty":true,"label":"l","languageId":"x","lineCount":0,"groupIndex":1}"#,
    )
    .unwrap();
    assert_eq!(tab.extra.get("groupIndex"), Some(&json!(1)));
}

/// Serialises any result struct through one function in the test above.
mod erased {
    pub trait Ser {
        fn json(&self) -> String;
    }
    impl<T: serde::Serialize> Ser for T {
        fn json(&self) -> String {
            serde_json::to_string(self).unwrap()
        }
    }
}

#[test]
fn compat_requests() {
    let p = |method: &str, params: Option<&str>| {
        let raw = params.map(raw);
        CompatRequest::parse(method, raw.as_deref())
    };
    assert_eq!(
        p("files/read", Some(r#"{"path":"/vault/a.md"}"#)),
        Some(Ok(CompatRequest::FilesRead {
            path: "/vault/a.md".into()
        }))
    );
    assert_eq!(
        p("workspace/selection", None),
        Some(Ok(CompatRequest::WorkspaceSelection))
    );
    assert_eq!(
        p("readFile", Some(r#"{"path":"rel/a.txt","x":1}"#)),
        Some(Ok(CompatRequest::ReadFile {
            path: "rel/a.txt".into()
        }))
    );
    assert_eq!(
        p("writeFile", Some(r#"{"path":"a.txt","content":"new\n"}"#)),
        Some(Ok(CompatRequest::WriteFile {
            path: "a.txt".into(),
            content: "new\n".into(),
        }))
    );
    assert_eq!(
        p("listFiles", None),
        Some(Ok(CompatRequest::ListFiles { pattern: None }))
    );
    assert_eq!(
        p("listFiles", Some(r#"{"pattern":"*.js"}"#)),
        Some(Ok(CompatRequest::ListFiles {
            pattern: Some("*.js".into())
        }))
    );
    assert_eq!(
        p("getWorkspaceInfo", Some("{}")),
        Some(Ok(CompatRequest::GetWorkspaceInfo))
    );
    assert_eq!(
        p("getOpenFiles", Some("null")),
        Some(Ok(CompatRequest::GetOpenFiles))
    );
    assert_eq!(
        p("getCurrentFile", Some(r#"{"a":1}"#)),
        Some(Ok(CompatRequest::GetCurrentFile))
    );
    for method in CompatRequest::METHODS {
        let params = r#"{"path":"a","content":"b"}"#;
        let req = p(method, Some(params)).unwrap().unwrap();
        assert_eq!(req.method(), method);
    }
    assert_eq!(p("tools/call", None), None);
    assert_eq!(p("readfile", None), None);
    let err = p("readFile", None).unwrap().unwrap_err();
    assert!(err.contains("missing field `path`"), "{err}");
    let err = p("writeFile", Some(r#"{"path":"a"}"#))
        .unwrap()
        .unwrap_err();
    assert!(err.contains("missing field `content`"), "{err}");
    let err = p("readFile", Some(r#"{"path":7}"#)).unwrap().unwrap_err();
    assert!(err.contains("invalid type"), "{err}");
    let err = p("getOpenFiles", Some("[]")).unwrap().unwrap_err();
    assert!(err.contains("expected an object"), "{err}");
    let err = p("readFile", Some(r#"["a"]"#)).unwrap().unwrap_err();
    assert!(err.contains("expected an object"), "{err}");
    assert_eq!(
        CompatRequest::WriteFile {
            path: "x".into(),
            content: String::new()
        }
        .path(),
        Some("x")
    );
    assert_eq!(CompatRequest::GetCurrentFile.path(), None);
}

proptest::proptest! {
    #[test]
    fn typed_arguments_round_trip(
        old in ".*", new in ".*", contents in ".*", tab in ".*",
        preview in proptest::option::of(proptest::bool::ANY),
        start_text in proptest::option::of(".*"),
        start_line in proptest::option::of(0u64..1_000_000),
    ) {
        let diff = OpenDiffArgs {
            old_file_path: old,
            new_file_path: new,
            new_file_contents: contents,
            tab_name: tab.clone(),
        };
        let json = serde_json::to_string(&diff).unwrap();
        proptest::prop_assert_eq!(ToolCall::parse("openDiff", Some(&raw(&json))), Ok(ToolCall::OpenDiff(diff)));
        let open = OpenFileArgs {
            file_path: tab,
            preview,
            start_text,
            end_text: None,
            select_to_end_of_line: None,
            make_frontmost: preview,
            start_line,
            end_line: start_line,
        };
        let json = serde_json::to_string(&open).unwrap();
        proptest::prop_assert_eq!(ToolCall::parse("openFile", Some(&raw(&json))), Ok(ToolCall::OpenFile(open)));
    }

    #[test]
    fn parse_never_panics(name in "[a-zA-Z_]{0,30}", value in proptest::prelude::any::<Option<i64>>(), key in "[a-zA-Z_]{1,20}") {
        let args = json!({ key: value }).to_string();
        // A name no tool has is refused as such, naming it.
        let parsed = ToolCall::parse(&name, Some(&raw(&args)));
        if ToolName::ALL.iter().all(|t| t.as_str() != name) {
            proptest::prop_assert_eq!(parsed, Err(ToolCallError::UnknownTool(name.clone())));
        }
        for tool in ToolName::ALL {
            // A tool's call parses to that tool, or is refused for its arguments.
            match ToolCall::parse(tool.as_str(), Some(&raw(&args))) {
                Ok(call) => proptest::prop_assert_eq!(call.name(), tool),
                Err(e) => proptest::prop_assert!(matches!(e, ToolCallError::InvalidArguments(_)), "{e:?}"),
            }
        }
    }
}

/// A message through the fast path with [`scan_call_params`] as its params reader: the id and the
/// call when it took the fast path, `None` when it fell back to the general decoder.
fn one_pass(text: &str, offered: ToolSet) -> Option<(String, ToolCall, Asker)> {
    match crate::jsonrpc::decode_with(text, "tools/call", usize::MAX, |s| {
        scan_call_params(offered, s)
    }) {
        crate::jsonrpc::Decoded::Expected { id, params } => {
            Some((id.to_owned(), params.tool, params.asker))
        }
        crate::jsonrpc::Decoded::Frame(_) => None,
    }
}

#[test]
fn real_client_order_takes_the_one_pass() {
    let t = r#"{"method":"tools/call","params":{"name":"close_tab","arguments":{"tab_name":"t"},"_meta":{"progressToken":3}},"jsonrpc":"2.0","id":3}"#;
    let (id, call, asker) = one_pass(t, ToolSet::all()).expect("one pass");
    assert_eq!(asker, Asker::Client);
    assert_eq!(id, "3");
    assert!(matches!(call, ToolCall::CloseTab(ref a) if a.tab_name == "t"));
    let t =
        r#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"getOpenEditors"}}"#;
    assert_eq!(
        one_pass(t, ToolSet::all()).unwrap(),
        ("\"x\"".to_owned(), ToolCall::GetOpenEditors, Asker::Unknown)
    );
    let t = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"getOpenEditors","arguments":null}}"#;
    assert_eq!(
        one_pass(t, ToolSet::all()).unwrap().1,
        ToolCall::GetOpenEditors
    );
}

/// A call whose `_meta` names a tool use is the model's; one with a `_meta` naming none is the
/// client's own; without a `_meta` object nothing is told. Both decoders read it alike, the fast
/// one where it can; what cannot be read of `_meta` refuses nothing.
#[test]
fn who_asked_is_told_by_the_calls_meta() {
    use Asker::{Client, Model, Unknown};
    let call = |meta: &str| {
        format!(
            r#"{{"method":"tools/call","params":{{"name":"getDiagnostics","arguments":{{}}{meta}}},"jsonrpc":"2.0","id":1}}"#
        )
    };
    for (meta, asker, fast) in [
        (
            r#","_meta":{"progressToken":7,"claudecode/toolUseId":"toolu_01ABC"}"#,
            Model,
            true,
        ),
        (
            r#","_meta":{"claudecode/toolUseId":"toolu_1","x":[1,{"y":2}]}"#,
            Model,
            true,
        ),
        (r#","_meta":{"progressToken":7}"#, Client, true),
        (r#","_meta":{}"#, Client, true),
        ("", Unknown, true),
        (r#","_meta":null"#, Unknown, true),
        (r#","_meta":"claudecode/toolUseId""#, Unknown, true),
        (r#","_meta":{"claudecode/toolUseId":null}"#, Client, true),
        (
            r#","_meta":{"a":{"claudecode/toolUseId":"t"}}"#,
            Client,
            true,
        ),
        // The last of a repeated member counts, in both readers.
        (
            r#","_meta":{"claudecode/toolUseId":"t","claudecode/toolUseId":1}"#,
            Client,
            true,
        ),
        (
            r#","_meta":{"claudecode/toolUseId":1,"claudecode/toolUseId":"t"}"#,
            Model,
            true,
        ),
        // What a value may hold that serde_json's values cannot (an `f64` past its range).
        (
            r#","_meta":{"claudecode/toolUseId":"t","n":1e400}"#,
            Model,
            true,
        ),
        (
            r#","_meta":{"claudecode/toolUseId":"t"},"n":1e400"#,
            Model,
            true,
        ),
        // A repeated `_meta`: the general decoder's, the last one counting.
        (
            r#","_meta":{},"_meta":{"claudecode/toolUseId":"t"}"#,
            Model,
            false,
        ),
        (
            r#","_meta":{"claudecode/toolUseId":"t"},"_meta":{}"#,
            Client,
            false,
        ),
        (r#","_meta":{"claudecode\/toolUseId":"t"}"#, Model, false),
        (
            r#","_meta":{"claudecode/toolUseId":"\ud800"}"#,
            Model,
            false,
        ),
        (r#","_meta":{"\ud800":1}"#, Unknown, false),
    ] {
        let text = call(meta);
        let general = general(&text, ToolSet::all()).expect("a call");
        assert_eq!(general.2, asker, "{text}");
        match one_pass(&text, ToolSet::all()) {
            Some(one) => assert!(fast && one == general, "{text}"),
            None => assert!(!fast, "{text}"),
        }
    }
}

/// `name` and `arguments` once each: a repeated one, or no `name`, is refused and named.
#[test]
fn a_repeated_name_or_arguments_is_refused() {
    for (params, named) in [
        (
            r#"{"name":"getOpenEditors","name":"getOpenEditors"}"#,
            "duplicate field `name`",
        ),
        (
            r#"{"name":"getOpenEditors","arguments":{},"arguments":{}}"#,
            "duplicate field `arguments`",
        ),
        (
            r#"{"name":"getOpenEditors","arguments":null,"arguments":null}"#,
            "duplicate field `arguments`",
        ),
        (r#"{"arguments":{},"_meta":{}}"#, "missing field `name`"),
    ] {
        let Err(CallRefused::Params(e)) = parse_call_params(ToolSet::all(), params) else {
            panic!("{params} was not refused");
        };
        assert!(e.message.contains(named), "{params}: {}", e.message);
    }
}

#[test]
fn whitespace_between_tokens_takes_the_fast_path_and_escapes_do_not() {
    let t = "{ \"jsonrpc\" : \"2.0\" ,\n \"id\" : \"a b\" , \"method\":\"tools/call\",\t\"params\": { \"name\":\"close_tab\", \"arguments\": {\"tab_name\":\"t\",\"x\":[1,{\"y\":null},-0.5e3]} } }";
    let (id, call, asker) = one_pass(t, ToolSet::all()).expect("fast path");
    assert_eq!(id, "\"a b\"");
    assert!(matches!(call, ToolCall::CloseTab(ref a) if a.tab_name == "t"));
    assert_eq!(Some((id, call, asker)), general(t, ToolSet::all()));
    // A key written with an escape is the general decoder's: it reads it as "id".
    let t =
        r#"{"jsonrpc":"2.0","\u0069d":7,"method":"tools/call","params":{"name":"getDiagnostics"}}"#;
    assert!(one_pass(t, ToolSet::all()).is_none());
    assert_eq!(general(t, ToolSet::all()).unwrap().0, "7");
}

#[test]
fn other_member_orders_are_read_in_one_pass_too() {
    let t = r#"{"id":1,"jsonrpc":"2.0","params":{"arguments":{"tab_name":"t"},"name":"close_tab"},"method":"tools/call"}"#;
    assert!(
        matches!(one_pass(t, ToolSet::all()).unwrap().1, ToolCall::CloseTab(ref a) if a.tab_name == "t")
    );
}

#[test]
fn anything_unusual_falls_back_to_the_general_decoder() {
    for t in [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"close_tab","arguments":["t"]}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"close_tab","arguments":{}}}"#,
        r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"getOpenEditors"}}"#,
        r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"getOpenEditors"}}"#,
        r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"getOpenEditors"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"tools/call","params":{"name":"getOpenEditors"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"getOpenEditors"}} x"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
    ] {
        assert!(one_pass(t, ToolSet::all()).is_none(), "{t}");
    }
    // A tool the host does not offer is not read in one pass either: the general decoder refuses it.
    let t = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"executeCode","arguments":{"code":"1"}}}"#;
    assert!(one_pass(t, ToolSet::all()).is_some());
    assert!(one_pass(t, ToolSet::all().without(ToolName::ExecuteCode)).is_none());
}

#[test]
fn one_unknown_tool_check_bounds_the_name() {
    let set = ToolSet::all().without(ToolName::ExecuteCode);
    assert_eq!(set.resolve("close_tab"), Ok(ToolName::CloseTab));
    let not_offered = set.resolve("executeCode").unwrap_err();
    assert_eq!(not_offered.to_string(), "unknown tool: executeCode");
    let long = "y".repeat(500);
    let e = crate::jsonrpc::RpcError::from(set.resolve(&long).unwrap_err());
    assert_eq!(e.code, crate::jsonrpc::INVALID_PARAMS);
    assert_eq!(e.message, format!("unknown tool: {}...", "y".repeat(64)));
}

/// What the general rules make of a message: the id and the call when it is a `tools/call` of an
/// offered tool that parses (what `mcp` does with a request the fast path left to it).
fn general(text: &str, offered: ToolSet) -> Option<(String, ToolCall, Asker)> {
    match crate::jsonrpc::decode(text) {
        crate::jsonrpc::Frame::Single(crate::jsonrpc::Message::Request {
            id,
            method,
            params: Some(params),
        }) if method == "tools/call" => {
            let called = parse_call_params(offered, params.get()).ok()?;
            Some((id.get().to_owned(), called.tool, called.asker))
        }
        _ => None,
    }
}

/// Pieces of JSON text, plain and unusual, that messages are built from.
fn json_piece() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    prop_oneof![
        Just("1".to_owned()),
        Just("-0".to_owned()),
        Just("007".to_owned()),
        Just("1.5".to_owned()),
        Just("2e3".to_owned()),
        Just("123456789012345678901".to_owned()),
        Just("null".to_owned()),
        Just("true".to_owned()),
        Just(r#""a b""#.to_owned()),
        Just(r#""\u0041""#.to_owned()),
        Just(r#""tab\there""#.to_owned()),
        Just("\"raw\u{1}control\"".to_owned()),
        Just("[]".to_owned()),
        Just(r#"{"progressToken":3,"claudecode/toolUseId":"toolu_1"}"#.to_owned()),
        Just(r#"[1,{"a":[null,false]},"x"]"#.to_owned()),
        Just("{".to_owned()),
        Just("[1,]".to_owned()),
        "[a-z]{0,6}".prop_map(|s| format!("\"{s}\"")),
    ]
}

/// A tool's name and an arguments object for it: each member of the right type most of the time,
/// now and then missing or holding a value of another type or an unusual number, and sometimes a
/// member the tool does not have.
fn tool_and_arguments() -> impl proptest::strategy::Strategy<Value = (String, String)> {
    use proptest::prelude::*;
    const TOOLS: &[(&str, &[(&str, &str)])] = &[
        ("getDiagnostics", &[("uri", r#""file:///a/b.rs""#)]),
        (
            "openFile",
            &[
                ("filePath", r#""/a/b.rs""#),
                ("preview", "false"),
                ("startLine", "3"),
                ("endLine", "0"),
                ("startText", r#""fn main""#),
            ],
        ),
        ("open_files", &[("file_paths", r#"["/a", "/b"]"#)]),
        ("close_tab", &[("tab_name", r#""t""#)]),
        ("executeCode", &[("code", r#""1 + 1""#)]),
        ("getOpenEditors", &[]),
    ];
    let other = prop_oneof![
        Just("-0".to_owned()),
        Just("-1".to_owned()),
        Just("18446744073709551615".to_owned()),
        Just("18446744073709551616".to_owned()),
        Just("1.0".to_owned()),
        Just("true".to_owned()),
        Just(r#""s""#.to_owned()),
        Just(r#"["a",1]"#.to_owned()),
        Just(r#"{"uri":"nested"}"#.to_owned()),
        json_piece(),
    ];
    let member = prop_oneof![
        8 => Just(Some(None)),
        1 => Just(None),
        2 => other.clone().prop_map(|v| Some(Some(v))),
    ];
    (
        0..TOOLS.len(),
        proptest::collection::vec(member, 5),
        proptest::option::weighted(0.2, other),
    )
        .prop_map(|(tool, members, extra)| {
            let (name, fields) = TOOLS[tool];
            let mut written: Vec<String> = fields
                .iter()
                .zip(members)
                .filter_map(|(&(key, plain), m)| {
                    m.map(|v| format!("\"{key}\": {}", v.as_deref().unwrap_or(plain)))
                })
                .collect();
            if let Some(v) = extra {
                written.push(format!("\"x\":{v}"));
            }
            (format!("\"{name}\""), format!("{{{}}}", written.join(",")))
        })
}

/// A `tools/call` of the real client's shape, with each part sometimes replaced by something else.
fn call_message() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let key = |k: &'static str| {
        prop_oneof![
            24 => Just(format!("\"{k}\"")),
            1 => Just(format!("\"{}\"", k.replacen(|_: char| true, "\\u0069", 1))),
            1 => Just(r#""other""#.to_owned()),
        ]
    };
    let value = |plain: &'static str| prop_oneof![16 => Just(plain.to_owned()), 1 => json_piece()];
    let ws = prop_oneof![4 => Just(""), 1 => Just(" "), 1 => Just("\n\t")];
    let name_and_args = prop_oneof![
        8 => tool_and_arguments(),
        1 => (
            prop_oneof![
                Just(r#""getDiagnostics""#),
                Just(r#""close_tab""#),
                Just(r#""nope""#),
                Just(r#""get\u0044iagnostics""#),
            ],
            prop_oneof![
                Just(r#"{"uri":"file:///a/b.rs"}"#),
                Just("{}"),
                Just("null"),
                Just(r#"{"uri":"file:///a\"b"}"#),
                Just(r#"{"tab_name":"t","x":[1]}"#),
                Just(r#"[{"uri":"a"}]"#),
            ],
        )
            .prop_map(|(n, a)| (n.to_owned(), a.to_owned())),
    ];
    let params = (
        key("name"),
        key("arguments"),
        name_and_args,
        proptest::option::of(value("{\"progressToken\":1}")),
        proptest::bool::ANY,
    )
        .prop_map(|(nk, ak, (n, a), meta, swap)| {
            let mut members = vec![format!("{nk}:{n}"), format!("{ak}:{a}")];
            if let Some(m) = meta {
                members.push(format!("\"_meta\":{m}"));
            }
            if swap {
                members.reverse();
            }
            format!("{{{}}}", members.join(","))
        });
    (
        (key("jsonrpc"), value(r#""2.0""#), key("id"), value("7")),
        (key("method"), value(r#""tools/call""#), key("params")),
        prop_oneof![12 => params.boxed(), 1 => json_piece().boxed()],
        proptest::option::of(json_piece()),
        Just(vec![0usize, 1, 2, 3, 4]).prop_shuffle(),
        0..16usize,
        proptest::collection::vec(ws, 3),
    )
        .prop_map(
            |((jk, jv, ik, iv), (mk, mv, pk), p, extra, order, drop, spaces)| {
                let mut members = [
                    format!("{jk}:{jv}"),
                    format!("{ik}:{}{iv}", spaces[0]),
                    format!("{mk}{}:{mv}", spaces[1]),
                    format!("{pk}:{p}"),
                    format!("\"extra\":{}", extra.unwrap_or_else(|| "0".to_owned())),
                ];
                // Now and then a member is missing (4: only the extra one).
                let chosen: Vec<String> = order
                    .iter()
                    .filter(|&&i| i != drop && !(i == 4 && drop > 8))
                    .map(|&i| std::mem::take(&mut members[i]))
                    .collect();
                format!("{}{{{}}}", spaces[2], chosen.join(","))
            },
        )
}

proptest::proptest! {
    /// The fast path reads only what the general rules read, and reads it the same way.
    #[test]
    fn the_fast_path_agrees_with_the_general_rules(text in call_message()) {
        if let Some(fast) = one_pass(&text, ToolSet::all()) {
            proptest::prop_assert_eq!(Some(fast), general(&text, ToolSet::all()), "{}", text);
        }
    }

    /// Bytes changed anywhere in a message the fast path reads: whatever it still reads, the
    /// general rules read the same way.
    #[test]
    fn damaged_messages_are_read_the_same_way_or_left_to_the_general_decoder(
        text in call_message(),
        edits in proptest::collection::vec(
            (proptest::prelude::any::<proptest::sample::Index>(), proptest::sample::select(&b"\"\\{}[],:0-.e \x01a"[..]), 0..3u8),
            1..4,
        ),
    ) {
        let mut bytes = text.into_bytes();
        for (at, b, how) in edits {
            let i = at.index(bytes.len() + 1);
            match how {
                0 => bytes.insert(i, b),
                1 if i < bytes.len() => { bytes.remove(i); }
                _ if i < bytes.len() => bytes[i] = b,
                _ => {}
            }
        }
        let text = String::from_utf8_lossy(&bytes);
        if let Some(fast) = one_pass(&text, ToolSet::all()) {
            proptest::prop_assert_eq!(Some(fast), general(&text, ToolSet::all()), "{}", text);
        }
    }
}

#[test]
fn the_generated_messages_take_the_fast_path_often() {
    use proptest::strategy::{Strategy, ValueTree};
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = call_message();
    let fast = (0..500)
        .filter(|_| {
            let text = strategy.new_tree(&mut runner).unwrap().current();
            one_pass(&text, ToolSet::all()).is_some()
        })
        .count();
    // Both paths are exercised: neither almost never nor almost always fast.
    assert!(
        (25..475).contains(&fast),
        "{fast} of 500 took the fast path"
    );
}

proptest::proptest! {
    /// `write_json`, written by hand, writes what serde_json writes for the same result.
    #[test]
    fn write_json_is_what_serde_writes(
        texts in proptest::collection::vec("(?s).{0,12}|[\"\\\\\u{0}-\u{1f}\u{7f}é✻a]{0,8}", 0..4),
        image in proptest::option::of(("[A-Za-z0-9+/=]{0,8}", "[a-z/\"]{0,6}")),
        is_error in proptest::bool::ANY,
    ) {
        let mut r = ToolResult::texts(texts);
        if let Some((data, mime)) = image {
            r = r.with_image(data, mime);
        }
        r.is_error = is_error;
        let mut ours = Vec::new();
        r.write_json(&mut ours);
        proptest::prop_assert_eq!(
            String::from_utf8(ours).unwrap(),
            serde_json::to_string(&r).unwrap()
        );
    }
}
