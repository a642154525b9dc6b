//! The runtimes' clock ([`Clock`]): the monotonic `now` the engine is given, which tests can move
//! forward.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The runtimes' source of `now`: the monotonic clock plus an offset that only moves forward.
///
/// Hosts leave it alone. Tests use [`Clock::jump`] to make the engine see time leap ahead, as it
/// does after a laptop sleeps, while the sockets stay healthy.
///
/// ```
/// use claude_ide_bridge_runtime::Clock;
/// use std::time::Duration;
/// let clock = Clock::default();
/// let before = clock.now();
/// clock.jump(Duration::from_secs(3600));
/// assert!(clock.now() >= before + Duration::from_secs(3600));
/// ```
#[derive(Debug, Clone, Default)]
pub struct Clock {
    offset_nanos: Arc<AtomicU64>,
}

impl Clock {
    /// The current instant as the engine should see it.
    pub fn now(&self) -> Instant {
        Instant::now() + Duration::from_nanos(self.offset_nanos.load(Ordering::Relaxed))
    }

    /// Move this clock (and every clone of it) forward by `by`; the offset stops at about 584
    /// years (`u64::MAX` nanoseconds) instead of wrapping back.
    pub fn jump(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        let _ = self
            .offset_nanos
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |o| {
                Some(o.saturating_add(nanos))
            });
    }

    /// The real time left until `deadline` (an instant of this clock), for arming a timer.
    pub fn until(&self, deadline: Instant) -> Duration {
        deadline.saturating_duration_since(self.now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumps_past_the_offsets_range_stop_at_its_end() {
        let clock = Clock::default();
        clock.jump(Duration::from_secs(1));
        let before = clock.now();
        clock.jump(Duration::MAX);
        clock.jump(Duration::from_secs(10));
        assert!(clock.now() > before + Duration::from_secs(500 * 365 * 24 * 3600));
    }
}
