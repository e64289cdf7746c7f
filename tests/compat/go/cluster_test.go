package compat

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

// rest sends one form POST to a node's management port with the administrator's credentials.
func rest(t *testing.T, s *setteeServer, path string, form url.Values) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("http://%s:%d%s", s.host, s.mgmtPort, path),
		strings.NewReader(form.Encode()))
	requireNoError(t, err, "request")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(adminUser, adminPassword)
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	requireNoError(t, err, "POST "+path)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s: %s %s", path, resp.Status, body)
	}
}

// TestClusterFollowsFailoverWithBriefNotifications runs three settee processes (127.0.0.21-23) with a bucket of
// one replica. gocb agrees brief cluster-map notifications (0x1f) and then stops polling, so after a hard
// failover it reaches the promoted replicas only through the server's push: every document stays readable with
// its value and majority writes work again.
func TestClusterFollowsFailoverWithBriefNotifications(t *testing.T) {
	var nodes []*setteeServer
	defer func() {
		for _, n := range nodes {
			n.stop()
		}
	}()
	for i := 0; i < 3; i++ {
		n, err := newServer("", false)
		requireNoError(t, err, "newServer")
		n.host = fmt.Sprintf("127.0.0.%d", 21+i)
		if i > 0 {
			n.extraArgs = []string{"--join", fmt.Sprintf("%s:%d", nodes[0].host, nodes[0].mgmtPort)}
		}
		requireNoError(t, n.start(), "start node")
		nodes = append(nodes, n)
	}
	rest(t, nodes[0], "/controller/rebalance",
		url.Values{"knownNodes": {"ns_1@127.0.0.21,ns_1@127.0.0.22,ns_1@127.0.0.23"}})
	// The rebalance runs in the background, as in Couchbase: wait for its task to end.
	waitUntil(t, 60*time.Second, "the rebalance to end", func() error {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s:%d/pools/default/tasks", nodes[0].host, nodes[0].mgmtPort), nil)
		req.SetBasicAuth(adminUser, adminPassword)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if strings.Contains(string(body), `"status":"running"`) {
			return errors.New("still running")
		}
		return nil
	})
	rest(t, nodes[0], "/pools/default/buckets", url.Values{"name": {"gocluster"}, "bucketType": {"couchbase"},
		"ramQuota": {"128"}, "replicaNumber": {"1"}})

	c, err := connectAs(nodes[0], "", adminUser, adminPassword)
	requireNoError(t, err, "Connect")
	defer c.Close(nil)
	b := c.Bucket("gocluster")
	requireNoError(t, b.WaitUntilReady(20*time.Second, nil), "WaitUntilReady")
	coll := b.DefaultCollection()
	majority := &gocb.UpsertOptions{DurabilityLevel: gocb.DurabilityLevelMajority}
	for i := 0; i < 200; i++ {
		_, err := coll.Upsert(fmt.Sprintf("doc-%d", i), map[string]int{"i": i}, majority)
		requireNoError(t, err, "majority Upsert")
	}
	waitUntil(t, 10*time.Second, "a replica read", func() error {
		_, err := coll.GetAnyReplica("doc-7", nil)
		return err
	})

	rest(t, nodes[0], "/controller/failOver", url.Values{"otpNode": {"ns_1@127.0.0.23"}})
	nodes[2].stop()
	for i := 0; i < 200; i++ {
		key := fmt.Sprintf("doc-%d", i)
		waitUntil(t, 15*time.Second, "reading "+key+" after the failover", func() error {
			r, err := coll.Get(key, &gocb.GetOptions{Timeout: 2 * time.Second})
			if err != nil {
				return err
			}
			var v map[string]int
			if err := r.Content(&v); err != nil {
				return err
			}
			if v["i"] != i {
				return errors.New("wrong value")
			}
			return nil
		})
	}
	waitUntil(t, 15*time.Second, "majority writes after the failover", func() error {
		for i := 0; i < 200; i++ {
			opts := &gocb.UpsertOptions{DurabilityLevel: gocb.DurabilityLevelMajority, Timeout: 2 * time.Second}
			if _, err := coll.Upsert(fmt.Sprintf("doc-%d", i), map[string]int{"i": -i}, opts); err != nil {
				return err
			}
		}
		return nil
	})
}
