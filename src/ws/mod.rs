//! (being written)

/// Limits of the WebSocket layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WsLimits {
    /// Largest message across all fragments.
    pub max_message_size: usize,
    /// Most fragments in one message.
    pub max_fragments: usize,
    /// Largest outbound queue.
    pub max_outbound: usize,
}
