//! The receiving side of [`super::HttpTransport`]: `/settee/raft/...` endpoints that hand each message to the local
//! [`MetadataStore`] and answer its typed result as JSON (always HTTP 200 once the body parsed; a refusal is data).
//! Authentication is the mounting server's job: it puts this router behind its admin auth layer.

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, State};
use axum::routing::post;
use axum::{Json, Router};

use super::rpc::*;
use super::{path, MemberRequest, Proposed};
use crate::metadata::MetaCommand;
use crate::store::{ConsensusError, MetadataStore, ProposeError};
use crate::vbmap::NodeId;

/// Largest request body accepted: an append of many entries that each carry a whole vBucket map.
const BODY_BYTES_MAX: usize = 64 << 20;

type Store = State<Arc<MetadataStore>>;

/// The Raft endpoints of `store`, to be mounted on the management port.
pub fn raft_router(store: Arc<MetadataStore>) -> Router {
    Router::new()
        .route(path::APPEND, post(append))
        .route(path::VOTE, post(vote))
        .route(path::SNAPSHOT, post(snapshot))
        .route(path::PROPOSE, post(propose))
        .route(path::ADD_MEMBER, post(add_member))
        .route(path::REMOVE_MEMBER, post(remove_member))
        .route(path::READ_INDEX, post(read_index))
        .layer(DefaultBodyLimit::max(BODY_BYTES_MAX))
        .with_state(store)
}

async fn append(
    State(store): Store,
    Json(req): Json<AppendEntriesRequest>,
) -> Json<Result<AppendEntriesResponse, RaftError>> {
    Json(store.handle_append_entries(req).await)
}

async fn vote(State(store): Store, Json(req): Json<VoteRequest>) -> Json<Result<VoteResponse, RaftError>> {
    Json(store.handle_vote(req).await)
}

async fn snapshot(
    State(store): Store,
    Json(req): Json<InstallSnapshotRequest>,
) -> Json<Result<InstallSnapshotResponse, RaftError<InstallSnapshotError>>> {
    Json(store.handle_install_snapshot(req).await)
}

async fn propose(State(store): Store, Json(cmd): Json<MetaCommand>) -> Json<Result<Proposed, ProposeError>> {
    Json(store.handle_propose(cmd).await)
}

async fn add_member(State(store): Store, Json(req): Json<MemberRequest>) -> Json<Result<(), ConsensusError>> {
    Json(store.handle_add_member(req).await)
}

async fn remove_member(State(store): Store, Json(id): Json<NodeId>) -> Json<Result<(), ConsensusError>> {
    Json(store.handle_remove_member(id).await)
}

async fn read_index(State(store): Store) -> Json<Result<Option<u64>, ConsensusError>> {
    Json(store.handle_read_index().await)
}
