//! The query crate's integration tests: the statement corpus over a generated dataset, the planner's choices for
//! it, and operator-level tests.

mod corpus;
mod dataset;
mod operators;
mod pushdown;
