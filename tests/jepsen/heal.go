package jepsen

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"
)

// heal brings the cluster back to its resting state: no partition, every member running, every member active
// (a failed-over one recovered the episode's way, delta or full), healthy and balanced, and auto-failover's count
// reset so that the next episode may use it again. What cannot be brought back is an anomaly.
func (n *nemesis) heal(recovery string) {
	c := n.c
	if partitionsUnavailable == "" {
		if err := healPartitions(); err != nil {
			c.note("healing partitions: %v", err)
		}
	}
	members := c.memberList()
	for _, m := range members {
		if m.paused {
			_ = m.resume()
			c.log("resumed %s", m)
		}
		n.restart(m)
	}
	via, err := c.orchestrator()
	if err != nil {
		c.problem(anomalyNoRecovery, "after healing: %v", err)
		return
	}
	if err := c.waitHealthy(via, members, healthyLimit); err != nil {
		c.problem(anomalyNoRecovery, "members not healthy %s after healing: %v", healthyLimit, err)
		return
	}
	// A node that just restarted may still show the membership of before its crash (a failover decided while it
	// was down not yet applied): decide from a view every member shares.
	if err := c.waitAgreement(members, agreementLimit); err != nil {
		c.note("members' views differ after %s: %v", agreementLimit, err)
	}
	state, err := poolOf(via)
	if err != nil {
		c.problem(anomalyNoRecovery, "after healing: %v", err)
		return
	}
	needed := !state.Balanced
	var failed []string
	for _, p := range state.Nodes {
		if p.ClusterMembership == "inactiveFailed" {
			failed = append(failed, p.Hostname)
		}
	}
	if len(failed) > 1 {
		// One fault at a time, healed before the next, and auto-failover's maxCount is 1: a second failed-over node
		// is a failover nobody asked for (or one past maxCount).
		c.problem(anomalyExtraFailover, "%d nodes failed over after one fault (auto-failover maxCount 1): %v",
			len(failed), failed)
	}
	for _, p := range state.Nodes {
		switch p.ClusterMembership {
		case "inactiveFailed":
			needed = true
			kind := map[string]faultKind{"delta": faultDeltaRecovery, "full": faultFullRecovery}[recovery]
			err := restPost(via, "/controller/setRecoveryType", url.Values{"otpNode": {p.OtpNode}, "recoveryType": {recovery}})
			if err != nil {
				c.note("setRecoveryType %s %s: %v", p.OtpNode, recovery, err)
				continue
			}
			n.count(kind)
			c.log("%s marked for %s recovery", p.Hostname, recovery)
		case "inactiveAdded":
			needed = true
		}
	}
	if needed {
		_ = c.rebalanceRetrying(via, nil, "heal")
	}
	if err := restPost(via, "/settings/autoFailover/resetCount", url.Values{}); err != nil {
		c.note("resetting the auto-failover count: %v", err)
	}
}

// rebalanceRetrying runs a rebalance, trying again (up to three times in all) after a refusal or a failure: a
// rebalance right after a fault may meet a node not yet seen again. Three failures are an anomaly.
func (c *cluster) rebalanceRetrying(via *node, ejected []*node, what string) error {
	var errs []string
	for attempt := 1; attempt <= 3; attempt++ {
		err := c.rebalance(via, ejected, what)
		if err == nil {
			return nil
		}
		c.note("rebalance (%s), attempt %d: %v", what, attempt, err)
		errs = append(errs, err.Error())
		time.Sleep(2 * time.Second)
		if err := c.waitHealthy(via, c.memberList(), healthyLimit); err != nil {
			c.note("before retrying the rebalance: %v", err)
		}
	}
	c.problem(anomalyRebalanceFailed, "rebalance (%s) failed three times: %s", what, strings.Join(errs, "; "))
	return fmt.Errorf("rebalance (%s) failed", what)
}

// agreementLimit is how long the members get to agree on the cluster's membership after a fault.
const agreementLimit = 20 * time.Second

// waitAgreement waits until every member reports the same membership of every node.
func (c *cluster) waitAgreement(members []*node, limit time.Duration) error {
	return waitFor(limit, func() error {
		var first string
		for i, m := range members {
			seen, err := membership(m)
			if err != nil {
				return err
			}
			view := make([]string, 0, len(seen))
			for host, p := range seen {
				view = append(view, host+"="+p.ClusterMembership)
			}
			sort.Strings(view)
			joined := strings.Join(view, " ")
			if i == 0 {
				first = joined
			} else if joined != first {
				return fmt.Errorf("%s sees %s, %s sees %s", members[0], first, m, joined)
			}
		}
		return nil
	})
}
