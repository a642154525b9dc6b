//! Loopback benchmark: notifications per second pushed to one client, and `tools/call` round trips
//! per second, one at a time (with their median and p99 latency) and pipelined (several calls in
//! flight, as when the client runs tools in parallel), for the smol runtime, the threads runtime and
//! a reference server on Node `ws`, in one run, with the ratios against Node. For the round trips it
//! also reports the CPU time the server's threads used per call (Linux, from `/proc`): what a
//! server costs, which the round trip's wake-ups between CPUs do not hide.
//!
//! ```text
//! (cd benches/loopback/node && npm install)      # once; without it the Node figures are skipped
//! cargo run --release -p claude-ide-bridge-bench-loopback -- [--runtime smol|smol-global|smol-handler|threads|threads-channel|node|bare-ws|bare-ws-wide|bare-ws-narrow|bare-ws-smol|tcp-echo]...
//!     [--notifications N] [--calls N] [--pipelined N] [--in-flight K] [--cpu C] [--rounds R] [--syscall-costs]
//! ```
//!
//! `--rounds R` runs the whole list R times in turn and ends with, for each server, the median
//! over the rounds of its ratio to the bare WebSocket server of the same round: on a shared
//! machine one run's ratios move by several hundredths between runs of the same build.
//!
//! `--syscall-costs` prints instead what each system call of a wait on smol's reactor costs here.
//!
//! `--cpu C` pins everything (client, servers, the Node child) to CPU `C` (Linux): on a virtual
//! machine, waking a thread on another, idle vCPU can cost tens of µs, which would otherwise be
//! most of every round trip for every server.
//!
//! Everything stays on 127.0.0.1 and every loop is bounded by the counts given (and a 60 s
//! timeout per figure). The load client is the same for all servers: a blocking client on
//! the core's frame codec.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use claude_ide_bridge::ws::{apply_mask, decode_header, encode_frame, OpCode};
use claude_ide_bridge::{AuthToken, Event, Target, ToolResult};
use claude_ide_bridge::{Notification, SelectionChanged};
use claude_ide_bridge::{Position, Selection};
use claude_ide_bridge_blocking::{Handle, LockFileMode, Options};

const TOKEN: &str = "loopback-bench-token";
/// Notifications a host lets run ahead of what the client has received (about 1 MiB), like the
/// Node server's `bufferedAmount` window.
const WINDOW: usize = 4096;
const TIMEOUT: Duration = Duration::from_secs(60);

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
        let server = match rt.as_str() {
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
/// ratio to bare-ws in the same round (of the medians, and of calls/s).
fn rounds_summary(rounds: &[Vec<(String, Figures)>]) {
    let Some(first) = rounds.first() else { return };
    let mut by_median = Vec::new();
    for (name, _) in first.iter().filter(|(n, _)| n != "bare-ws") {
        let ratios = |get: fn(&Figures, &Figures) -> f64| {
            let mut r: Vec<f64> = rounds
                .iter()
                .filter_map(|round| {
                    let bare = &round.iter().find(|(n, _)| n == "bare-ws")?.1;
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
            "over {} rounds, sequential round trip × bare-ws by median (range), and by calls/s: {}",
            rounds.len(),
            by_median.join(" | ")
        );
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
            .filter(|(name, _)| floor == "bare-ws" || name.starts_with("smol"))
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

/// `--syscall-costs`: what each system call of a wait on smol's reactor costs on this machine (a
/// million of each, back to back; the mean). polling's epoll backend makes `timerfd_settime`, an
/// `epoll_ctl` for the timer, `epoll_wait`, a `read` of its notifier and an `epoll_ctl` re-arming it
/// for every wait; a reader that waits also re-arms its socket (`epoll_ctl`) and has made a read
/// that found nothing. `getppid` is the cheapest call there is: the cost of entering the kernel.
#[cfg(target_os = "linux")]
fn print_syscall_costs() {
    use rustix::event::epoll;
    use rustix::time::{timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId};
    use rustix::time::{TimerfdFlags, TimerfdTimerFlags, Timespec};
    const N: u32 = 1_000_000;
    let time = |name: &str, mut f: Box<dyn FnMut() + '_>| {
        let start = Instant::now();
        for _ in 0..N {
            f();
        }
        println!(
            "{name:<24} {:6.1} ns",
            start.elapsed().as_nanos() as f64 / f64::from(N)
        );
    };
    let setup = || -> io::Result<_> {
        let ep = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        let timer = timerfd_create(TimerfdClockId::Monotonic, TimerfdFlags::NONBLOCK)?;
        let flags = epoll::EventFlags::IN | epoll::EventFlags::ONESHOT;
        epoll::add(&ep, &timer, epoll::EventData::new_u64(0), flags)?;
        Ok((ep, timer, flags))
    };
    let (ep, timer, flags) = match setup() {
        Ok(s) => s,
        Err(e) => return println!("syscall costs: {e}"),
    };
    let zero = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    let off = Itimerspec {
        it_interval: zero,
        it_value: zero,
    };
    time(
        "getppid",
        Box::new(|| {
            std::hint::black_box(rustix::process::getppid());
        }),
    );
    time(
        "timerfd_settime",
        Box::new(|| {
            let _ = timerfd_settime(&timer, TimerfdTimerFlags::empty(), &off);
        }),
    );
    time(
        "epoll_ctl (modify)",
        Box::new(|| {
            let _ = epoll::modify(&ep, &timer, epoll::EventData::new_u64(0), flags);
        }),
    );
    let mut events = Vec::with_capacity(4);
    time(
        "epoll_wait (no timeout)",
        Box::new(|| {
            events.clear();
            let _ = epoll::wait(
                &ep,
                rustix::buffer::spare_capacity(&mut events),
                Some(&zero),
            );
        }),
    );
    let mut byte = [0u8; 8];
    time(
        "read (nothing there)",
        Box::new(|| {
            let _ = rustix::io::read(&timer, &mut byte);
        }),
    );
}

#[cfg(not(target_os = "linux"))]
fn print_syscall_costs() {
    println!("syscall costs: only on Linux");
}

/// Pin this process's current thread (and so every thread and child started after) to `cpu`.
#[cfg(target_os = "linux")]
fn pin_to(cpu: usize) -> io::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    Ok(rustix::thread::sched_setaffinity(None, &set)?)
}

#[cfg(not(target_os = "linux"))]
fn pin_to(_: usize) -> io::Result<()> {
    Err(io::Error::other("only on Linux"))
}

/// A count of at least one.
fn positive(value: &str) -> Option<usize> {
    value.parse().ok().filter(|&n| n > 0)
}

fn usage(arg: &str) -> ! {
    eprintln!(
        "unexpected {arg:?}\nusage: loopback [--runtime smol|smol-global|smol-handler|threads|threads-channel|node|bare-ws|bare-ws-wide|bare-ws-narrow|bare-ws-smol|tcp-echo]... \
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

/// A server under test and how to make it push notifications.
struct Server {
    port: u16,
    /// Asks the host to push `n` notifications (`None`: send `bench/push` on the socket, for Node).
    push: Option<mpsc::Sender<usize>>,
    /// Notifications the client has received so far, for the hosts' window.
    received: Arc<AtomicUsize>,
    child: Option<Child>,
    /// A floor (tcp-echo, bare-ws) rather than a server of the protocol: no notifications.
    echo: bool,
}

impl Server {
    /// A floor (tcp-echo, bare-ws) on `port`, in this process.
    fn floor(port: u16) -> Server {
        Server {
            port,
            push: None,
            received: Arc::new(AtomicUsize::new(0)),
            child: None,
            echo: true,
        }
    }

    fn stop(mut self) {
        if let Some(mut c) = self.child.take() {
            // `ws` stops on its own when stdin closes.
            drop(c.stdin.take()); // the script exits when its stdin closes
            let _ = c.wait();
        }
    }
}

/// The options type is the runtime crate's, re-exported by both runtimes.
fn options() -> Options {
    let mut o = Options::new(vec![std::env::temp_dir()], "loopback-bench");
    o.port = 0;
    o.lock_file = LockFileMode::Disabled;
    o.auth_token = Some(AuthToken::from_string(TOKEN.to_string()));
    o.signal_cleanup = false;
    o
}

fn selection() -> Notification {
    Notification::SelectionChanged(SelectionChanged {
        text: "fn main() {}".into(),
        file_path: "/home/me/project/src/main.rs".into(),
        file_url: "file:///home/me/project/src/main.rs".into(),
        selection: Selection::new(Position::new(1, 0), Position::new(1, 12)),
    })
}

/// Push `n` notifications through `notify`, keeping at most [`WINDOW`] ahead of the client.
fn push_windowed(n: usize, received: &AtomicUsize, pusher: &Handle) {
    let note = selection();
    let base = received.load(Ordering::Acquire);
    let start = Instant::now();
    let mut sent = 0;
    while sent < n && start.elapsed() < TIMEOUT {
        if sent - (received.load(Ordering::Acquire) - base).min(sent) < WINDOW {
            pusher.notify(Target::All, &note);
            sent += 1;
        } else {
            thread::yield_now();
        }
    }
}

/// A Rust server on `port` whose pushes go through `pusher` (either runtime's handle): a thread
/// pushes what [`run`] asks for, windowed. It owns `keep` (dropped, i.e. the server stopped, when
/// the bench is done with it).
fn rust_server(port: u16, pusher: Handle, keep: impl Send + 'static) -> Server {
    let received = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel::<usize>();
    let r = received.clone();
    thread::spawn(move || {
        for n in rx {
            push_windowed(n, &r, &pusher);
        }
        drop(keep);
    });
    Server {
        port,
        push: Some(tx),
        received,
        child: None,
        echo: false,
    }
}

/// The threads host as the runtime recommends for latency: calls answered by a handler on the
/// thread that read them (`start_with_handler`); with `channel`, events read by a host thread
/// of its own (`start` and `next_event`): one thread hand-off per event.
fn start_threads(channel: bool) -> Server {
    let server = if channel {
        claude_ide_bridge_blocking::IdeServer::start(options())
    } else {
        claude_ide_bridge_blocking::IdeServer::start_with_handler(options(), |ev, handle| {
            if let Event::ToolCall { call, .. } = ev {
                let _ = handle.respond(call, ToolResult::text("[]"));
            }
        })
    }
    .expect("start");
    let port = server.port();
    let handle = server.handle();
    let pusher = server.handle();
    // The host: answers every tool call at once (with a handler, `next_event` ends at once and
    // the thread only keeps the server alive). Ends with the process.
    thread::spawn(move || {
        while let Some(ev) = server.next_event() {
            if let Event::ToolCall { call, .. } = ev {
                let _ = handle.respond(call, ToolResult::text("[]"));
            }
        }
        loop {
            thread::park();
        }
    });
    rust_server(port, pusher, ())
}

/// The smol host as the runtime recommends for latency: the server's tasks and the host's event
/// loop on one executor, run by one thread (`start_on`); with `global`, the tasks on smol's
/// global executor and the host on its own thread (`start`): one thread hand-off per event.
fn start_smol(global: bool) -> Server {
    let (port_tx, port_rx) = mpsc::channel();
    thread::spawn(move || {
        let ex = Arc::new(smol::Executor::new());
        let on = ex.clone();
        // The host's loop is a task of the executor, as the runtime recommends: woken by an
        // event, it is run in the same turn as the connection's task.
        smol::block_on(ex.run(ex.spawn(async move {
            let server = if global {
                claude_ide_bridge_smol::IdeServer::start(options()).await
            } else {
                claude_ide_bridge_smol::IdeServer::start_on(options(), on).await
            }
            .expect("start");
            port_tx
                .send((server.port(), server.handle()))
                .expect("main waits");
            let handle = server.handle();
            while let Some(ev) = server.next_event().await {
                if let Event::ToolCall { call, .. } = ev {
                    let _ = handle.respond(call, ToolResult::text("[]"));
                }
            }
        })))
    });
    let (port, pusher) = port_rx.recv().expect("smol server started");
    rust_server(port, pusher, ())
}

/// The smol host as the threads one: calls answered by a handler from the connection's task
/// (`start_with_handler`), the tasks on smol's global executor; no host loop at all.
fn start_smol_handler() -> Server {
    let server = smol::block_on(claude_ide_bridge_smol::IdeServer::start_with_handler(
        options(),
        |ev, handle| {
            if let Event::ToolCall { call, .. } = ev {
                let _ = handle.respond(call, ToolResult::text("[]"));
            }
        },
    ))
    .expect("start");
    let port = server.port();
    let pusher = server.handle();
    rust_server(port, pusher, server)
}

/// The floor: a thread that writes back whatever it reads, after a `101` for the upgrade. The client's
/// masked frames come back as they were sent; it unmasks them and finds its id.
fn start_echo() -> Server {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("bound").port();
    thread::spawn(move || {
        let Ok((mut s, _)) = listener.accept() else {
            return;
        };
        let _ = s.set_nodelay(true);
        let mut buf = [0u8; 64 * 1024];
        let mut head = Vec::new();
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
        let _ = s.write_all(b"HTTP/1.1 101 Switching Protocols\r\n\r\n");
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 || s.write_all(&buf[..n]).is_err() {
                return;
            }
        }
    });
    Server::floor(port)
}

/// The floor of a WebSocket server: a thread that does the least a server must do for a call, with
/// nothing else (no MCP session, no tools, no notifications, no limits): it answers the upgrade
/// (`101` with the `Sec-WebSocket-Accept` of the client's key), then for each masked text frame
/// read, takes the request's id from the unmasked payload and writes one fixed `getDiagnostics`
/// answer (the same bytes as the real servers' `[]`) with that id; the answers to the frames of one
/// read leave in one write. The sequential round trips through the runtimes are measured against
/// it (item 8 of issue 13 asks for at least 0.9× of its calls/s).
fn start_bare_ws(extra: Extra) -> Server {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("bound").port();
    thread::spawn(move || {
        if let Ok((s, _)) = listener.accept() {
            let _ = bare_ws_session(s, extra);
        }
    });
    Server::floor(port)
}

fn bare_ws_session(mut s: TcpStream, extra: Extra) -> io::Result<()> {
    s.set_nodelay(true)?;
    let mut bare = Bare::default();
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        let out = bare.input(&chunk[..n])?;
        extra.run(n as u64);
        if !out.is_empty() {
            s.write_all(out)?;
        }
    }
}

/// Work added to the bare server on every read, to tell what the sequential round trip follows
/// (BENCHMARKS.md, "Item 8, fourth session of 2026-11-23"): `Wide` runs 512 distinct small
/// functions (about 5 k instructions over about 28 KiB of code more than `bare-ws`), `Narrow` the
/// same shape of function 512 times with its constant passed at run time (more instructions, in
/// one small function). Neither is in the default list.
#[derive(Clone, Copy)]
enum Extra {
    None,
    Wide,
    Narrow,
}

impl Extra {
    fn run(self, seed: u64) {
        let mut x = seed;
        match self {
            Extra::None => return,
            Extra::Wide => {
                // 2^9 calls of step::<K>, K from 512 to 1023: each K its own copy of the code.
                macro_rules! steps {
                    ($k:expr, []) => { x = step::<{ $k }>(x); };
                    ($k:expr, [_ $($more:tt)*]) => {
                        steps!($k * 2, [$($more)*]);
                        steps!($k * 2 + 1, [$($more)*]);
                    };
                }
                steps!(1, [_ _ _ _ _ _ _ _ _]);
            }
            Extra::Narrow => {
                for k in 512..1024 {
                    x = step_at(x, std::hint::black_box(k));
                }
            }
        }
        std::hint::black_box(x);
    }
}

/// One step of [`Extra::Wide`]; `black_box` keeps every copy and its result.
#[inline(never)]
fn step<const K: u64>(x: u64) -> u64 {
    mix(x, K)
}

/// [`step`] with `k` known only at run time: the one function of [`Extra::Narrow`].
#[inline(never)]
fn step_at(x: u64, k: u64) -> u64 {
    mix(x, k)
}

/// The work of one step, inlined into each: with `k` a constant in [`step`], a variable in
/// [`step_at`].
#[inline(always)]
fn mix(x: u64, k: u64) -> u64 {
    std::hint::black_box(x.wrapping_mul(k | 1).rotate_left((k % 61) as u32 + 1) ^ (k * 0x9E37_79B9))
}

/// The same bare server on smol's reactor (async-io), as the smol runtime reads: a read first,
/// a wait for readiness only when it would block. What any server on that reactor pays per call
/// on this machine: the floor of the smol runtime.
fn start_bare_ws_smol() -> Server {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("bound").port();
    thread::spawn(move || {
        smol::block_on(async move {
            let listener = smol::Async::new(listener)?;
            let (s, _) = listener.accept().await?;
            s.get_ref().set_nodelay(true)?;
            let mut bare = Bare::default();
            let mut chunk = vec![0u8; 64 * 1024];
            loop {
                let n = match s.get_ref().read(&mut chunk) {
                    Ok(0) => return Ok(()),
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        s.readable().await?;
                        continue;
                    }
                    Err(e) => return Err(e),
                };
                let out = bare.input(&chunk[..n])?;
                if !out.is_empty() {
                    smol::io::AsyncWriteExt::write_all(&mut &s, out).await?;
                }
            }
        })
        .unwrap_or_else(|e: io::Error| eprintln!("bare-ws-smol: {e}"))
    });
    Server::floor(port)
}

/// What a bare WebSocket server does with the bytes it reads: the upgrade, then a fixed answer to
/// each request.
#[derive(Default)]
struct Bare {
    upgraded: bool,
    buf: Vec<u8>,
    payload: Vec<u8>,
    out: Vec<u8>,
}

impl Bare {
    /// Bytes read; what to write back (maybe nothing).
    fn input(&mut self, bytes: &[u8]) -> io::Result<&[u8]> {
        use base64::Engine;
        use sha1::Digest;
        self.buf.extend_from_slice(bytes);
        self.out.clear();
        if !self.upgraded {
            let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                return Ok(&self.out);
            };
            let head = String::from_utf8_lossy(&self.buf[..end + 4]).into_owned();
            let key = head
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("sec-websocket-key")
                        .then(|| value.trim())
                })
                .unwrap_or_default();
            let digest = sha1::Sha1::digest(format!("{key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11"));
            let accept = base64::engine::general_purpose::STANDARD.encode(digest);
            write!(
                self.out,
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                 Sec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: mcp\r\n\r\n"
            )?;
            self.buf.drain(..end + 4);
            self.upgraded = true;
        }
        let mut at = 0;
        while let Some((h, n)) =
            decode_header(&self.buf[at..]).map_err(|e| io::Error::other(e.to_string()))?
        {
            let len = h.payload_len as usize;
            if self.buf.len() - at < n + len {
                break;
            }
            self.payload.clear();
            self.payload
                .extend_from_slice(&self.buf[at + n..at + n + len]);
            if let Some(m) = h.mask {
                apply_mask(&mut self.payload, m, 0);
            }
            at += n + len;
            // Requests get the fixed answer; notifications (no id) none.
            if let Some(id) = std::str::from_utf8(&self.payload)
                .ok()
                .and_then(response_id)
            {
                let reply = format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"[]"}}]}}}}"#
                );
                encode_frame(&mut self.out, OpCode::Text, true, None, reply.as_bytes());
            }
        }
        self.buf.drain(..at);
        Ok(&self.out)
    }
}

fn start_node() -> Option<Server> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("node");
    if !dir.join("node_modules/ws").exists() {
        return None;
    }
    let mut child = Command::new("node")
        .arg(dir.join("server.js"))
        .arg(TOKEN)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .ok()?;
    let mut line = String::new();
    BufReader::new(child.stdout.take()?)
        .read_line(&mut line)
        .ok()?;
    let port = line.trim().parse().ok()?;
    Some(Server {
        port,
        push: None,
        received: Arc::new(AtomicUsize::new(0)),
        child: Some(child),
        echo: false,
    })
}

fn run(
    server: &Server,
    notifications: usize,
    calls: usize,
    pipelined: usize,
    in_flight: usize,
) -> io::Result<Figures> {
    let mut c = Client::connect(server.port)?;
    c.request(
        r#""method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"loopback","version":"0"}}"#,
    )?;
    c.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)?;

    // Warm up both paths a little.
    for _ in 0..200 {
        c.request(GET_DIAGNOSTICS)?;
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
        c.request(GET_DIAGNOSTICS)?;
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
    let (piped_per_s, mut lat) = c.pipelined(GET_DIAGNOSTICS, pipelined, in_flight)?;
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

/// The integer id of a JSON-RPC response (`"id":N`), if `text` has one.
fn response_id(text: &str) -> Option<u64> {
    let at = text.find(r#""id":"#)? + 5;
    let digits = text[at..]
        .find(|c: char| !c.is_ascii_digit())
        .map_or(&text[at..], |end| &text[at..at + end]);
    digits.parse().ok()
}

const GET_DIAGNOSTICS: &str = r#""method":"tools/call","params":{"name":"getDiagnostics","arguments":{"uri":"file:///home/me/project/src/main.rs"}}"#;

/// A blocking WebSocket client on the core's frame codec.
struct Client {
    stream: TcpStream,
    /// Received bytes; unread from `head` on.
    buf: Vec<u8>,
    head: usize,
    out: Vec<u8>,
    /// Where reads land (allocated once: zeroing 64 KiB per read would be most of the client's cost).
    chunk: Box<[u8]>,
    next_id: u64,
    mask: u32,
}

impl Client {
    fn connect(port: u16) -> io::Result<Client> {
        let mut stream = TcpStream::connect(("127.0.0.1", port))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        write!(
            stream,
            "GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
             Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
             Sec-WebSocket-Protocol: mcp\r\nX-Claude-Code-Ide-Authorization: {TOKEN}\r\n\r\n"
        )?;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let end = loop {
            if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
            let n = stream.read(&mut chunk)?;
            if n == 0 {
                return Err(io::Error::other("closed during the upgrade"));
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        if !buf.starts_with(b"HTTP/1.1 101") {
            return Err(io::Error::other(
                String::from_utf8_lossy(&buf[..end]).into_owned(),
            ));
        }
        buf.drain(..end);
        Ok(Client {
            stream,
            buf,
            head: 0,
            out: Vec::new(),
            chunk: vec![0u8; 64 * 1024].into_boxed_slice(),
            next_id: 1,
            mask: 0x9E37_79B9,
        })
    }

    fn send(&mut self, text: &str) -> io::Result<()> {
        self.out.clear();
        self.encode(text);
        self.stream.write_all(&self.out)
    }

    /// Append a masked text frame to `out`.
    fn encode(&mut self, text: &str) {
        self.mask = self
            .mask
            .wrapping_mul(1_664_525)
            .wrapping_add(1_013_904_223);
        encode_frame(
            &mut self.out,
            OpCode::Text,
            true,
            Some(self.mask.to_be_bytes()),
            text.as_bytes(),
        );
    }

    /// `n` requests `{"jsonrpc":"2.0","id":N,<members>}`, keeping `in_flight` outstanding: whenever
    /// responses free room, the requests that fill it again go out in one write. Returns round trips
    /// per second and each request's latency (from its write to its response).
    fn pipelined(
        &mut self,
        members: &str,
        n: usize,
        in_flight: usize,
    ) -> io::Result<(f64, Vec<Duration>)> {
        let base = self.next_id;
        let mut sent_at: Vec<Option<Instant>> = vec![None; n];
        let mut lat = Vec::with_capacity(n);
        let (mut sent, mut done) = (0usize, 0usize);
        let start = Instant::now();
        while done < n {
            if sent - done < in_flight && sent < n {
                self.out.clear();
                while sent - done < in_flight && sent < n {
                    let id = base + sent as u64;
                    self.encode(&format!(r#"{{"jsonrpc":"2.0","id":{id},{members}}}"#));
                    sent += 1;
                }
                let now = Instant::now();
                for at in &mut sent_at[done..sent] {
                    at.get_or_insert(now);
                }
                self.stream.write_all(&self.out)?;
            }
            // Wait for one answer, then take every other one already received before refilling the
            // window, so that the refill is one write however many answers came in one read.
            let mut next = Some(self.next_text()?);
            while let Some(text) = next {
                if text.contains(r#""error""#) {
                    return Err(io::Error::other(text));
                }
                if let Some(id) = response_id(&text) {
                    let at = id
                        .checked_sub(base)
                        .and_then(|i| sent_at.get_mut(i as usize))
                        .and_then(Option::take)
                        .ok_or_else(|| io::Error::other(format!("unexpected response {text}")))?;
                    lat.push(at.elapsed());
                    done += 1;
                }
                next = self.buffered_text()?;
            }
            if start.elapsed() > TIMEOUT {
                return Err(io::Error::other("pipelined round trips timed out"));
            }
        }
        self.next_id = base + n as u64;
        Ok((n as f64 / start.elapsed().as_secs_f64(), lat))
    }

    /// Send `{"jsonrpc":"2.0","id":N,<members>}` and wait for the response with that id.
    fn request(&mut self, members: &str) -> io::Result<()> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&format!(r#"{{"jsonrpc":"2.0","id":{id},{members}}}"#))?;
        let want = format!(r#""id":{id},"#);
        loop {
            let text = self.next_text()?;
            if text.contains(&want) {
                if text.contains(r#""error""#) {
                    return Err(io::Error::other(text));
                }
                return Ok(());
            }
        }
    }

    /// The next text message already received, if a whole one is (server frames are unmasked and,
    /// here, unfragmented).
    fn buffered_text(&mut self) -> io::Result<Option<String>> {
        loop {
            let avail = &self.buf[self.head..];
            let Some((h, n)) = decode_header(avail).map_err(|e| io::Error::other(e.to_string()))?
            else {
                return Ok(None);
            };
            let len = h.payload_len as usize;
            if avail.len() < n + len {
                return Ok(None);
            }
            let mut payload = avail[n..n + len].to_vec();
            if let Some(m) = h.mask {
                apply_mask(&mut payload, m, 0);
            }
            self.head += n + len;
            match h.opcode {
                1 => {
                    return String::from_utf8(payload)
                        .map(Some)
                        .map_err(io::Error::other)
                }
                8 => return Err(io::Error::other("server closed")),
                _ => continue, // ping and pong: not expected in so short a run
            }
        }
    }

    /// The next text message, reading as needed.
    fn next_text(&mut self) -> io::Result<String> {
        loop {
            if let Some(text) = self.buffered_text()? {
                return Ok(text);
            }
            self.buf.drain(..self.head);
            self.head = 0;
            let r = self.stream.read(&mut self.chunk)?;
            if r == 0 {
                return Err(io::Error::other("connection closed"));
            }
            self.buf.extend_from_slice(&self.chunk[..r]);
        }
    }
}
