//! `serve --stdio` between several clients and an editor, all at once: the clients call the tools
//! the editor answers (`openDiff` on a few shared tab names, `executeCode`), close tabs, cancel
//! calls, drop their connection and come back; the editor decides each call after a while, twice
//! now and then, or never, and sends selections and mentions meanwhile. The test plays every
//! party and then checks that their three views agree (docs/stdio.md, docs/protocol.md "Pending
//! calls", "Notifications"):
//!
//! - each call the editor was handed ends exactly once, as the editor sees it: by its decision
//!   (no `error` line for it), by one `cancelled` line, or by a decision the bridge took too late
//!   (`it came too late`: the client had withdrawn it meanwhile, and then no `cancelled` line
//!   comes); every later decision is told `no pending call`;
//! - the client got the answer that end gives: the editor's decision as it was made (the contents
//!   it accepted, its text, its error), `DIFF_REJECTED` for a tab closed or replaced, nothing for
//!   a call it cancelled; a `cancelled` line's reason says what the client did (`cancelled`,
//!   `tab_closed`, `disconnected`, ...); no request is answered twice;
//! - the editor's selections and mentions reach each connection in order, each once; once every
//!   client is back on its last connection, each gets all those sent from then on;
//! - once the storm is over, the calls `status` lists as pending are exactly the ones not ended;
//!   at stdin's end each of them is answered with an error and told `server_stopped`, the bridge
//!   exits with status 0 and nothing panicked.
//!
//! `STDIO_CLIENTS_STORM_SEED=N` repeats a run, `STDIO_CLIENTS_STORM_STEPS=N` sets each client's
//! number of actions.

// Unix only, as the other tests that drive the built program (docs/platforms.md).
#![cfg(unix)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use common::storm::{from_env, Rng};
use common::*;
use serde_json::{json, Value};

const CLIENTS: u64 = 3;
const TABS: [&str; 3] = ["t0", "t1", "t2"];

/// A call a client made, and what came of it on its side.
#[derive(Debug, Default)]
struct Call {
    /// What makes the call unique: an `openDiff`'s proposed contents, an `executeCode`'s code.
    /// `None` for `close_tab` and `closeAllDiffTabs`, which the bridge answers itself.
    key: Option<String>,
    tool: String,
    tab: Option<String>,
    answers: Vec<Value>,
    /// The client sent `notifications/cancelled` for it before any answer.
    cancelled: bool,
    /// Its connection was dropped before any answer.
    gone: bool,
}

/// A client's side: its connection, what it asked on it, what came of all its calls.
struct Side {
    who: u64,
    c: Client,
    /// This connection's requests: JSON-RPC id -> index in `calls`, kept once answered so that
    /// a second answer is seen.
    open: BTreeMap<u64, usize>,
    calls: Vec<Call>,
    news: News,
}

impl Side {
    /// Makes a call and keeps it.
    fn call(&mut self, name: &str, args: Value, call: Call) {
        let id = self.c.call_tool(name, args);
        self.open.insert(id, self.calls.len());
        self.calls.push(Call {
            tool: name.into(),
            ..call
        });
    }

    /// Reads what came until nothing did for `quiet`: answers to their calls, the editor's news
    /// to this connection's.
    fn read(&mut self, quiet: Duration) {
        while let Some(v) = self.c.recv_json(quiet) {
            let who = self.who;
            let Some(id) = v["id"].as_u64() else {
                let method = v["method"].as_str().unwrap_or_default();
                let n = match method {
                    "selection_changed" => v["params"]["text"]
                        .as_str()
                        .and_then(|t| t.strip_prefix("sel")?.parse().ok()),
                    "at_mentioned" => v["params"]["lineStart"].as_u64(),
                    _ => continue,
                };
                let n = n.unwrap_or_else(|| panic!("client {who}: not the editor's: {v}"));
                self.news.last_mut().unwrap().push((method.to_string(), n));
                continue;
            };
            match self.open.get(&id) {
                Some(&i) => self.calls[i].answers.push(v),
                None => panic!("client {who}: an answer to no call of this connection: {v}"),
            }
        }
    }

    /// Its calls still waiting for an answer: (JSON-RPC id, index in `calls`).
    fn waiting(&self) -> Vec<(u64, usize)> {
        (self.open.iter())
            .filter(|(_, &i)| self.calls[i].answers.is_empty() && !self.calls[i].cancelled)
            .map(|(&id, &i)| (id, i))
            .collect()
    }
}

/// One client: `steps` actions, then it reads on until the bridge closes its connection.
fn client(
    seed: u64,
    who: u64,
    steps: usize,
    (port, token, file): (u16, String, String),
    done: mpsc::Sender<()>,
) -> (Vec<Call>, News) {
    let mut r = Rng(seed);
    let connect = || {
        let (status, c) = client::connect(port, Some(&token));
        assert_eq!(status, 101, "client {who}: upgrade");
        let mut c = c.unwrap();
        c.init();
        c
    };
    let mut me = Side {
        who,
        c: connect(),
        open: BTreeMap::new(),
        calls: Vec::new(),
        news: vec![Vec::new()],
    };
    let mut generation = 0;
    for k in 0..steps {
        let key = format!("c{who}g{generation}k{k}");
        let pending = me.waiting().len();
        match r.below(20) {
            0..=6 if pending < 4 => {
                let tab = r.pick(&TABS).to_string();
                let args = json!({"old_file_path": file, "new_file_path": file,
                                  "new_file_contents": key, "tab_name": tab});
                let call = Call {
                    key: Some(key),
                    tab: Some(tab),
                    ..Call::default()
                };
                me.call("openDiff", args, call);
            }
            7..=9 if pending < 4 => {
                let call = Call {
                    key: Some(key.clone()),
                    ..Call::default()
                };
                me.call("executeCode", json!({"code": key}), call);
            }
            10 | 11 => {
                let tab = r.pick(&TABS).to_string();
                let args = json!({"tab_name": tab});
                let call = Call {
                    tab: Some(tab),
                    ..Call::default()
                };
                me.call("close_tab", args, call);
            }
            12 => me.call("closeAllDiffTabs", json!({}), Call::default()),
            13 | 14 => {
                // Cancels one of its calls to the editor still waiting, if any.
                let waiting: Vec<(u64, usize)> = (me.waiting().into_iter())
                    .filter(|&(_, i)| me.calls[i].key.is_some())
                    .collect();
                if !waiting.is_empty() {
                    let (id, i) = *r.pick(&waiting);
                    // What came before the cancel is its answer: read it first.
                    me.read(Duration::from_millis(1));
                    if me.calls[i].answers.is_empty() {
                        me.calls[i].cancelled = true;
                        me.c.send_json(
                            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                    "params": {"requestId": id, "reason": "storm"}}),
                        );
                    }
                }
            }
            15 if r.chance(40) => {
                // Gone, abruptly or with a Close, and back on a new connection.
                me.read(Duration::from_millis(1));
                if r.chance(50) {
                    me.c.close(1000);
                }
                let _ = me.c.stream.shutdown(std::net::Shutdown::Both);
                for (_, i) in me.waiting() {
                    me.calls[i].gone = true;
                }
                me.c = connect();
                me.open.clear();
                me.news.push(Vec::new());
                generation += 1;
            }
            _ => {}
        }
        me.read(Duration::from_millis(1 + r.below(6) as u64));
    }
    done.send(()).unwrap();
    // Reads on until the stop closes the connection (Close 1001).
    let give_up = Instant::now() + Duration::from_secs(30);
    while Instant::now() < give_up {
        me.read(Duration::from_millis(50));
        if me.c.why().starts_with("a Close frame") || me.c.why().contains("EOF") {
            break;
        }
    }
    (me.calls, me.news)
}

/// The notifications from the editor a client got, per connection: (`selection_changed` or
/// `at_mentioned`, the editor's number in it).
type News = Vec<Vec<(String, u64)>>;

/// The editor's view of one call handed to it.
#[derive(Debug, Default)]
struct Handed {
    name: String,
    key: String,
    tab: Option<String>,
    /// The lines the editor sent to decide it.
    decisions: Vec<Value>,
    cancelled: Vec<String>,
    errors: Vec<String>,
}

/// A decision for `n`, valid for its tool: what an editor sends once the user decided.
fn decide(r: &mut Rng, n: u64, handed: &Handed) -> Option<Value> {
    if handed.name == "openDiff" {
        Some(match r.below(10) {
            0..=2 => json!({"type": "diff_decision", "id": n, "decision": "accept"}),
            3 | 4 => json!({"type": "diff_decision", "id": n, "decision": "accept",
                            "contents": format!("{}!", handed.key)}),
            5 | 6 => json!({"type": "diff_decision", "id": n, "decision": "reject"}),
            7 => {
                json!({"type": "respond", "id": n, "error": format!("cannot show {}", handed.key)})
            }
            _ => return None,
        })
    } else {
        Some(match r.below(10) {
            0..=4 => json!({"type": "respond", "id": n, "text": format!("ran {}", handed.key)}),
            5 | 6 => {
                json!({"type": "respond", "id": n, "error": format!("no kernel {}", handed.key)})
            }
            _ => return None,
        })
    }
}

/// The id an `error` line is about: `no pending call with id N`, `id N: ...`,
/// `diff_decision: id N: ...`.
fn error_id(m: &str) -> Option<u64> {
    let at = m.find("id ")? + 3;
    let digits: String = m[at..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The texts of a tool result, and whether it is a tool error.
fn tool_result(answer: &Value) -> (Vec<String>, bool) {
    let texts = (answer["result"]["content"].as_array())
        .map(|c| {
            c.iter()
                .map(|t| t["text"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default();
    (texts, answer["result"]["isError"] == json!(true))
}

/// The answer a client must have got for a call the editor decided with `d`.
fn answer_of_decision(d: &Value, handed: &Handed) -> (Vec<String>, bool) {
    match (d["type"].as_str(), d["decision"].as_str()) {
        (Some("diff_decision"), Some("accept")) => {
            let contents = d["contents"].as_str().unwrap_or(&handed.key);
            (vec!["FILE_SAVED".into(), contents.into()], false)
        }
        (Some("diff_decision"), _) => (
            vec!["DIFF_REJECTED".into(), handed.tab.clone().unwrap()],
            false,
        ),
        _ => match (d["text"].as_str(), d["error"].as_str()) {
            (Some(t), _) => (vec![t.into()], false),
            (_, Some(e)) => (vec![e.into()], true),
            _ => unreachable!(),
        },
    }
}

/// The storm on `runtime`, the diffs proposed for `name` in the workspace, the bridge started
/// with `args` besides `--stdio`.
fn storm(runtime: &str, name: &str, args: &[&str]) {
    let seed = from_env("STDIO_CLIENTS_STORM_SEED", 0xC11E);
    let steps = from_env("STDIO_CLIENTS_STORM_STEPS", 150) as usize;
    let sb = Sandbox::new();
    let file = sb.ws.join(name);
    std::fs::write(&file, "old = 1\n").unwrap();
    let file = file.to_string_lossy().to_string();
    let mut all = vec!["--stdio", "--runtime", runtime];
    all.extend(args);
    let mut s = Served::start(&sb, &all);
    let (port, token) = (s.port, s.token());
    let (done_tx, done_rx) = mpsc::channel();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|who| {
            let to = (port, token.clone(), file.clone());
            let (done, seed) = (done_tx.clone(), seed.wrapping_add(who));
            thread::spawn(move || client(seed, who, steps, to, done))
        })
        .collect();
    // The editor: reads the bridge's lines as they come, decides each call after a while.
    let mut r = Rng(seed ^ 0xED17);
    let mut handed: BTreeMap<u64, Handed> = BTreeMap::new();
    let mut due: Vec<(Instant, u64, Value)> = Vec::new();
    let mut read = 0;
    let mut finished = 0;
    let mut quiet_since: Option<Instant> = None;
    let mut last_sent: Option<Instant> = None;
    // The editor's news, numbered: the selections and mentions sent, and the first of those sent
    // once every client is through (each client's last connection must get them all).
    let (mut sent, mut last_from) = (
        BTreeMap::from([("selection_changed", 0u64), ("at_mentioned", 0)]),
        None,
    );
    let news_line = |kind: &str, n: u64| match kind {
        "selection_changed" => json!({"type": kind, "filePath": file, "text": format!("sel{n}"),
            "selection": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 3}}}),
        _ => json!({"type": kind, "filePath": file, "lineStart": n, "lineEnd": n}),
    };
    let give_up = Instant::now() + Duration::from_secs(120);
    let stdout = s.stdout.clone();
    // Takes the bridge's new lines into `handed`, up to and with the first `status` line, which
    // it returns: what the lines after it say happened after it.
    let take_lines = |handed: &mut BTreeMap<u64, Handed>, read: &mut usize| -> Option<Value> {
        let lines: Vec<String> = stdout.all()[*read..].to_vec();
        for l in lines {
            *read += 1;
            let v: Value = serde_json::from_str(&l).unwrap_or_else(|_| panic!("not JSON: {l}"));
            match v["type"].as_str().unwrap() {
                "tool_call" => {
                    let n = v["id"].as_u64().unwrap();
                    let name = v["name"].as_str().unwrap().to_string();
                    let args = &v["arguments"];
                    let key = if name == "openDiff" {
                        &args["new_file_contents"]
                    } else {
                        &args["code"]
                    };
                    let h = Handed {
                        name,
                        key: key.as_str().unwrap().to_string(),
                        tab: args["tab_name"].as_str().map(str::to_string),
                        ..Handed::default()
                    };
                    assert!(handed.insert(n, h).is_none(), "id {n} handed twice");
                }
                "cancelled" => {
                    let n = v["id"].as_u64().unwrap();
                    let h = handed
                        .get_mut(&n)
                        .unwrap_or_else(|| panic!("cancelled a call never handed: {v}"));
                    h.cancelled.push(v["reason"].as_str().unwrap().to_string());
                }
                "error" => {
                    let m = v["message"].as_str().unwrap().to_string();
                    let n =
                        error_id(&m).unwrap_or_else(|| panic!("an error line about no call: {m}"));
                    handed
                        .get_mut(&n)
                        .unwrap_or_else(|| panic!("{m}"))
                        .errors
                        .push(m);
                }
                "status" => return Some(v),
                _ => {}
            }
        }
        None
    };
    // A `status` line asked for, and the lines before it taken.
    let ask_status = |s: &mut Served, handed: &mut BTreeMap<u64, Handed>, read: &mut usize| {
        s.send_line(r#"{"type":"status"}"#);
        loop {
            if let Some(v) = take_lines(handed, read) {
                return v;
            }
            assert!(Instant::now() < give_up, "no status line");
            thread::sleep(Duration::from_millis(1));
        }
    };
    loop {
        let before = handed.len();
        take_lines(&mut handed, &mut read);
        for (&n, h) in handed.iter().skip(before) {
            // Decided after a while, or never; now and then a second time.
            for _ in 0..1 + usize::from(r.chance(10)) {
                if let Some(d) = decide(&mut r, n, h) {
                    let after = Duration::from_millis((r.below(4) * r.below(40)) as u64);
                    due.push((Instant::now() + after, n, d));
                }
            }
        }
        let now = Instant::now();
        let (ready, later): (Vec<_>, Vec<_>) = due.drain(..).partition(|(at, _, _)| *at <= now);
        due = later;
        for (_, n, d) in ready {
            let stdin = s.stdin.as_mut().unwrap();
            writeln!(stdin, "{d}").unwrap();
            stdin.flush().unwrap();
            handed.get_mut(&n).unwrap().decisions.push(d);
        }
        if finished < CLIENTS && r.chance(3) {
            let kind = *r.pick(&["selection_changed", "at_mentioned"]);
            let n = sent.get_mut(kind).unwrap();
            *n += 1;
            s.send_line(&news_line(kind, *n).to_string());
        }
        while done_rx.try_recv().is_ok() {
            finished += 1;
        }
        if finished == CLIENTS && last_from.is_none() {
            // Every client on its last connection, initialized (per `status`): each must get
            // all the news from now on, in order.
            let all_in = |v: &Value| {
                let c = v["clients"].as_array().unwrap();
                c.len() == CLIENTS as usize && c.iter().all(|c| c["initialized"] == true)
            };
            loop {
                let status = ask_status(&mut s, &mut handed, &mut read);
                if all_in(&status) {
                    break;
                }
                assert!(Instant::now() < give_up, "clients not back: {status}");
                thread::sleep(Duration::from_millis(10));
            }
            last_from = Some(sent.clone());
            last_sent = Some(Instant::now());
            for _ in 0..5 {
                for (kind, n) in sent.iter_mut() {
                    *n += 1;
                    s.send_line(&news_line(kind, *n).to_string());
                }
            }
        }
        // Once every client is through and every decision sent: quiet for a while, then the end;
        // not before the mentions held for a client that connected last (3 s after its
        // `notifications/initialized` at most, as it never lists: docs/protocol.md) are written.
        if finished == CLIENTS && due.is_empty() {
            let since = *quiet_since.get_or_insert(now);
            let held = last_sent.is_some_and(|t| now - t < Duration::from_millis(3500));
            if now - since > Duration::from_millis(300) && !held {
                break;
            }
        }
        assert!(
            now < give_up,
            "seed {seed}: the storm did not end; stderr:\n{}",
            s.stderr.text()
        );
        thread::sleep(Duration::from_millis(1));
    }
    // What `status` lists as pending is what did not end, per the lines before it.
    let status = ask_status(&mut s, &mut handed, &mut read);
    let listed: BTreeSet<u64> = (status["pending"].as_array().unwrap().iter())
        .map(|p| p["id"].as_u64().unwrap())
        .collect();
    let open: BTreeSet<u64> = (handed.iter())
        .filter(|(_, h)| h.cancelled.is_empty() && h.errors.is_empty() && h.decisions.is_empty())
        .map(|(&n, _)| n)
        .collect();
    assert_eq!(
        listed, open,
        "{runtime}, seed {seed}: pending per status, and per the lines"
    );
    // stdin's end: the calls still pending are told `server_stopped`, their clients get errors.
    drop(s.stdin.take());
    let stderr = s.stderr.clone();
    let exit = exit_within(&mut s.child, Duration::from_secs(20), &|| stderr.text());
    assert_eq!(exit.code(), Some(0), "stderr:\n{}", s.stderr.text());
    let (calls, news): (Vec<Vec<Call>>, Vec<News>) =
        clients.into_iter().map(|c| c.join().unwrap()).unzip();
    let calls: Vec<Call> = calls.into_iter().flatten().collect();
    check_news(
        &format!("{runtime}, seed {seed}"),
        &news,
        &last_from.unwrap(),
        &sent,
    );
    // The lines written at the stop (the collecting thread reads to the end of stdout).
    thread::sleep(Duration::from_millis(100));
    while take_lines(&mut handed, &mut read).is_some() {}
    check(runtime, seed, &handed, &calls);
    assert!(!s.stderr.text().contains("panicked"), "{}", s.stderr.text());
}

/// Each connection got the editor's news in order, each once; each client's last connection
/// all of those sent after `from` (up to `to`, both per kind).
fn check_news(ctx: &str, news: &[News], from: &BTreeMap<&str, u64>, to: &BTreeMap<&str, u64>) {
    let got: usize = news.iter().flatten().map(Vec::len).sum();
    eprintln!("{ctx}: {got} notifications of the editor's {to:?} taken by the clients");
    for (who, connections) in news.iter().enumerate() {
        for (g, got) in connections.iter().enumerate() {
            for kind in from.keys() {
                let ns: Vec<u64> = (got.iter())
                    .filter(|(k, _)| k == kind)
                    .map(|&(_, n)| n)
                    .collect();
                assert!(
                    ns.windows(2).all(|w| w[0] < w[1]),
                    "{ctx}: client {who}, connection {g}: {kind} out of order or twice: {ns:?}"
                );
                if g + 1 == connections.len() {
                    let last: Vec<u64> = ns.into_iter().filter(|&n| n > from[kind]).collect();
                    let want: Vec<u64> = (from[kind] + 1..=to[kind]).collect();
                    assert_eq!(last, want, "{ctx}: client {who}: the last {kind}s");
                }
            }
        }
    }
}

/// The three views agree: see the file's documentation.
fn check(runtime: &str, seed: u64, handed: &BTreeMap<u64, Handed>, calls: &[Call]) {
    let ctx = |what: &str| format!("{runtime}, seed {seed}: {what}");
    let by_key: BTreeMap<&str, &Call> = (calls.iter())
        .filter_map(|c| Some((c.key.as_deref()?, c)))
        .collect();
    let mut tally: BTreeMap<String, usize> = BTreeMap::new();
    for (n, h) in handed {
        let what = ctx(&format!("id {n} {h:?}"));
        let call = by_key
            .get(h.key.as_str())
            .unwrap_or_else(|| panic!("{what}: no client made it"));
        assert!(
            call.answers.len() <= 1,
            "{what}: answered {} times: {call:?}",
            call.answers.len()
        );
        assert_eq!(h.tab, call.tab, "{what}: the tab the client named");
        assert!(h.cancelled.len() <= 1, "{what}: cancelled twice");
        // Each decision gets at most one error line; after the first error, every decision has
        // one (nothing is pending any more).
        assert!(
            h.errors.len() <= h.decisions.len(),
            "{what}: errors without decisions"
        );
        let late = h
            .errors
            .iter()
            .filter(|m| !m.contains("no pending call"))
            .count();
        assert!(late <= 1, "{what}: decided late twice");
        let effective = h.decisions.len() - h.errors.len();
        assert!(effective <= 1, "{what}: two decisions taken");
        let ends = effective + h.cancelled.len() + late;
        assert_eq!(
            ends, 1,
            "{what}: ended {ends} times (decision, cancelled, too late)"
        );
        if effective == 1 {
            // The first decision is the one taken: the later ones were told nothing is pending.
            assert!(
                h.errors.iter().all(|m| m.contains("no pending call")),
                "{what}"
            );
        }
        let answer = call.answers.first();
        let key = if effective == 1 {
            let want = answer_of_decision(&h.decisions[0], h);
            match answer {
                Some(a) => assert_eq!(tool_result(a), want, "{what}: {a}"),
                // Its connection dropped just after the editor decided.
                None => assert!(call.gone, "{what}: decided but never answered"),
            }
            format!("decided {}", h.decisions[0]["type"].as_str().unwrap())
        } else if let Some(reason) = h.cancelled.first() {
            match reason.as_str() {
                "tab_closed" | "all_diff_tabs_closed" | "replaced" => {
                    assert_eq!(h.name, "openDiff", "{what}");
                    if let Some(a) = answer {
                        let want = (vec!["DIFF_REJECTED".into(), h.tab.clone().unwrap()], false);
                        assert_eq!(tool_result(a), want, "{what}: {a}");
                    } else {
                        assert!(call.gone, "{what}: a closed tab's diff never answered");
                    }
                }
                "cancelled" => {
                    assert!(call.cancelled && answer.is_none(), "{what}: {call:?}");
                }
                "disconnected" => assert!(call.gone && answer.is_none(), "{what}: {call:?}"),
                "server_stopped" => {
                    let a = answer.unwrap_or_else(|| panic!("{what}: not answered at the stop"));
                    let is_error = a["error"].is_object() || tool_result(a).1;
                    assert!(is_error, "{what}: {a}");
                }
                other => panic!("{what}: a reason not in docs/stdio.md: {other}"),
            }
            format!("cancelled {reason}")
        } else if let Some((_, told)) = h
            .errors
            .iter()
            .find_map(|m| m.split_once("not accepted; claude was told: "))
        {
            // An accept the bridge's check refused: claude was told why, as a tool error.
            match answer {
                Some(a) => {
                    let (texts, error) = tool_result(a);
                    assert!(error && texts.concat() == told, "{what}: {a}");
                }
                None => assert!(call.gone, "{what}: refused but never answered"),
            }
            "not accepted".to_string()
        } else {
            // Decided too late: withdrawn meanwhile (by the client, a closed tab, its
            // connection's end), with no `cancelled` line.
            match answer {
                None => assert!(
                    call.cancelled || call.gone,
                    "{what}: withdrawn how? {call:?}"
                ),
                Some(a) => {
                    let want = (
                        vec!["DIFF_REJECTED".into(), h.tab.clone().unwrap_or_default()],
                        false,
                    );
                    assert_eq!(tool_result(a), want, "{what}: {a}");
                }
            }
            "too late".to_string()
        };
        *tally.entry(key).or_default() += 1;
    }
    // Every call of a connection that lasted was answered once, the ones the editor never saw too
    // (a tab closed, all tabs closed).
    for call in calls {
        let what = ctx(&format!("{call:?}"));
        if !call.gone && !call.cancelled {
            assert_eq!(call.answers.len(), 1, "{what}");
        }
        match call.tool.as_str() {
            "close_tab" => {
                if let Some(a) = call.answers.first() {
                    assert_eq!(tool_result(a), (vec!["TAB_CLOSED".into()], false), "{what}");
                }
            }
            "closeAllDiffTabs" => {
                if let Some(a) = call.answers.first() {
                    let (texts, error) = tool_result(a);
                    assert!(
                        !error && texts.len() == 1 && texts[0].starts_with("CLOSED_"),
                        "{what}"
                    );
                }
            }
            _ => {}
        }
        *tally.entry(format!("{} calls", call.tool)).or_default() += 1;
    }
    eprintln!("{runtime}, seed {seed}: {} handed; {tally:?}", handed.len());
}

#[test]
fn clients_and_the_editor_agree_on_every_calls_end_on_threads() {
    storm("threads", "a.rs", &["--no-lsp"]);
}

#[test]
fn clients_and_the_editor_agree_on_every_calls_end_on_smol() {
    storm("smol", "a.rs", &["--no-lsp"]);
}

/// With a language server for the file, each accept waits on a job of its own until the server
/// has checked the text (docs/stdio.md, `diff_decision`): the calls are withdrawn meanwhile far
/// more often. ruff: the server of the table that starts fastest.
#[test]
fn clients_and_the_editor_agree_while_accepts_wait_for_a_language_server() {
    require("ruff", "pip install ruff");
    storm("threads", "b.py", &["--lsp", "python=ruff server"]);
}
