//! The query crate's integration tests: the statement corpus over a generated dataset, and operator-level tests.

mod corpus;
mod dataset;
mod operators;
