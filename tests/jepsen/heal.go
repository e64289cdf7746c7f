package jepsen

import (
	"fmt"
	"net/url"
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
	state, err := poolOf(via)
	if err != nil {
		c.problem(anomalyNoRecovery, "after healing: %v", err)
		return
	}
	needed := !state.Balanced
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
