//! Loopback benchmark: notifications per second pushed to one client, and `tools/call` round trips
//! per second, one at a time (with their median and p99 latency) and pipelined (several calls in
//! flight, as when the client runs tools in parallel), for the smol runtime, the threads runtime and
//! a reference server on Node `ws`, in one run, with the ratios against Node. For the round trips it
//! also reports the CPU time the server's threads used per call (Linux, from `/proc`): what a
//! server costs, which the round trip's wake-ups between CPUs do not hide.
//!
//! ```text
//! (cd benches/loopback/node && npm install)      # once; without it the Node figures are skipped
//! cargo build --release -p claude-ide-bridge-cli   # for serve-threads and serve-smol
//! cargo run --release -p claude-ide-bridge-bench-loopback -- [--runtime smol|smol-global|smol-handler|threads|threads-channel|node|bare-ws|bare-ws-wide|bare-ws-narrow|bare-ws-smol|engine-alone|serve-threads|serve-smol|tcp-echo]...
//!     [--notifications N] [--calls N] [--pipelined N] [--in-flight K] [--cpu C] [--rounds R] [--syscall-costs]
//! ```
//!
//! `--rounds R` runs the whole list R times in turn and ends with, for each server, the median
//! over the rounds of its ratio to the bare WebSocket server of the same round (and, for the smol
//! setups, to `bare-ws-smol` when it is in the list): on a shared machine one run's ratios move
//! by several hundredths between runs of the same build.
//!
//! `--syscall-costs` prints instead what each system call of a wait on smol's reactor costs here.
//!
//! `--cpu C` pins everything (client, servers, the Node child) to CPU `C` (Linux): on a virtual
//! machine, waking a thread on another, idle vCPU can cost tens of µs, which would otherwise be
//! most of every round trip for every server.
//!
//! Where things are: the servers under test in `servers.rs`, the floors they are measured against
//! (TCP echo, `bare-ws` and its variants, and the engine with no runtime) in `floors.rs`, the load client in `client.rs`, pinning
//! and `--syscall-costs` in `system.rs`; the run, the figures and their summaries here.
//!
//! Everything stays on 127.0.0.1 and every loop is bounded by the counts given (and a 60 s
//! timeout per figure). The load client is the same for all servers: a blocking client on
//! the core's frame codec.

mod client;
mod floors;
mod servers;
mod system;

use std::io;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use client::Client;
use floors::{start_bare_ws, start_bare_ws_smol, start_echo, start_engine_alone, Extra};
use servers::{start_node, start_serve, start_smol, start_smol_handler, start_threads, Server};
use system::{pin_to, print_syscall_costs};

pub(crate) const TOKEN: &str = "loopback-bench-token";
pub(crate) const TIMEOUT: Duration = Duration::from_secs(60);

fn main() {
    let mut runtimes = Vec::new();
    let mut notifications = 200_000usize;
    let mut calls = 20_000usize;
    let mut pipelined = 100_000usize;
    // Enough calls in flight that the servers, not the wake-ups between them and the client, set
    // the pace: with 16 even the tcp-echo floor is only about 2x Node on these VMs.
    let mut in_flight = 256usize;
    let mut cpu = None;
    let mut rounds = 1usize;
    let mut syscall_costs = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| usage(&a));
        match a.as_str() {
            "--runtime" => runtimes.push(value()),
            "--notifications" => notifications = value().parse().unwrap_or_else(|_| usage(&a)),
            "--calls" => calls = value().parse().unwrap_or_else(|_| usage(&a)),
            "--pipelined" => pipelined = value().parse().unwrap_or_else(|_| usage(&a)),
            "--in-flight" => in_flight = positive(&value()).unwrap_or_else(|| usage(&a)),
            "--cpu" => cpu = Some(value().parse::<usize>().unwrap_or_else(|_| usage(&a))),
            "--rounds" => rounds = positive(&value()).unwrap_or_else(|| usage(&a)),
            "--syscall-costs" => syscall_costs = true,
            "--bench" => {} // passed by `cargo bench`
            _ => usage(&a),
        }
    }
    if runtimes.is_empty() {
        runtimes = vec![
            "smol".into(),
            "smol-global".into(),
            "smol-handler".into(),
            "threads".into(),
            "threads-channel".into(),
            "node".into(),
            "bare-ws".into(),
            "bare-ws-smol".into(),
            "serve-threads".into(),
            "serve-smol".into(),
            "tcp-echo".into(),
        ];
    }
    if let Some(cpu) = cpu {
        // Before any thread or child exists: they inherit it.
        if let Err(e) = pin_to(cpu) {
            eprintln!("--cpu {cpu}: {e}");
            std::process::exit(2);
        }
        println!("loopback: pinned to CPU {cpu}");
    }
    if syscall_costs {
        print_syscall_costs();
        return;
    }
    println!(
        "loopback: {notifications} notifications, {calls} sequential tools/call getDiagnostics round trips, \
         {pipelined} more with {in_flight} in flight"
    );
    let mut rounds_run = Vec::new();
    for round in 1..=rounds {
        if rounds > 1 {
            println!("round {round} of {rounds}");
        }
        let results = run_all(&runtimes, notifications, calls, pipelined, in_flight);
        summary(&results);
        rounds_run.push(results);
    }
    if rounds > 1 {
        rounds_summary(&rounds_run);
    }
}

/// Each server in turn: started, measured, stopped.
fn run_all(
    runtimes: &[String],
    notifications: usize,
    calls: usize,
    pipelined: usize,
    in_flight: usize,
) -> Vec<(String, Figures)> {
    let mut results: Vec<(String, Figures)> = Vec::new();
    for rt in runtimes {
        if let Some(runtime) = rt.strip_prefix("serve-") {
            if !matches!(runtime, "threads" | "smol") {
                usage(rt)
            }
        }
        let server = match rt.as_str() {
            "serve-threads" | "serve-smol" => match start_serve(&rt["serve-".len()..]) {
                Ok(s) => Some(s),
                Err(e) => {
                    println!("{rt}: skipped ({e})");
                    continue;
                }
            },
            "smol" => Some(start_smol(false)),
            "smol-global" => Some(start_smol(true)),
            "smol-handler" => Some(start_smol_handler()),
            "threads" => Some(start_threads(false)),
            "threads-channel" => Some(start_threads(true)),
            "node" => start_node(),
            "bare-ws" => Some(start_bare_ws(Extra::None)),
            "bare-ws-wide" => Some(start_bare_ws(Extra::Wide)),
            "bare-ws-narrow" => Some(start_bare_ws(Extra::Narrow)),
            "bare-ws-smol" => Some(start_bare_ws_smol()),
            "engine-alone" => Some(start_engine_alone()),
            "tcp-echo" => Some(start_echo()),
            other => usage(other),
        };
        let Some(server) = server else {
            println!("{rt}: skipped (node or benches/loopback/node/node_modules missing: npm install there)");
            continue;
        };
        match run(&server, notifications, calls, pipelined, in_flight) {
            Ok(f) => {
                let notes = if f.notes_per_s.is_nan() {
                    "n/a".to_string()
                } else {
                    format!("{:.0}", f.notes_per_s)
                };
                println!(
                    "{rt}: {notes} notifications/s; {:.0} calls/s, median {:.1} µs, p99 {:.1} µs, \
                     server CPU {:.1} µs/call; pipelined {:.0} calls/s, median {:.1} µs, p99 {:.1} µs, \
                     server CPU {:.1} µs/call",
                    f.calls_per_s,
                    f.median_us,
                    f.p99_us,
                    f.cpu_us,
                    f.piped_per_s,
                    f.piped_median_us,
                    f.piped_p99_us,
                    f.piped_cpu_us
                );
                results.push((rt.clone(), f));
            }
            Err(e) => println!("{rt}: failed: {e}"),
        }
        server.stop();
    }
    results
}

/// Over several rounds: for each server, the median and the range of its sequential round trip
/// ratio to bare-ws in the same round (of the medians, and of calls/s); and for the smol setups,
/// the same against bare-ws-smol (the floor on smol's reactor), when it ran.
fn rounds_summary(rounds: &[Vec<(String, Figures)>]) {
    let Some(first) = rounds.first() else { return };
    let floors = [
        ("bare-ws", "bare-ws"),
        ("bare-ws-smol", "bare-ws-smol (smol's reactor)"),
    ];
    for (floor, label) in floors {
        let mut by_median = Vec::new();
        let on_floor = first
            .iter()
            .filter(|(n, _)| n != floor)
            .filter(|(n, _)| floor == "bare-ws" || n.starts_with("smol") || n == "serve-smol");
        for (name, _) in on_floor {
            let ratios = |get: fn(&Figures, &Figures) -> f64| {
                let mut r: Vec<f64> = rounds
                    .iter()
                    .filter_map(|round| {
                        let bare = &round.iter().find(|(n, _)| n == floor)?.1;
                        let f = &round.iter().find(|(n, _)| n == name)?.1;
                        Some(get(f, bare))
                    })
                    .filter(|r| r.is_finite())
                    .collect();
                r.sort_by(f64::total_cmp);
                r
            };
            let medians = ratios(|f, bare| bare.median_us / f.median_us);
            let rates = ratios(|f, bare| f.calls_per_s / bare.calls_per_s);
            let (Some(m), Some(c)) = (middle(&medians), middle(&rates)) else {
                continue;
            };
            by_median.push(format!(
                "{name} {m:.3}× ({:.3}-{:.3}), calls/s {c:.3}×",
                medians[0],
                medians[medians.len() - 1]
            ));
        }
        if !by_median.is_empty() {
            println!(
                "over {} rounds, sequential round trip × {label} by median (range), and by calls/s: {}",
                rounds.len(),
                by_median.join(" | ")
            );
        }
    }
}

/// The median of sorted values (the mean of the middle two for an even count).
fn middle(sorted: &[f64]) -> Option<f64> {
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// One line per figure: every server's value and its ratio against Node (higher is better: for
/// latencies, Node's value over this one). The tcp-echo floor's ratio is the most any server can
/// reach on this machine.
fn summary(results: &[(String, Figures)]) {
    // The sequential round trip against the bare WebSocket server of the same run: the least a
    // WebSocket server costs per call on this machine (issue 13, item 8: at least 0.9×). The same
    // bare server on smol's reactor is in the list: the most any server on that reactor reaches.
    let floors = [("bare-ws", "all"), ("bare-ws-smol", "smol's reactor")];
    for (floor, on) in floors {
        let Some((_, bare)) = results.iter().find(|(n, _)| n == floor) else {
            continue;
        };
        let cells: Vec<String> = results
            .iter()
            .filter(|(name, _)| name != floor && name != "tcp-echo" && name != "node")
            .filter(|(name, _)| {
                floor == "bare-ws" || name.starts_with("smol") || name == "serve-smol"
            })
            .map(|(name, f)| {
                format!(
                    "{name} {:.2}× ({:.2}×)",
                    f.calls_per_s / bare.calls_per_s,
                    bare.median_us / f.median_us
                )
            })
            .collect();
        if !cells.is_empty() {
            println!(
                "sequential round trip × {floor} ({on}), calls/s (median): {}",
                cells.join(" | ")
            );
        }
    }
    serve_summary(results);
    let Some((_, node)) = results.iter().find(|(n, _)| n == "node") else {
        return;
    };
    type Figure = (&'static str, fn(&Figures) -> f64, bool);
    let figures: [Figure; 9] = [
        ("notifications/s", |f| f.notes_per_s, false),
        ("calls/s", |f| f.calls_per_s, false),
        ("median µs", |f| f.median_us, true),
        ("p99 µs", |f| f.p99_us, true),
        ("CPU µs/call", |f| f.cpu_us, true),
        ("piped calls/s", |f| f.piped_per_s, false),
        ("piped median µs", |f| f.piped_median_us, true),
        ("piped p99 µs", |f| f.piped_p99_us, true),
        ("piped CPU µs/call", |f| f.piped_cpu_us, true),
    ];
    println!("figures (× node, higher is better):");
    for (label, get, lower_better) in figures {
        let base = get(node);
        let cells: Vec<String> = results
            .iter()
            .filter(|(_, f)| !get(f).is_nan())
            .map(|(name, f)| {
                let v = get(f);
                let value = if lower_better {
                    format!("{v:.1}")
                } else {
                    format!("{:.1} k", v / 1e3)
                };
                if name == "node" {
                    format!("{name} {value}")
                } else {
                    let ratio = if lower_better { base / v } else { v / base };
                    format!("{name} {value} ({ratio:.2}×)")
                }
            })
            .collect();
        println!("  {label:<17} {}", cells.join(" | "));
    }
    // What each server adds to a sequential round trip over the tcp-echo floor of the same run:
    // its own work per call, with the kernel's and the client's share taken out. Derived (a
    // difference of two medians), so only meaningful when the run is steady (`--cpu`).
    let Some((_, floor)) = results.iter().find(|(n, _)| n == "tcp-echo") else {
        return;
    };
    let over = |f: &Figures| f.median_us - floor.median_us;
    let base = over(node);
    let cells: Vec<String> = results
        .iter()
        .filter(|(name, _)| name != "tcp-echo")
        .map(|(name, f)| {
            let v = over(f);
            if name == "node" {
                format!("{name} {v:.1}")
            } else if v > 0.05 && base > 0.05 {
                format!("{name} {v:.1} ({:.2}×)", base / v)
            } else {
                format!("{name} {v:.1} (at the floor)")
            }
        })
        .collect();
    println!("  {:<17} {}", "median−floor µs", cells.join(" | "));
}

/// The program's sequential round trip (issue 32, item 6: at least 2× Node's and 0.5× the bare
/// WebSocket server's, on both runtimes), as ratios of the same run's, by median and by calls/s.
fn serve_summary(results: &[(String, Figures)]) {
    let find = |name: &str| results.iter().find(|(n, _)| n == name).map(|(_, f)| f);
    let mut cells = Vec::new();
    for (name, f) in results.iter().filter(|(n, _)| n.starts_with("serve-")) {
        let mut against = Vec::new();
        for other in ["node", "bare-ws", "bare-ws-smol"] {
            if let Some(o) = find(other) {
                against.push(format!("{:.2}× {other}", o.median_us / f.median_us));
            }
        }
        cells.push(format!(
            "{name} median {:.1} µs: {}",
            f.median_us,
            against.join(", ")
        ));
    }
    if !cells.is_empty() {
        println!(
            "the program's sequential round trip × others (by median, higher is better): {}",
            cells.join(" | ")
        );
    }
}

/// A count of at least one.
fn positive(value: &str) -> Option<usize> {
    value.parse().ok().filter(|&n| n > 0)
}

fn usage(arg: &str) -> ! {
    eprintln!(
        "unexpected {arg:?}\nusage: loopback [--runtime smol|smol-global|smol-handler|threads|threads-channel|node|bare-ws|bare-ws-wide|bare-ws-narrow|bare-ws-smol|engine-alone|serve-threads|serve-smol|tcp-echo]... \
         [--notifications N] [--calls N] [--pipelined N] [--in-flight K] [--cpu C] [--rounds R] [--syscall-costs]"
    );
    std::process::exit(2)
}

#[derive(Debug, Clone, Copy)]
struct Figures {
    notes_per_s: f64,
    calls_per_s: f64,
    median_us: f64,
    p99_us: f64,
    /// Pipelined: round trips per second and latency with several calls in flight.
    piped_per_s: f64,
    piped_median_us: f64,
    piped_p99_us: f64,
    /// CPU time the server's threads used per call (µs), sequential and pipelined (NaN where
    /// `/proc` cannot tell).
    cpu_us: f64,
    piped_cpu_us: f64,
}

fn run(
    server: &Server,
    notifications: usize,
    calls: usize,
    pipelined: usize,
    in_flight: usize,
) -> io::Result<Figures> {
    let mut c = Client::connect(server.port, &server.token)?;
    c.request(
        r#""method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"loopback","version":"0"}}"#,
    )?;
    c.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)?;

    // Warm up both paths a little.
    for _ in 0..200 {
        c.request(server.call)?;
    }

    // Notifications: from the moment they are asked for until the last one is read.
    let notes_per_s = if server.echo {
        f64::NAN
    } else {
        notifications_per_s(server, &mut c, notifications)?
    };

    // Round trips, one at a time.
    let mut lat = Vec::with_capacity(calls);
    let cpu_before = server_cpu_ns(server);
    let start = Instant::now();
    for _ in 0..calls {
        let t = Instant::now();
        c.request(server.call)?;
        lat.push(t.elapsed());
        if start.elapsed() > TIMEOUT {
            return Err(io::Error::other("round trips timed out"));
        }
    }
    let calls_per_s = calls as f64 / start.elapsed().as_secs_f64();
    let cpu_us = cpu_per_call(cpu_before, server_cpu_ns(server), calls);
    let (median_us, p99_us) = percentiles(&mut lat);

    // Round trips, `in_flight` at a time.
    let cpu_before = server_cpu_ns(server);
    let (piped_per_s, mut lat) = c.pipelined(server.call, pipelined, in_flight)?;
    let piped_cpu_us = cpu_per_call(cpu_before, server_cpu_ns(server), pipelined);
    let (piped_median_us, piped_p99_us) = percentiles(&mut lat);
    Ok(Figures {
        notes_per_s,
        calls_per_s,
        median_us,
        p99_us,
        piped_per_s,
        piped_median_us,
        piped_p99_us,
        cpu_us,
        piped_cpu_us,
    })
}

/// CPU time (ns) used so far by the server's threads, from the kernel's per-thread accounting
/// (`/proc/<pid>/task/<tid>/schedstat`: time on a CPU, system calls and the loopback's network
/// processing done in them included; time waiting to be woken is not). Node: every thread of the
/// child. In-process servers: every thread of this process except the calling one, the load
/// client (the other servers' threads are idle by then). `None` off Linux.
fn server_cpu_ns(server: &Server) -> Option<u64> {
    let (dir, skip) = match &server.child {
        Some(child) => (format!("/proc/{}/task", child.id()), None),
        None => {
            // "<pid>/task/<tid>": the calling thread's id.
            let me = std::fs::read_link("/proc/thread-self").ok()?;
            let tid = me.file_name()?.to_str()?.to_string();
            ("/proc/self/task".to_string(), Some(tid))
        }
    };
    let mut total = 0;
    for entry in std::fs::read_dir(dir).ok()? {
        let entry = entry.ok()?;
        if skip.as_deref() == entry.file_name().to_str() {
            continue;
        }
        // A thread that ended meanwhile has no file any more: it counts as nothing.
        let Ok(stat) = std::fs::read_to_string(entry.path().join("schedstat")) else {
            continue;
        };
        total += stat
            .split_whitespace()
            .next()
            .and_then(|ns| ns.parse::<u64>().ok())?;
    }
    Some(total)
}

/// µs of server CPU per call between two [`server_cpu_ns`] readings.
fn cpu_per_call(before: Option<u64>, after: Option<u64>, calls: usize) -> f64 {
    match (before, after) {
        (Some(b), Some(a)) if calls > 0 => a.saturating_sub(b) as f64 / 1e3 / calls as f64,
        _ => f64::NAN,
    }
}

/// Median and p99 of `lat`, in µs.
fn percentiles(lat: &mut [Duration]) -> (f64, f64) {
    if lat.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    lat.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    (us(lat[lat.len() / 2]), us(lat[lat.len() * 99 / 100]))
}

fn notifications_per_s(server: &Server, c: &mut Client, notifications: usize) -> io::Result<f64> {
    let start = Instant::now();
    match &server.push {
        Some(tx) => tx.send(notifications).map_err(io::Error::other)?,
        None => c.send(&format!(
            r#"{{"jsonrpc":"2.0","method":"bench/push","params":{{"count":{notifications}}}}}"#
        ))?,
    }
    let mut got = 0;
    while got < notifications {
        let text = c.next_text()?;
        if text.contains("selection_changed") {
            got += 1;
            server.received.fetch_add(1, Ordering::Release);
        }
        if start.elapsed() > TIMEOUT {
            return Err(io::Error::other("notifications timed out"));
        }
    }
    Ok(notifications as f64 / start.elapsed().as_secs_f64())
}
