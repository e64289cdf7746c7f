//! settee-dcp's integration tests: each module builds a state, applies events and checks the frames and decisions
//! that come out, through the real encoder and decoder.

mod consumer;
mod flow;
mod invariants;
mod noop;
mod pipeline;
mod producer;
mod support;
