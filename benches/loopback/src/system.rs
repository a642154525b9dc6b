//! What the bench asks of the operating system: pinning to one CPU, and the cost of the system
//! calls a wait on smol's reactor makes.

use std::io;
#[cfg(target_os = "linux")]
use std::time::Instant;

/// `--syscall-costs`: what each system call of a wait on smol's reactor costs on this machine (a
/// million of each, back to back; the mean). polling's epoll backend makes `timerfd_settime`, an
/// `epoll_ctl` for the timer, `epoll_wait`, a `read` of its notifier and an `epoll_ctl` re-arming it
/// for every wait; a reader that waits also re-arms its socket (`epoll_ctl`) and has made a read
/// that found nothing. `getppid` is the cheapest call there is: the cost of entering the kernel.
#[cfg(target_os = "linux")]
pub(crate) fn print_syscall_costs() {
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
pub(crate) fn print_syscall_costs() {
    println!("syscall costs: only on Linux");
}

/// Pin this process's current thread (and so every thread and child started after) to `cpu`.
#[cfg(target_os = "linux")]
pub(crate) fn pin_to(cpu: usize) -> io::Result<()> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu);
    Ok(rustix::thread::sched_setaffinity(None, &set)?)
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn pin_to(_: usize) -> io::Result<()> {
    Err(io::Error::other("only on Linux"))
}
