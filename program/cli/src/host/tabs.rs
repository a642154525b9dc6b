//! The editor's open tabs, as the stdio editor last reported them (`open_editors`, see
//! docs/stdio.md): the members the bridge reads are typed, every other member is kept as given
//! and passed through to `getOpenEditors`.

use claude_ide_bridge::file_uri;

use crate::pathmap::PathMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One open tab.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tab {
    /// The document's URI (`file://...` for files on disk).
    pub uri: String,
    /// Whether this is the focused tab.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_active: Option<bool>,
    /// Whether the buffer has unsaved changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_dirty: Option<bool>,
    /// The tab's title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The editor's language id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language_id: Option<String>,
    /// The buffer's number of lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_count: Option<u64>,
    /// Any other member the editor sent, passed through unchanged.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

impl Tab {
    /// The local path of the tab's document, when its URI is a `file://` URI (on Windows the
    /// Windows path it names).
    pub fn path(&self) -> Option<String> {
        crate::sys::path_of_file_uri(&self.uri)
    }
}

/// The most tabs an `open_editors` line may list; a longer list is refused.
pub const MAX_TABS: usize = 1_000;

/// The most bytes one tab's passthrough members may take, as JSON; a tab with more is refused.
pub const MAX_TAB_EXTRA_BYTES: usize = 16 * 1024;

/// The `tabs` of an `open_editors` line as read: how many, and the first [`MAX_TABS`] of them as
/// their text (the rest counted, never kept).
#[derive(Debug)]
pub struct Listed<'a> {
    count: usize,
    kept: Vec<&'a serde_json::value::RawValue>,
}

/// The tabs kept, as they were given (for tests writing an `open_editors` line).
impl Serialize for Listed<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(&self.kept)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Listed<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Listed<'a>, D::Error> {
        struct Items<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> serde::de::Visitor<'de> for Items<'a> {
            type Value = Listed<'a>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an array of tabs")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Listed<'a>, A::Error> {
                let mut listed = Listed {
                    count: 0,
                    kept: Vec::new(),
                };
                while listed.kept.len() < MAX_TABS {
                    match seq.next_element::<&'de serde_json::value::RawValue>()? {
                        Some(raw) => listed.kept.push(raw),
                        None => {
                            listed.count = listed.kept.len();
                            return Ok(listed);
                        }
                    }
                }
                listed.count = listed.kept.len();
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
                    listed.count += 1;
                }
                Ok(listed)
            }
        }
        d.deserialize_seq(Items(std::marker::PhantomData))
    }
}

/// The open tabs, in the editor's order.
#[derive(Debug, Default)]
pub struct Tabs(Vec<Tab>);

impl Tabs {
    /// Replaces the tabs with the `tabs` member of an `open_editors` line; on a malformed list the
    /// previous tabs are kept and the reason is returned. With `paths` (`--path-map`), each
    /// `file://` URI is named as the bridge names it, and a tab the bridge has no name for is left
    /// out: what is returned says why, for each one.
    pub fn replace_from(
        &mut self,
        tabs: Option<Listed<'_>>,
        paths: Option<&PathMap>,
    ) -> Result<Vec<String>, String> {
        let tabs = tabs.ok_or("missing \"tabs\"")?;
        if tabs.count > MAX_TABS {
            return Err(format!(
                "{} tabs, more than the limit of {MAX_TABS}",
                tabs.count
            ));
        }
        let mut parsed = Vec::with_capacity(tabs.kept.len());
        for (i, raw) in tabs.kept.iter().enumerate() {
            // Refused before it is built: its members would take many times their text.
            if raw.get().len() > MAX_TAB_EXTRA_BYTES + 64 * 1024 {
                return Err(format!(
                    "tab {i}: {} bytes, more than a tab may take",
                    raw.get().len()
                ));
            }
            parsed.push(serde_json::from_str::<Tab>(raw.get()).map_err(|e| {
                format!("\"tabs\" must be an array of objects with a \"uri\" string: {e}")
            })?);
        }
        for (i, tab) in parsed.iter().enumerate() {
            let size = serde_json::to_vec(&tab.other).map_or(usize::MAX, |v| v.len());
            if size > MAX_TAB_EXTRA_BYTES {
                return Err(format!(
                    "tab {i} ({}): its other members take {size} bytes, more than the limit of \
                     {MAX_TAB_EXTRA_BYTES}",
                    tab.uri
                ));
            }
        }
        let mut left_out = Vec::new();
        if let Some(paths) = paths {
            parsed.retain_mut(|tab| {
                // A `file:` URI, or a path in the URI's place (which the bridge takes as one), is
                // a file, also one this OS cannot read (a drive on Unix, bytes that are not
                // UTF-8): named by the map, or left out, never passed on in the editor's own
                // form. Anything else (`untitled:`...) is kept, but a `fileName` that is a path
                // of the editor's is named as the bridge names it, or dropped.
                let uri = claude_ide_bridge::is_file_uri(&tab.uri);
                if !uri && !crate::pathmap::is_absolute(&tab.uri) {
                    if let Some(Value::String(name)) = tab.other.get("fileName") {
                        if crate::pathmap::is_absolute(name) {
                            match paths.to_here(name) {
                                Ok(here) => _ = tab.other.insert("fileName".into(), here.into()),
                                Err(_) => _ = tab.other.remove("fileName"),
                            }
                        }
                    }
                    return true;
                }
                match paths.to_here(&tab.uri) {
                    Ok(here) => {
                        tab.uri = if uri { file_uri(&here) } else { here.clone() };
                        // The same file by its path (VS Code's member, the Vim plugin's too).
                        if let Some(name @ Value::String(_)) = tab.other.get_mut("fileName") {
                            *name = Value::String(here);
                        }
                        true
                    }
                    Err(e) => {
                        left_out.push(e.to_string());
                        false
                    }
                }
            });
        }
        self.0 = parsed;
        Ok(left_out)
    }

    /// All tabs, for `getOpenEditors`.
    pub fn all(&self) -> &[Tab] {
        &self.0
    }

    /// The local paths of the tabs that show files on disk.
    pub fn paths(&self) -> Vec<String> {
        self.0.iter().filter_map(Tab::path).collect()
    }

    /// The tab showing `path` (any spelling of it: `/w/./a.rs`; on Windows `C:\w\a.rs` for
    /// VS Code's `file:///c%3A/w/a.rs`), if any.
    pub fn of_path(&self, path: &str) -> Option<&Tab> {
        self.0
            .iter()
            .find(|t| super::diagnostics::same_uri(&t.uri, path))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `tabs` as an `open_editors` line gives it.
    fn set(tabs: &mut Tabs, given: &Value) -> Result<(), String> {
        let text = given.to_string();
        let listed: Listed = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        tabs.replace_from(Some(listed), None).map(|_| ())
    }

    #[test]
    fn typed_members_are_read_and_unknown_members_pass_through() {
        let mut tabs = Tabs::default();
        let given = json!([{"uri": "file:///ws/a.rs", "isDirty": true, "label": "a.rs",
            "lineCount": 3, "viewColumn": 2, "group": {"id": 1}}]);
        set(&mut tabs, &given).unwrap();
        let tab = tabs.of_path("/ws/a.rs").expect("the tab of /ws/a.rs");
        assert_eq!(tab.is_dirty, Some(true));
        assert_eq!(tab.line_count, Some(3));
        assert_eq!(tabs.paths(), vec!["/ws/a.rs".to_string()]);
        // What the editor sent comes back whole, and nothing is added.
        assert_eq!(serde_json::to_value(tabs.all()).unwrap(), given);
    }

    /// A tab is found by any spelling of its file's path, and listed as a path of this OS: on
    /// Windows, VS Code's `file:///c%3A/...` is claude's `C:\...` (`checkDocumentDirty` said
    /// "not open" for every tab there, and the paths listed were `/c:/...`).
    #[test]
    fn spellings_of_a_tab_name_one_file() {
        let mut tabs = Tabs::default();
        #[cfg(unix)]
        let (uri, path, spelling) = ("file:///ws/a%20b.rs", "/ws/a b.rs", "/ws/./x/../a b.rs");
        #[cfg(windows)]
        let (uri, path, spelling) = ("file:///c%3A/ws/A.rs", r"C:\ws\A.rs", r"c:\WS\x\..\a.rs");
        set(&mut tabs, &json!([{"uri": uri, "isDirty": true}])).unwrap();
        assert_eq!(tabs.paths(), [path]);
        for p in [path, spelling] {
            assert_eq!(tabs.of_path(p).and_then(|t| t.is_dirty), Some(true), "{p}");
        }
        assert!(tabs.of_path(&path.replace(".rs", ".py")).is_none());
    }

    #[test]
    fn a_malformed_list_is_refused_and_the_previous_tabs_kept() {
        let mut tabs = Tabs::default();
        set(&mut tabs, &json!([{"uri": "file:///ws/a.rs"}])).unwrap();
        for bad in [
            json!("nope"),
            json!([{"label": "no uri"}]),
            json!([{"uri": 7}]),
            json!([{"uri": "file:///ws/b.rs", "isDirty": "yes"}]),
        ] {
            assert!(set(&mut tabs, &bad).is_err(), "{bad}");
        }
        assert!(tabs.replace_from(None, None).is_err());
        assert_eq!(tabs.paths(), vec!["/ws/a.rs".to_string()]);
        // A tab that is not a file on disk is listed but has no path.
        set(&mut tabs, &json!([{"uri": "untitled:Untitled-1"}])).unwrap();
        assert_eq!(tabs.all().len(), 1);
        assert!(tabs.paths().is_empty());
    }

    #[test]
    fn too_many_tabs_or_too_large_a_tab_is_refused_naming_the_limit() {
        let mut tabs = Tabs::default();
        let most: Vec<Value> = (0..MAX_TABS)
            .map(|i| json!({"uri": format!("file:///ws/{i}.rs")}))
            .collect();
        set(&mut tabs, &json!(most)).unwrap();
        assert_eq!(tabs.all().len(), MAX_TABS);
        let mut more = most.clone();
        more.push(json!({"uri": "file:///ws/one-more.rs"}));
        let e = set(&mut tabs, &json!(more)).unwrap_err();
        assert!(e.contains(&MAX_TABS.to_string()), "{e}");
        assert_eq!(tabs.all().len(), MAX_TABS, "the previous tabs are kept");

        // Passthrough members up to the limit are kept, past it the line is refused.
        let fits = "x".repeat(MAX_TAB_EXTRA_BYTES - r#"{"note":""}"#.len());
        let ok = json!([{"uri": "file:///ws/a.rs", "note": fits}]);
        set(&mut tabs, &ok).unwrap();
        let big = json!([{"uri": "file:///ws/b.rs", "note": format!("{fits}x")}]);
        let e = set(&mut tabs, &big).unwrap_err();
        assert!(e.contains(&MAX_TAB_EXTRA_BYTES.to_string()), "{e}");
        assert_eq!(tabs.paths(), vec!["/ws/a.rs".to_string()]);
    }
}
