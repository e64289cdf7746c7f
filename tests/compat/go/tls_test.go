package compat

import (
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

// startTLSServer starts a second server with its TLS ports on, on free ports.
func startTLSServer(t *testing.T) *setteeServer {
	s, err := newServer(bucketName, false)
	requireNoError(t, err, "newServer")
	ports, err := freePorts(3)
	requireNoError(t, err, "freePorts")
	s.kvTLSPort, s.mgmtTLSPort, s.queryTLSPort = ports[0], ports[1], ports[2]
	requireNoError(t, s.start(), "start tls server")
	t.Cleanup(func() {
		s.stop()
		_ = os.RemoveAll(s.dir)
	})
	return s
}

// servedCA fetches the node's CA as an operator would: GET /pools/default/certificate on the plain management port.
func servedCA(t *testing.T, s *setteeServer) []byte {
	req, err := http.NewRequest("GET", fmt.Sprintf("http://%s:%d/pools/default/certificate", s.host, s.mgmtPort), nil)
	requireNoError(t, err, "request")
	req.SetBasicAuth(adminUser, adminPassword)
	resp, err := http.DefaultClient.Do(req)
	requireNoError(t, err, "GET certificate")
	defer resp.Body.Close()
	pem, err := io.ReadAll(resp.Body)
	requireNoError(t, err, "read certificate")
	if resp.StatusCode != 200 || !strings.HasPrefix(string(pem), "-----BEGIN CERTIFICATE-----") {
		t.Fatalf("certificate: %d %q", resp.StatusCode, pem)
	}
	return pem
}

func tlsConnect(s *setteeServer, roots *x509.CertPool, timeout time.Duration) (*gocb.Cluster, error) {
	opts := clusterOptions(adminUser, adminPassword)
	opts.SecurityConfig = gocb.SecurityConfig{TLSRootCAs: roots}
	opts.TimeoutsConfig.KVTimeout = timeout
	opts.TimeoutsConfig.ConnectTimeout = timeout
	return gocb.Connect(fmt.Sprintf("couchbases://%s:%d", s.host, s.kvTLSPort), opts)
}

// gocb bootstraps over the KV TLS port trusting only the CA the node serves, then writes and reads a document
// and runs a query over the n1qlSSL port the config advertises.
func TestTLSWithTheServedCA(t *testing.T) {
	s := startTLSServer(t)
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(servedCA(t, s)) {
		t.Fatal("the served CA does not parse")
	}
	c, err := tlsConnect(s, roots, 5*time.Second)
	requireNoError(t, err, "Connect")
	defer c.Close(nil)
	b := c.Bucket(bucketName)
	requireNoError(t, b.WaitUntilReady(20*time.Second, nil), "WaitUntilReady")
	coll := b.DefaultCollection()
	_, err = coll.Upsert("tls-doc", map[string]string{"over": "tls"}, nil)
	requireNoError(t, err, "Upsert")
	got, err := coll.Get("tls-doc", nil)
	requireNoError(t, err, "Get")
	var doc map[string]string
	requireNoError(t, got.Content(&doc), "Content")
	if doc["over"] != "tls" {
		t.Fatalf("read back %v", doc)
	}
	rows, err := c.Query("SELECT 1 AS one", nil)
	requireNoError(t, err, "Query")
	var row map[string]int
	if !rows.Next() {
		t.Fatalf("no row: %v", rows.Err())
	}
	requireNoError(t, rows.Row(&row), "Row")
	if row["one"] != 1 {
		t.Fatalf("row %v", row)
	}
	requireNoError(t, rows.Close(), "rows.Close")
}

// A trust store without the node's CA cannot reach the data: certificate verification is real.
func TestTLSWithAnotherCAFails(t *testing.T) {
	s := startTLSServer(t)
	c, err := tlsConnect(s, x509.NewCertPool(), 2*time.Second)
	if err != nil {
		return // refused at once: good
	}
	defer c.Close(nil)
	_, err = c.Bucket(bucketName).DefaultCollection().Upsert("never", map[string]bool{"written": false}, nil)
	if err == nil {
		t.Fatal("an upsert succeeded through a TLS connection to a server whose CA the client does not trust")
	}
}
