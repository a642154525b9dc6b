//! Limits and timers, with safe defaults (docs/protocol.md, "Limits" and "Keepalive and timers").

use std::time::Duration;

/// Every limit the engine enforces. [`Limits::default`] gives the values from the protocol.
///
/// ```
/// use claude_ide_bridge::Limits;
/// let limits = Limits { max_connections: 4, ..Limits::default() };
/// assert_eq!(limits.max_head_bytes, 16 * 1024);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest HTTP upgrade request head, in bytes (431 past it).
    pub max_head_bytes: usize,
    /// Most headers in the upgrade request (431 past it).
    pub max_headers: usize,
    /// Time allowed from accept until the upgrade head is complete.
    ///
    /// Like every duration here, taken as at most [`Limits::LONGEST`] (longer means never, in
    /// practice); zero is taken as it is (a socket is dropped at the first timer).
    pub handshake_timeout: Duration,
    /// Live authenticated WebSocket connections (503 past it).
    pub max_connections: usize,
    /// Sockets still in their handshake; the oldest is dropped to admit a new one.
    pub max_pending_handshakes: usize,
    /// Largest message, across all fragments (close 1009 past it).
    pub max_message_size: usize,
    /// Most fragments in one message (close 1009 past it).
    pub max_fragments: usize,
    /// Largest outbound queue per connection: an answer that would take it past this is replaced
    /// by JSON-RPC error `-32000` saying so, and a peer whose queue would pass it even then (it
    /// stopped reading) is dropped.
    pub max_outbound: usize,
    /// Output queued for all connections together past which each gets its share only: an
    /// answer from the host that would take the queues past this, and its connection past an
    /// equal share of it (this divided by the connections holding output, its own counted), is
    /// replaced by JSON-RPC error `-32000` saying so, and a notification so is left out for it.
    /// Clients that ask for large answers and stop reading hold their shares, and a client that
    /// reads, holding little, is answered up to its share (at least this divided by
    /// `max_connections`). Answers the engine writes itself (`tools/list`, errors) are not
    /// refused for it: a runtime stops reading a client that does not read them
    /// ([`Limits::pause_input_above`]), and they are held to `max_outbound`. Each connection is
    /// held to `max_outbound` besides; zero refuses every answer and all news.
    pub max_outbound_total: usize,
    /// Output queued for a connection above which
    /// [`Server::wants_input`](crate::Server::wants_input) is false: a runtime stops reading that
    /// connection until the peer has read the queue back under it, so that a client that sends
    /// requests and never reads holds about this much output plus what the requests of one read
    /// are answered with, not `max_outbound`. While the queue is above it, a peer that takes the
    /// output is not dropped as silent (its answers to the pings may wait unread); one that
    /// takes nothing is, two intervals after it was last heard or one to two after it last took
    /// output. A peer inside a data frame with more than 64 KiB still to come is read on (a
    /// client that writes a large message before it reads its answers would otherwise block):
    /// reads of at most 64 KiB, as the runtimes' are, give no output there, and the frame's last
    /// 64 KiB waits for the mark. A batch's answers held until it is whole do not count (no write takes them under): a
    /// client holding them is held to `max_outbound`, as is one whose host reads regardless.
    pub pause_input_above: usize,
    /// Most entries in a JSON-RPC batch.
    pub max_batch: usize,
    /// Most calls in progress on one connection (handed to the host, not answered yet); a call past
    /// it is refused at once with JSON-RPC error `-32000`, so that a peer cannot make the engine and
    /// the host hold an unbounded number of them.
    pub max_pending_calls: usize,
    /// Interval between server pings; a peer silent for two intervals is dead. At most
    /// [`Limits::LONGEST`]; zero drops every connection at its first timer.
    pub ping_interval: Duration,
    /// Time to wait for the peer's Close after ours before dropping the connection.
    pub close_timeout: Duration,
    /// Most `at_mentioned` notifications queued while no client takes them (none is initialized,
    /// or none has room in its output).
    pub max_queued_mentions: usize,
    /// How long a queued `at_mentioned` stays deliverable.
    pub mention_ttl: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_head_bytes: 16 * 1024,
            max_headers: 64,
            handshake_timeout: Duration::from_secs(10),
            max_connections: 10,
            max_pending_handshakes: 64,
            max_message_size: 10 * 1024 * 1024,
            max_fragments: 4096,
            max_outbound: 64 * 1024 * 1024,
            max_outbound_total: 128 * 1024 * 1024,
            pause_input_above: 1024 * 1024,
            max_batch: 64,
            max_pending_calls: 256,
            ping_interval: Duration::from_secs(30),
            close_timeout: Duration::from_secs(5),
            max_queued_mentions: 32,
            mention_ttl: Duration::from_secs(300),
        }
    }
}

impl Limits {
    /// The longest a duration of these limits is taken as: about 100 years. A longer one (such
    /// as [`Duration::MAX`], to have no pings) is cut to it when a [`Server`](crate::Server) is
    /// made, so that a deadline computed from it stays within what an `Instant` holds.
    ///
    /// ```
    /// use claude_ide_bridge::{AuthToken, Config, Limits, Server};
    /// use std::time::Duration;
    /// let mut config = Config::new(AuthToken::from_string("secret"));
    /// config.limits.ping_interval = Duration::MAX;
    /// let server = Server::new(config);
    /// assert_eq!(server.config().limits.ping_interval, Limits::LONGEST);
    /// ```
    pub const LONGEST: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

    /// These limits with every duration held to [`Limits::LONGEST`].
    pub(crate) fn bounded(self) -> Self {
        let cut = |d: Duration| d.min(Self::LONGEST);
        Limits {
            handshake_timeout: cut(self.handshake_timeout),
            ping_interval: cut(self.ping_interval),
            close_timeout: cut(self.close_timeout),
            mention_ttl: cut(self.mention_ttl),
            ..self
        }
    }

    /// Limits for a conformance echo server: 16 MiB messages in up to 65,537 fragments.
    ///
    /// Autobahn's cases 9.3.1 and 9.4.1 send 4 MiB in 64-byte fragments and end with an empty
    /// final fragment (its sender only sets FIN once past the end), so 65,536 + 1 frames.
    pub fn conformance() -> Self {
        Limits {
            max_message_size: 16 * 1024 * 1024,
            max_fragments: 65_537,
            ..Limits::default()
        }
    }

    /// The WebSocket-layer subset of these limits.
    pub fn ws(&self) -> crate::ws::WsLimits {
        crate::ws::WsLimits {
            max_message_size: self.max_message_size,
            max_fragments: self.max_fragments,
            max_outbound: self.max_outbound,
        }
    }
}

/// The output queued for every connection at one moment, against
/// [`Limits::max_outbound_total`]: what decides whether a connection may queue more now.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pressure {
    /// Bytes queued for all connections.
    pub(crate) total: usize,
    /// How many connections hold queued output (live or closing): idle ones do not make the
    /// others' shares smaller, and one that the peer closed while it still holds output counts.
    pub(crate) holders: usize,
    pub(crate) max_total: usize,
}

impl Pressure {
    /// The least share a connection can have: with every connection live and holding output.
    /// Output that keeps a connection within it is not refused for the total.
    pub(crate) fn least_share(limits: &Limits) -> usize {
        limits.max_outbound_total / limits.max_connections.max(1)
    }

    /// The share of `max_outbound_total` of a connection that holds `own` bytes: the total
    /// divided by the connections holding output, itself among them.
    pub(crate) fn share(&self, own: usize) -> usize {
        let holders = self.holders + usize::from(own == 0);
        self.max_total / holders.max(1)
    }

    /// Whether `len` more bytes for a connection that holds `own` are refused: they take the
    /// total past `max_outbound_total` and the connection past its share.
    pub(crate) fn refuses(&self, own: usize, len: usize) -> bool {
        self.total.saturating_add(len) > self.max_total && own.saturating_add(len) > self.share(own)
    }
}
