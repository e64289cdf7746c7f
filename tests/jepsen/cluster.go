package jepsen

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"
)

const (
	bucketName = "jepsen"
	// rebalanceLimit: a rebalance still running after this long is hung (every wait inside one is bounded well
	// below it).
	rebalanceLimit = 4 * time.Minute
	// healthyLimit: how long nodes get to look healthy to each other again after a fault is healed.
	healthyLimit = 60 * time.Second
)

// event is one entry of the run's timeline: a fault injected or healed, a rebalance, a problem.
type event struct {
	at   int64 // nanoseconds since the run started
	what string
}

// cluster is the run's view of the nodes: which slots are members (active or failed over), which are spares
// (stopped, no data), and what happened to them (the timeline, anomalies and notes).
type cluster struct {
	nodes   []*node
	members map[*node]bool
	started time.Time

	mu        sync.Mutex
	timeline  []event
	anomalies []anomaly
	// notes are observations that are not anomalies (a refused auto-failover, a rebalance that failed while a
	// fault was active).
	notes []string
}

func (c *cluster) now() int64 { return int64(time.Since(c.started)) }

// log records an event on the timeline and prints it.
func (c *cluster) log(format string, args ...any) {
	e := event{at: c.now(), what: fmt.Sprintf(format, args...)}
	c.mu.Lock()
	c.timeline = append(c.timeline, e)
	c.mu.Unlock()
	fmt.Printf("[%7.2fs] %s\n", float64(e.at)/1e9, e.what)
}

// note records an observation that is not an anomaly.
func (c *cluster) note(format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	c.log("note: %s", text)
	c.mu.Lock()
	c.notes = append(c.notes, text)
	c.mu.Unlock()
}

// problem records an anomaly found while the run goes on (availability: rebalances, recovery).
func (c *cluster) problem(kind anomalyKind, format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	c.log("ANOMALY %s: %s", kind, text)
	c.mu.Lock()
	c.anomalies = append(c.anomalies, anomaly{kind: kind, detail: text, at: c.now()})
	c.mu.Unlock()
}

// memberList is the members in slot order.
func (c *cluster) memberList() []*node {
	var out []*node
	for _, n := range c.nodes {
		if c.members[n] {
			out = append(out, n)
		}
	}
	return out
}

func (c *cluster) spares() []*node {
	var out []*node
	for _, n := range c.nodes {
		if !c.members[n] {
			out = append(out, n)
		}
	}
	return out
}

// orchestrator is a member that answers management calls and is not excluded (the victim of a fault).
func (c *cluster) orchestrator(exclude ...*node) (*node, error) {
	skip := map[*node]bool{}
	for _, n := range exclude {
		skip[n] = true
	}
	for _, n := range c.memberList() {
		if skip[n] || !n.running() || n.paused {
			continue
		}
		if _, err := poolNodes(n); err == nil {
			return n, nil
		}
	}
	return nil, errors.New("no member answers management calls")
}

// membership is each member's `clusterMembership` and `status` as `via` sees them, by host.
func membership(via *node) (map[string]poolNode, error) {
	nodes, err := poolNodes(via)
	if err != nil {
		return nil, err
	}
	out := map[string]poolNode{}
	for _, p := range nodes {
		out[strings.Split(p.Hostname, ":")[0]] = p
	}
	return out, nil
}

// waitFor polls `check` every 200 ms until it returns nil or `limit` passes; the last error then.
func waitFor(limit time.Duration, check func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitHealthy waits until `via` sees every one of `nodes` healthy (a rebalance with an unhealthy node is refused).
func (c *cluster) waitHealthy(via *node, nodes []*node, limit time.Duration) error {
	return waitFor(limit, func() error {
		seen, err := membership(via)
		if err != nil {
			return err
		}
		for _, n := range nodes {
			if p, ok := seen[n.host]; !ok || p.Status != "healthy" {
				return fmt.Errorf("%s is %q as %s sees it", n, p.Status, via)
			}
		}
		return nil
	})
}

// rebalance starts a rebalance on `via` ejecting `ejected` and waits for its end. A refusal or failure is
// returned; one still running after rebalanceLimit is stopped and reported as hung.
func (c *cluster) rebalance(via *node, ejected []*node, what string) error {
	names := make([]string, 0, len(ejected))
	for _, n := range ejected {
		names = append(names, n.otp())
	}
	known := make([]string, 0, len(c.nodes))
	for _, n := range c.memberList() {
		known = append(known, n.otp())
	}
	sort.Strings(known)
	c.log("rebalance (%s) via %s, ejecting %v", what, via, names)
	started := time.Now()
	err := restPost(via, "/controller/rebalance", url.Values{
		"knownNodes": {strings.Join(known, ",")}, "ejectedNodes": {strings.Join(names, ",")}})
	if err != nil {
		return fmt.Errorf("rebalance refused: %w", err)
	}
	for time.Since(started) < rebalanceLimit {
		task, err := rebalanceStatus(via)
		if err == nil && task.Status != "running" {
			if task.ErrorMessage != "" {
				return fmt.Errorf("rebalance failed after %.1f s: %s", time.Since(started).Seconds(), task.ErrorMessage)
			}
			c.log("rebalance (%s) done in %.1f s (%d moves)", what, time.Since(started).Seconds(), task.MovesDone)
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	task, _ := rebalanceStatus(via)
	c.problem(anomalyRebalanceHung, "rebalance (%s) still running after %s: %d of %d moves, progress %.1f %%",
		what, rebalanceLimit, task.MovesDone, task.MovesTotal, task.Progress)
	_ = restPost(via, "/controller/stopRebalance", url.Values{})
	_ = waitFor(time.Minute, func() error {
		if t, err := rebalanceStatus(via); err != nil || t.Status == "running" {
			return errors.New("still running")
		}
		return nil
	})
	return errors.New("rebalance hung")
}

// form starts the first `members` slots, rebalances them into one cluster, creates the bucket (one replica) and
// turns auto-failover on with its shortest timeout.
func (c *cluster) form(members int) error {
	first := c.nodes[0]
	for i, n := range c.nodes[:members] {
		seed := ""
		if i > 0 {
			seed = first.mgmtAddr()
		}
		if err := n.start(seed); err != nil {
			return err
		}
		c.members[n] = true
	}
	if err := c.waitHealthy(first, c.memberList(), healthyLimit); err != nil {
		return err
	}
	if err := c.rebalance(first, nil, "formation"); err != nil {
		return err
	}
	err := restPost(first, "/pools/default/buckets", url.Values{"name": {bucketName}, "bucketType": {"couchbase"},
		"ramQuota": {"128"}, "replicaNumber": {"1"}})
	if err != nil {
		return err
	}
	return restPost(first, "/settings/autoFailover", url.Values{"enabled": {"true"}, "timeout": {"5"}, "maxCount": {"1"}})
}

// stopAll stops every process (resuming paused ones first) and removes the partition rules.
func (c *cluster) stopAll() {
	if partitionsUnavailable == "" {
		_ = healPartitions()
	}
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Add(1)
		go func(n *node) {
			defer wg.Done()
			n.stop()
		}(n)
	}
	wg.Wait()
}
