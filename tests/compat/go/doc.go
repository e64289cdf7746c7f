// Package compat runs the official Couchbase Go SDK (gocb v2) against a real `settee server` process.
//
// TestMain (server_test.go) starts one server per `go test` run on free ports with a temporary data directory,
// waits for `GET /pools` to answer 200, and stops it with SIGTERM when the tests are done. Everything else talks to
// it only through gocb, and asserts Couchbase behaviour: values, CAS, and error kinds via errors.Is.
//
// Environment: SETTEE_BIN (server binary; default <repo>/target/debug/settee), SETTEE_COMPAT_DEFAULT_PORTS=1 (use
// 11210/8091/8093 and a port-less connection string), GOCB_VERBOSE=1 (gocb's verbose logger).
package compat
