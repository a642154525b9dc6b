//! What the storm tests share: a seeded generator, odd JSON values and paths, and changes to a
//! message's members (`stdio_storm.rs`: the editor's lines; `tool_storm.rs`: claude's calls).

use serde_json::{json, Value};

use super::Sandbox;

/// splitmix64: a small generator whose whole state is its seed, so a run is repeated by its seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    pub fn pick<'a, T>(&mut self, of: &'a [T]) -> &'a T {
        &of[self.below(of.len())]
    }
}

/// How the peer under test names files: inside the workspace, and odd (outside it, relative,
/// climbing, other schemes, ...).
pub struct Names {
    /// Paths of files inside the workspace, as the editor names them.
    pub files: Vec<String>,
    /// Paths the bridge must refuse or map elsewhere, and other odd strings.
    pub odd: Vec<String>,
}

pub fn uri_of(path: &str) -> String {
    if path.starts_with('/') {
        format!("file://{path}")
    } else {
        format!("file:///{}", path.replace('\\', "/"))
    }
}

/// A value of any JSON kind, most of them edge cases of the kind.
pub fn odd_value(r: &mut Rng, names: &Names) -> Value {
    match r.below(12) {
        0 => Value::Null,
        1 => json!(r.chance(50)),
        2 => json!(*r.pick(&[
            -1i64,
            0,
            1,
            i32::MAX as i64,
            u32::MAX as i64 + 1,
            i64::MIN,
            9_007_199_254_740_993
        ])),
        3 => json!(*r.pick(&[u64::MAX, 1u64 << 53])),
        4 => json!(*r.pick(&[1.5f64, -0.0, 1e308, -1e-300])),
        5 => json!(r.pick(&names.odd).clone()),
        6 => json!(r.pick(&names.files).clone()),
        7 => json!(uri_of(&r.pick(&names.files).clone())),
        8 => json!([]),
        9 => json!({}),
        10 => {
            let n = *r.pick(&[0usize, 1, 3, 200, 5000]);
            json!((0..n).map(|i| json!(i)).collect::<Vec<_>>())
        }
        _ => json!(*r.pick(&["", "\u{0}", "é🎉\u{feff}", "Error", "accept", "\n", "\\"])),
    }
}

/// Replaces, removes or adds a member of the object `v` (a line, a call's arguments), or of a
/// value in it; its `type` seldom (a line of no known type is the garbage's part).
pub fn mutate_line(r: &mut Rng, v: &mut Value, names: &Names) {
    let m = v.as_object_mut().unwrap();
    let keys: Vec<String> = (m.keys())
        .filter(|k| *k != "type" || r.chance(10))
        .cloned()
        .collect();
    let Some(key) = keys.get(r.below(keys.len().max(1))).cloned() else {
        m.insert("extra".into(), odd_value(r, names));
        return;
    };
    match r.below(5) {
        0 => {
            m.remove(&key);
        }
        1 => {
            m.insert(format!("{key}X"), odd_value(r, names));
        }
        _ => mutate(r, m.get_mut(&key).unwrap(), names),
    }
}

/// Replaces, removes or adds a member somewhere in `v` (a random walk down from the top).
pub fn mutate(r: &mut Rng, v: &mut Value, names: &Names) {
    match v {
        Value::Object(m) if !m.is_empty() && r.chance(60) => {
            let key = m.keys().nth(r.below(m.len())).unwrap().clone();
            let inner = m.get_mut(&key).unwrap();
            if matches!(inner, Value::Object(_) | Value::Array(_)) && r.chance(60) {
                return mutate(r, inner, names);
            }
            match r.below(4) {
                0 => {
                    m.remove(&key);
                }
                1 => {
                    m.insert(format!("{key}X"), odd_value(r, names));
                }
                _ => {
                    m.insert(key, odd_value(r, names));
                }
            }
        }
        Value::Array(a) if !a.is_empty() => {
            let i = r.below(a.len());
            if r.chance(50) {
                a[i] = odd_value(r, names);
            } else {
                mutate(r, &mut a[i], names);
            }
        }
        _ => *v = odd_value(r, names),
    }
}

/// A number from the environment (a run's seed, to repeat it; its length), else `default`.
pub fn from_env(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// Odd strings for any member: paths outside the workspace, relative, climbing, device paths,
/// URIs of other schemes, a NUL, a long one.
pub fn odd_strings(sb: &Sandbox) -> Vec<String> {
    let ws = sb.ws.to_string_lossy().to_string();
    vec![
        String::new(),
        "a.rs".into(),
        "/".into(),
        "/etc/passwd".into(),
        format!("{ws}/../outside.rs"),
        format!("{ws}/no/such/file.rs"),
        format!("{ws}/a.rs\u{0}.txt"),
        "file:///etc/passwd".into(),
        "file://host/share/x".into(),
        "untitled:Untitled-1".into(),
        "http://example.com/a.rs".into(),
        r"C:\Users\me\app\a.rs".into(),
        r"\\?\C:\x".into(),
        r"\\wsl.localhost\Debian\home".into(),
        "%2e%2e/%2e%2e/etc".into(),
        "x".repeat(5000),
    ]
}
