//! openraft's network traits over a [`RaftTransport`]: one [`PeerClient`] per target node, turning transport
//! failures into the RPC errors openraft reacts to (back off from an unreachable peer, split an append that is too
//! large or too slow).

use std::sync::Arc;

use openraft::error::{
    InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::BasicNode;

use crate::transport::rpc::*;
use crate::transport::{RaftTransport, TransportError, TypeConfig};
use crate::vbmap::NodeId;

/// HTTP status a receiver answers when a request body is over its limit.
const PAYLOAD_TOO_LARGE: u16 = 413;

pub(crate) struct Network {
    transport: Arc<dyn RaftTransport>,
}

impl Network {
    pub(crate) fn new(transport: Arc<dyn RaftTransport>) -> Network {
        Network { transport }
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = PeerClient;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> PeerClient {
        PeerClient { target, addr: node.addr.clone(), transport: self.transport.clone() }
    }
}

pub(crate) struct PeerClient {
    target: NodeId,
    addr: String,
    transport: Arc<dyn RaftTransport>,
}

type RpcResult<T, E = openraft::error::Infallible> = Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>;

impl PeerClient {
    // openraft's RPCError is large, and its RaftNetwork trait fixes it as the error type.
    #[allow(clippy::result_large_err)]
    fn finish<T, E: std::error::Error>(
        &self,
        reply: Result<Result<T, RaftError<NodeId, E>>, TransportError>,
    ) -> RpcResult<T, E> {
        match reply {
            Ok(Ok(answer)) => Ok(answer),
            Ok(Err(refusal)) => Err(RPCError::RemoteError(RemoteError::new(self.target, refusal))),
            Err(e @ TransportError::Connect { .. }) => Err(RPCError::Unreachable(Unreachable::new(&e))),
            Err(e) => Err(RPCError::Network(NetworkError::new(&e))),
        }
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse> {
        let entries = rpc.entries.len() as u64;
        // openraft drops an append at its deadline and sends the same entries again, so a batch the peer cannot
        // take in time (a loaded machine, a slow disk) would fail forever. A batch gets three quarters of the
        // deadline; if that runs out, openraft is told to send half as many for a while.
        let timeout = if entries > 1 { option.soft_ttl() } else { option.hard_ttl() };
        let reply = self.transport.append_entries(&self.addr, rpc, timeout).await;
        match &reply {
            Err(TransportError::Status { code: PAYLOAD_TOO_LARGE, .. }) if entries > 1 => {}
            Err(TransportError::Timeout) if entries > 1 => {
                tracing::info!(target = self.target, entries, "append timed out; sending fewer entries at a time");
            }
            _ => return self.finish(reply),
        }
        Err(RPCError::PayloadTooLarge(PayloadTooLarge::new_entries_hint((entries / 2).max(1))))
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse, InstallSnapshotError> {
        let reply = self.transport.install_snapshot(&self.addr, rpc, option.hard_ttl()).await;
        self.finish(reply)
    }

    async fn vote(&mut self, rpc: VoteRequest, option: RPCOption) -> RpcResult<VoteResponse> {
        let reply = self.transport.vote(&self.addr, rpc, option.hard_ttl()).await;
        self.finish(reply)
    }
}
