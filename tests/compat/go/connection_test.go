package compat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

func kvRoundTrip(t *testing.T, c *gocb.Cluster, bucketName, key string) {
	t.Helper()
	b := c.Bucket(bucketName)
	requireNoError(t, b.WaitUntilReady(20*time.Second, nil), "Bucket.WaitUntilReady")
	coll := b.DefaultCollection()
	_, err := coll.Upsert(key, key, nil)
	requireNoError(t, err, "Upsert")
	res, err := coll.Get(key, nil)
	requireNoError(t, err, "Get")
	var v string
	requireNoError(t, res.Content(&v), "Content")
	if v != key {
		t.Fatalf("got %q want %q", v, key)
	}
	_, err = coll.Remove(key, nil)
	requireNoError(t, err, "Remove")
}

// Every connection-string form gocb accepts for an explicit KV port bootstraps and serves KV.
func TestConnectionStringForms(t *testing.T) {
	for name, tmpl := range map[string]string{
		"explicit-port":    "couchbase://127.0.0.1:%d",
		"port-and-options": "couchbase://127.0.0.1:%d?kv_pool_size=2&network=default&enable_mutation_tokens=true",
		"bucket-in-path":   "couchbase://127.0.0.1:%d/default",
	} {
		t.Run(name, func(t *testing.T) {
			c, err := connectAs(srv, fmt.Sprintf(tmpl, srv.kvPort), adminUser, adminPassword)
			requireNoError(t, err, "Connect")
			defer c.Close(nil)
			kvRoundTrip(t, c, bucketName, uniqueKey(t))
		})
	}
}

// Cluster-level WaitUntilReady for the management service passes (GET /whoami on the mgmt port must answer 200).
func TestClusterWaitUntilReadyMgmt(t *testing.T) {
	err := cluster.WaitUntilReady(20*time.Second, &gocb.WaitUntilReadyOptions{
		ServiceTypes: []gocb.ServiceType{gocb.ServiceTypeManagement},
	})
	requireNoError(t, err, "Cluster.WaitUntilReady")
	d, err := cluster.Diagnostics(nil)
	requireNoError(t, err, "Diagnostics")
	if d.State != gocb.ClusterStateOnline {
		t.Fatalf("cluster state %v, want online", d.State)
	}
}

// Bucket.WaitUntilReady passes and bucket ping reports KV OK on the server's KV port.
func TestBucketWaitUntilReadyAndPing(t *testing.T) {
	requireNoError(t, bucket.WaitUntilReady(20*time.Second, nil), "Bucket.WaitUntilReady")
	res, err := bucket.Ping(&gocb.PingOptions{ServiceTypes: []gocb.ServiceType{gocb.ServiceTypeKeyValue}})
	requireNoError(t, err, "Ping")
	reports := res.Services[gocb.ServiceTypeKeyValue]
	if len(reports) == 0 {
		t.Fatalf("no KV ping reports: %+v", res.Services)
	}
	for _, r := range reports {
		if r.State != gocb.PingStateOk || !strings.HasSuffix(r.Remote, ":"+strconv.Itoa(srv.kvPort)) {
			t.Fatalf("KV ping report %+v", r)
		}
	}
}

// Cluster ping of the management service reaches the mgmt port and answers OK.
func TestClusterPingManagement(t *testing.T) {
	res, err := cluster.Ping(&gocb.PingOptions{ServiceTypes: []gocb.ServiceType{gocb.ServiceTypeManagement}, Timeout: 10 * time.Second})
	requireNoError(t, err, "Ping")
	reports := res.Services[gocb.ServiceTypeManagement]
	if len(reports) == 0 {
		t.Fatalf("no mgmt ping reports: %+v", res.Services)
	}
	for _, r := range reports {
		if r.State != gocb.PingStateOk || !strings.Contains(r.Remote, strconv.Itoa(srv.mgmtPort)) {
			t.Fatalf("mgmt ping report %+v", r)
		}
	}
}

// A second server on other free ports with a non-default bucket name serves gocb and exits 0 on SIGTERM.
func TestSecondServerOtherPortsAndBucket(t *testing.T) {
	other, err := newServer("compat2", false)
	requireNoError(t, err, "newServer")
	// Runs last, after the server stopped and any failure printed its log tail.
	defer func() { _ = os.RemoveAll(other.dir) }()
	if other.kvPort == srv.kvPort || other.mgmtPort == srv.mgmtPort {
		t.Fatalf("second server reuses ports: %+v", other)
	}
	requireNoError(t, other.start(), "start second server")
	stopped := false
	defer func() {
		if !stopped {
			other.stop()
		}
	}()
	c, err := connectAs(other, "", adminUser, adminPassword)
	requireNoError(t, err, "Connect")
	kvRoundTrip(t, c, "compat2", uniqueKey(t))
	requireNoError(t, c.Close(nil), "Close")
	stopped = true
	if code := other.stop(); code != 0 {
		t.Fatalf("second server exited with %d on SIGTERM; log tail:\n%s", code, other.logTail())
	}
}
