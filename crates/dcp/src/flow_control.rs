//! DCP flow control (flow-control.md), per connection: the consumer advertises a buffer size with the control
//! `connection_buffer_size`, the producer stops sending while the bytes it sent and the consumer has not yet
//! acknowledged reach that size, and the consumer returns space with BUFFER_ACKNOWLEDGEMENT. Every frame but a
//! NOOP counts, header included.

use settee_mcbp::dcp::BufferAck;

/// The producer side: how much the consumer still has to acknowledge.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowControl {
    /// 0: no flow control.
    buffer_bytes: u32,
    unacked_bytes: u64,
}

impl FlowControl {
    /// No flow control until the consumer sets a buffer size.
    pub fn new() -> FlowControl {
        FlowControl::default()
    }

    pub fn set_buffer_size(&mut self, bytes: u32) {
        self.buffer_bytes = bytes;
    }

    pub fn buffer_size(&self) -> u32 {
        self.buffer_bytes
    }

    pub fn unacked_bytes(&self) -> u64 {
        self.unacked_bytes
    }

    /// Whether the next frame may go out. Like Couchbase, a frame goes out while any space is left, even if it is
    /// larger than that space: a consumer must accept one frame beyond its buffer.
    pub fn can_send(&self) -> bool {
        self.buffer_bytes == 0 || self.unacked_bytes < u64::from(self.buffer_bytes)
    }

    /// Counts a frame handed to the connection.
    pub fn sent(&mut self, frame_bytes: usize) {
        self.unacked_bytes = self.unacked_bytes.saturating_add(frame_bytes as u64);
    }

    /// Releases acknowledged bytes. An over-acknowledgement (Couchbase consumers ack two extra bytes per prepare,
    /// MB-46634) saturates at zero rather than wrapping.
    pub fn acked(&mut self, bytes: u32) {
        self.unacked_bytes = self.unacked_bytes.saturating_sub(u64::from(bytes));
    }
}

/// The consumer side: counts the bytes the driver has finished with and says when to acknowledge them. It
/// acknowledges once half the buffer is consumed, so the producer never stalls on a full window while the consumer
/// is keeping up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConsumerFlowControl {
    buffer_bytes: u32,
    consumed_bytes: u64,
}

impl ConsumerFlowControl {
    /// `buffer_bytes` is what the consumer advertised with `connection_buffer_size`; 0 disables acknowledgements.
    pub fn new(buffer_bytes: u32) -> ConsumerFlowControl {
        ConsumerFlowControl { buffer_bytes, consumed_bytes: 0 }
    }

    /// Counts a frame (header included) the driver has applied. NOOPs must not be counted.
    pub fn consumed(&mut self, frame_bytes: usize) {
        self.consumed_bytes = self.consumed_bytes.saturating_add(frame_bytes as u64);
    }

    /// The acknowledgement to send now, if half the buffer has been consumed since the last one. A consumer that
    /// consumed more than 4 GiB between calls acknowledges in several messages.
    pub fn take_ack(&mut self, opaque: u32) -> Option<BufferAck> {
        let threshold = u64::from(self.buffer_bytes / 2).max(1);
        if self.buffer_bytes == 0 || self.consumed_bytes < threshold {
            return None;
        }
        let bytes = u32::try_from(self.consumed_bytes).unwrap_or(u32::MAX);
        self.consumed_bytes -= u64::from(bytes);
        Some(BufferAck { opaque, bytes })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With a 100-byte buffer, sending stops once 100 unacked bytes are out and resumes after an ack.
    #[test]
    fn producer_window_blocks_and_reopens() {
        let mut flow = FlowControl::new();
        flow.sent(1_000_000);
        assert!(flow.can_send(), "no buffer size means no flow control");
        flow = FlowControl::new();
        flow.set_buffer_size(100);
        flow.sent(60);
        assert!(flow.can_send());
        flow.sent(60);
        assert!(!flow.can_send());
        flow.acked(30);
        assert!(flow.can_send());
        flow.acked(1000);
        assert_eq!(flow.unacked_bytes(), 0);
    }

    /// The consumer acknowledges at half its buffer, everything consumed so far, and never with buffer size 0.
    #[test]
    fn consumer_acks_at_half_the_buffer() {
        let mut flow = ConsumerFlowControl::new(100);
        flow.consumed(49);
        assert_eq!(flow.take_ack(0), None);
        flow.consumed(2);
        assert_eq!(flow.take_ack(0), Some(BufferAck { opaque: 0, bytes: 51 }));
        assert_eq!(flow.take_ack(0), None);
        let mut off = ConsumerFlowControl::new(0);
        off.consumed(1 << 20);
        assert_eq!(off.take_ack(0), None);
    }
}
