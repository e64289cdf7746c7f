package jepsen

import (
	"fmt"
	"math/rand"
	"net/url"
	"time"
)

// faultKind names a fault the nemesis injects, or a recovery it runs.
type faultKind string

const (
	faultKill             faultKind = "kill-9"
	faultPause            faultKind = "pause"
	faultHardFailover     faultKind = "hard-failover"
	faultGracefulFailover faultKind = "graceful-failover"
	faultAutoFailover     faultKind = "auto-failover"
	faultPartition        faultKind = "partition"
	faultRebalanceIn      faultKind = "rebalance-in"
	faultRebalanceOut     faultKind = "rebalance-out"
	faultSwap             faultKind = "swap-rebalance"
	// Recoveries, counted with the faults: a failed-over node comes back by one of them.
	faultDeltaRecovery faultKind = "delta-recovery"
	faultFullRecovery  faultKind = "full-recovery"
)

// knownFault reports whether `kind` is a fault the scheduler draws.
func knownFault(kind faultKind) bool {
	switch kind {
	case faultKill, faultPause, faultHardFailover, faultGracefulFailover, faultAutoFailover, faultPartition,
		faultRebalanceIn, faultRebalanceOut, faultSwap:
		return true
	}
	return false
}

// partitionShape is how a partition splits the members.
type partitionShape int

const (
	isolateOne partitionShape = iota // one member cut from the others, both ways
	oneWay                           // what one member sends to the others is dropped
	halves                           // the members split in two halves (with four or more)
)

func (s partitionShape) String() string {
	return [...]string{"isolate-one", "one-way", "halves"}[s]
}

const minMembers = 3

// episode is one fault of the schedule, with every choice drawn from the seed beforehand, so that the same seed
// gives the same schedule.
type episode struct {
	kind faultKind
	// victim and other index the member list (or the spare list, for rebalance in) when the episode starts.
	victim, other int
	// hold is how long the fault lasts before it is healed.
	hold time.Duration
	// recovery is how a node that ends up failed over comes back: "delta" or "full".
	recovery string
	shape    partitionShape
	// byPause: an automatic failover provoked by SIGSTOP instead of kill -9.
	byPause bool
	// quiet is the pause after the episode, faults healed.
	quiet time.Duration
}

func (e episode) String() string {
	s := fmt.Sprintf("%s victim=%d other=%d hold=%.1fs recovery=%s", e.kind, e.victim, e.other, e.hold.Seconds(), e.recovery)
	if e.kind == faultPartition {
		s += " shape=" + e.shape.String()
	}
	if e.kind == faultAutoFailover && e.byPause {
		s += " by-pause"
	}
	return s
}

// scheduler draws episodes from a seed, tracking how many members and spares each leaves.
type scheduler struct {
	rng        *rand.Rand
	members    int
	spares     int
	maxMembers int
	partitions bool
	// omit: fault kinds left out of the schedule (SETTEE_JEPSEN_OMIT).
	omit map[faultKind]bool
}

func newScheduler(seed int64, members, spares, maxMembers int, partitions bool, omit map[faultKind]bool) *scheduler {
	return &scheduler{rng: rand.New(rand.NewSource(seed)), members: members, spares: spares, maxMembers: maxMembers,
		partitions: partitions, omit: omit}
}

// next draws the next episode. Every episode draws the same numbers, whatever its kind.
func (s *scheduler) next() episode {
	type weighted struct {
		kind   faultKind
		weight int
	}
	choices := []weighted{{faultKill, 3}, {faultPause, 2}, {faultHardFailover, 2}, {faultGracefulFailover, 1},
		{faultAutoFailover, 2}}
	if s.partitions {
		choices = append(choices, weighted{faultPartition, 3})
	}
	if s.spares > 0 && s.members < s.maxMembers {
		choices = append(choices, weighted{faultRebalanceIn, 1})
	}
	if s.members > minMembers {
		choices = append(choices, weighted{faultRebalanceOut, 1})
	}
	if s.spares > 0 {
		choices = append(choices, weighted{faultSwap, 1})
	}
	kept := choices[:0]
	for _, c := range choices {
		if !s.omit[c.kind] {
			kept = append(kept, c)
		}
	}
	if len(kept) == 0 {
		kept = append(kept, weighted{faultPause, 1})
	}
	choices = kept
	total := 0
	for _, c := range choices {
		total += c.weight
	}
	pick := s.rng.Intn(total)
	var kind faultKind
	for _, c := range choices {
		if pick < c.weight {
			kind = c.kind
			break
		}
		pick -= c.weight
	}
	e := episode{kind: kind, victim: s.rng.Intn(1 << 20), other: s.rng.Intn(1 << 20)}
	holdFraction := s.rng.Float64()
	e.recovery = [...]string{"delta", "full"}[s.rng.Intn(2)]
	e.shape = partitionShape(s.rng.Intn(3))
	e.byPause = s.rng.Intn(2) == 0
	e.quiet = time.Duration((1 + 2*s.rng.Float64()) * float64(time.Second))
	switch kind {
	case faultKill, faultPause, faultPartition:
		// From well under the auto-failover timeout (5 s) to well over it.
		e.hold = time.Duration((0.5 + 9.5*holdFraction) * float64(time.Second))
	default:
		e.hold = time.Duration((0.5 + 2.5*holdFraction) * float64(time.Second))
	}
	if kind == faultPartition && e.shape == halves && s.members < 4 {
		e.shape = isolateOne
	}
	switch kind {
	case faultRebalanceIn:
		e.victim %= s.spares
		s.spares--
		s.members++
	case faultRebalanceOut:
		e.victim %= s.members
		s.spares++
		s.members--
	case faultSwap:
		e.victim %= s.members
		e.other %= s.spares
	default:
		e.victim %= s.members
	}
	return e
}

// nemesis injects episodes into the cluster and heals them.
type nemesis struct {
	c      *cluster
	counts map[faultKind]int
}

func (n *nemesis) count(kind faultKind) {
	n.counts[kind]++
}

// run injects `e`, holds it, and heals the cluster back to every member active, healthy and balanced.
func (n *nemesis) run(e episode) {
	c := n.c
	members, spares := c.memberList(), c.spares()
	victim := members[e.victim%len(members)]
	var spare *node
	if len(spares) > 0 {
		spare = spares[e.victim%len(spares)]
		if e.kind == faultSwap {
			spare = spares[e.other%len(spares)]
		}
	}
	c.log("episode: %s (victim %s)", e, victim)
	switch e.kind {
	case faultKill:
		n.kill(victim, e.hold)
	case faultPause:
		n.pause(victim, e.hold)
	case faultHardFailover:
		n.failover(victim, e.hold, false)
	case faultGracefulFailover:
		n.failover(victim, e.hold, true)
	case faultAutoFailover:
		n.autoFailover(victim, e.byPause)
	case faultPartition:
		n.partition(members, victim, e.shape, e.hold)
	case faultRebalanceIn:
		if spare != nil {
			n.rebalanceIn(spare)
		}
	case faultRebalanceOut:
		if len(members) > minMembers {
			n.rebalanceOut(victim)
		}
	case faultSwap:
		if spare != nil {
			n.swap(spare, victim)
		}
	}
	n.heal(e.recovery)
	time.Sleep(e.quiet)
}

func (n *nemesis) kill(victim *node, hold time.Duration) {
	n.count(faultKill)
	if err := victim.kill(); err != nil {
		n.c.note("kill %s: %v", victim, err)
	}
	n.c.log("killed %s (kill -9); restart in %.1f s", victim, hold.Seconds())
	time.Sleep(hold)
	n.restart(victim)
}

func (n *nemesis) restart(victim *node) {
	if victim.running() {
		return
	}
	if err := victim.start(""); err != nil {
		n.c.problem(anomalyNoRecovery, "%s does not start again: %v", victim, err)
		return
	}
	n.c.log("restarted %s", victim)
}

func (n *nemesis) pause(victim *node, hold time.Duration) {
	n.count(faultPause)
	if err := victim.pause(); err != nil {
		n.c.note("pause %s: %v", victim, err)
		return
	}
	n.c.log("paused %s (SIGSTOP) for %.1f s", victim, hold.Seconds())
	time.Sleep(hold)
	if err := victim.resume(); err != nil {
		n.c.note("resume %s: %v", victim, err)
	}
	n.c.log("resumed %s (SIGCONT)", victim)
}

func (n *nemesis) failover(victim *node, hold time.Duration, graceful bool) {
	via, err := n.c.orchestrator(victim)
	if err != nil {
		n.c.note("failover of %s: %v", victim, err)
		return
	}
	kind, path := faultHardFailover, "/controller/failOver"
	if graceful {
		kind, path = faultGracefulFailover, "/controller/startGracefulFailover"
	}
	n.count(kind)
	if err := restPost(via, path, url.Values{"otpNode": {victim.otp()}}); err != nil {
		n.c.note("%s of %s refused: %v", kind, victim, err)
		return
	}
	n.c.log("%s of %s done", kind, victim)
	time.Sleep(hold)
}

// autoFailover stops `victim` (kill -9 or SIGSTOP) until the cluster fails it over by itself, then brings it back.
func (n *nemesis) autoFailover(victim *node, byPause bool) {
	n.count(faultAutoFailover)
	via, err := n.c.orchestrator(victim)
	if err != nil {
		n.c.note("auto-failover of %s: %v", victim, err)
		return
	}
	if byPause {
		err = victim.pause()
	} else {
		err = victim.kill()
	}
	if err != nil {
		n.c.note("stopping %s: %v", victim, err)
		return
	}
	n.c.log("%s %s; waiting for its automatic failover", map[bool]string{true: "paused", false: "killed"}[byPause], victim)
	started := time.Now()
	err = waitFor(45*time.Second, func() error {
		seen, err := membership(via)
		if err != nil {
			return err
		}
		if seen[victim.host].ClusterMembership != "inactiveFailed" {
			return fmt.Errorf("%s is %s", victim, seen[victim.host].ClusterMembership)
		}
		return nil
	})
	if err != nil {
		n.c.note("no automatic failover of %s within 45 s: %v", victim, err)
	} else {
		n.c.log("%s failed over automatically after %.1f s", victim, time.Since(started).Seconds())
	}
	if byPause {
		_ = victim.resume()
		n.c.log("resumed %s", victim)
	} else {
		n.restart(victim)
	}
}

func (n *nemesis) partition(members []*node, victim *node, shape partitionShape, hold time.Duration) {
	n.count(faultPartition)
	var side, rest []*node
	switch shape {
	case halves:
		side = []*node{victim}
		for _, m := range members {
			switch {
			case m == victim:
			case len(side) < len(members)/2:
				side = append(side, m)
			default:
				rest = append(rest, m)
			}
		}
	default:
		side = []*node{victim}
		for _, m := range members {
			if m != victim {
				rest = append(rest, m)
			}
		}
	}
	if err := isolate(side, rest, shape == oneWay); err != nil {
		n.c.note("partition: %v", err)
	}
	n.c.log("partition %s: %v | %v for %.1f s", shape, side, rest, hold.Seconds())
	time.Sleep(hold)
	if err := healPartitions(); err != nil {
		n.c.note("healing the partition: %v", err)
	}
	n.c.log("partition healed")
}

// join starts a spare as a new node joining the cluster through `via`.
func (n *nemesis) join(spare, via *node) bool {
	if err := spare.wipe(); err != nil {
		n.c.note("wiping %s: %v", spare, err)
	}
	if err := spare.start(via.mgmtAddr()); err != nil {
		n.c.problem(anomalyNoRecovery, "%s does not start: %v", spare, err)
		return false
	}
	n.c.members[spare] = true
	n.c.log("%s joined through %s", spare, via)
	return true
}

func (n *nemesis) rebalanceIn(spare *node) {
	n.count(faultRebalanceIn)
	via, err := n.c.orchestrator()
	if err != nil {
		n.c.note("rebalance in: %v", err)
		return
	}
	n.join(spare, via)
}

func (n *nemesis) rebalanceOut(victim *node) {
	n.count(faultRebalanceOut)
	n.leave(victim, nil)
}

func (n *nemesis) swap(spare, victim *node) {
	n.count(faultSwap)
	via, err := n.c.orchestrator(victim)
	if err != nil {
		n.c.note("swap: %v", err)
		return
	}
	if n.join(spare, via) {
		n.leave(victim, via)
	}
}

// leave rebalances `victim` out (with whatever else joined) and wipes it once it has left.
func (n *nemesis) leave(victim, via *node) {
	var err error
	if via == nil {
		if via, err = n.c.orchestrator(victim); err != nil {
			n.c.note("rebalance out: %v", err)
			return
		}
	}
	if err := n.c.waitHealthy(via, n.c.memberList(), healthyLimit); err != nil {
		n.c.note("before rebalancing %s out: %v", victim, err)
	}
	if err := n.c.rebalanceRetrying(via, []*node{victim}, "out "+victim.name); err != nil {
		return
	}
	n.c.members[victim] = false
	if err := victim.wipe(); err != nil {
		n.c.note("wiping %s: %v", victim, err)
	}
}
