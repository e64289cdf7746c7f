//! The query crate's integration tests: the statement corpus over a generated dataset, and the planner's choices
//! for it.

mod corpus;
mod dataset;
mod pushdown;
