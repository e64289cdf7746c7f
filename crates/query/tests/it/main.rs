//! The query crate's integration tests: the statement corpus over a generated dataset.

mod corpus;
mod dataset;
