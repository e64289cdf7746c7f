//! Integration tests of the metadata store: real openraft, real files in temporary directories, stores talking
//! through the real HTTP transport on 127.0.0.1. One module per topic.

mod fixture;
mod membership;
mod recovery;
mod replication;
mod versions;
