//! Integration tests: tiny `settee bench` runs against a node in this process and, when it is installed, a real
//! memcached. They check the counts and errors in the JSON result, never timings.

mod memcached;
mod node;
mod support;
