// Package jepsen is settee's black-box checker (issue 21, item 3): a Jepsen-style test that runs a cluster of
// real `settee server` processes, drives concurrent reads, writes and compare-and-swaps on a small key set through
// the official Go SDK (gocb) with `majority` and `persistToMajority` durability, injects faults, and checks the
// recorded history.
//
// One run:
//
//  1. starts NodesMax processes on 127.0.0.11, .12, ... (free ports, their own data directories), forms a cluster
//     of the first Members of them, creates a couchbase bucket with one replica and turns auto-failover on with a
//     5 s timeout;
//  2. runs Workers clients on Keys keys (half of them written with `majority`, half with `persistToMajority`),
//     recording the invocation and completion of every operation (history.go); an outcome the client cannot be
//     sure of (a timeout, SYNC_WRITE_AMBIGUOUS, a connection lost after sending) is recorded as possibly applied;
//  3. meanwhile a nemesis (nemesis.go), scheduled from the run's seed, injects one fault at a time and heals it:
//     kill -9 and restart, SIGSTOP/SIGCONT pauses, hard failover, automatic failover, delta and full recovery,
//     rebalance in, rebalance out, swap rebalance, and network partitions between nodes (partition.go);
//  4. heals everything, waits for the cluster to settle, and checks (check.go, divergence.go): acknowledged writes
//     lost (per durability level), linearizability of every key's history (porcupine with a register and CAS
//     model, model.go), stale reads (a read older than a write acknowledged before it began), replica divergence
//     (each vBucket's active and replica high seqnos, each key's value and CAS on its active and its replica) and
//     availability (rebalances that fail or never end, buckets whose persistence failed, nodes whose KV service
//     stops answering, panics in the logs).
//
// The summary (report.go) lists operations, faults injected by kind and anomalies by kind; on an anomaly it prints
// the seed and the history of the failing key, and the run's logs are kept.
//
// Partitions need the nodes' node-to-node connections to come from their own address (`settee server
// --bind-peer-connections`) and a network namespace of the test's own, where routing rules drop the traffic
// between two addresses (`ip rule ... blackhole`); the test re-executes itself in a new network namespace when it
// may (root), and otherwise runs without partitions, saying so.
//
// Run: `go test -count=1 -run TestBlackBox` (one short run), or `scripts/jepsen.sh RUNS SECONDS [SEED]` for long
// ones. SETTEE_BIN names the binary (default: the workspace's target/debug/settee); SETTEE_JEPSEN_OMIT lists fault
// kinds to leave out (CI's run, in scripts/test-compat.sh, has every kind).
// What the checker verifies, its figures and its findings are in docs/reliability.md.
package jepsen
