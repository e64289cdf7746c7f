//! Integration tests: tiny `settee bench` runs against a node (or a cluster of two) in this process and, when it is
//! installed, a real memcached. They check the counts, errors and retries in the JSON result, never timings.

mod cluster;
mod memcached;
mod node;
mod query;
mod support;
