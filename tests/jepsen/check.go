package jepsen

import (
	"fmt"
	"math"
	"time"

	"github.com/anishathalye/porcupine"
)

// anomalyKind names what went wrong.
type anomalyKind string

const (
	// Safety, from the history.
	anomalyLostWrite       anomalyKind = "lost-acknowledged-write"
	anomalyNonLinearizable anomalyKind = "linearizability-violation"
	anomalyStaleRead       anomalyKind = "stale-read"
	anomalyPhantomValue    anomalyKind = "phantom-value"
	anomalyRefusedApplied  anomalyKind = "refused-write-applied"
	// Safety, from the nodes at the end.
	anomalyReplicaDivergence anomalyKind = "replica-divergence"
	anomalySeqnoDivergence   anomalyKind = "seqno-divergence"
	// Availability.
	anomalyRebalanceHung     anomalyKind = "rebalance-hung"
	anomalyRebalanceFailed   anomalyKind = "rebalance-failed"
	anomalyNoRecovery        anomalyKind = "no-recovery"
	anomalyPersistenceFailed anomalyKind = "persistence-failed"
	anomalyKVUnresponsive    anomalyKind = "kv-unresponsive"
	anomalyServerLog         anomalyKind = "server-log"
	// Control plane: more nodes failed over than the fault explains (auto-failover's maxCount is 1).
	anomalyExtraFailover anomalyKind = "extra-failover"
)

// anomaly is one finding.
type anomaly struct {
	kind   anomalyKind
	key    string
	level  string
	detail string
	// at: when it showed (nanoseconds since the run started), for the timeline; -1 when unknown.
	at int64
	// ops: the operations that show it, printed with the key's history.
	ops []op
}

func (a anomaly) String() string {
	s := string(a.kind)
	if a.key != "" {
		s += fmt.Sprintf(" on %s (%s)", a.key, a.level)
	}
	return s + ": " + a.detail
}

// writersOf maps each value written to a key to the operation that wrote (or tried to write) it.
func writersOf(ops []op) map[int64]op {
	out := map[int64]op{}
	for _, o := range ops {
		if o.kind != opRead {
			out[o.value] = o
		}
	}
	return out
}

// definitelyBefore reports whether the write of `x` (nil: the initial value) took effect before `w` was invoked:
// it was acknowledged before `w` began. A write of unknown outcome may take effect at any time after its call,
// so it is never definitely before anything.
func definitelyBefore(x *op, w op) bool {
	if x == nil {
		return true
	}
	return x.outcome == outcomeOK && x.ret < w.call
}

// checkValues finds, in one key's operations, the anomalies that show without a linearizability search:
//   - a read (or the final read, `final`) that returned a value nobody wrote (phantom), the value of a write the
//     server refused, or no document at all (the preloaded document lost);
//   - a stale read: a read returning a value that an acknowledged write had replaced before the read began (the
//     value's own write completed before that write was invoked);
//   - a lost acknowledged write: a write acknowledged before the final read began, whose value the final read
//     does not return although the final value's write completed before it began, so that write vanished.
func checkValues(key, level string, ops []op, final *op) []anomaly {
	writers := writersOf(ops)
	var acked []op
	for _, o := range ops {
		if o.acknowledged() {
			acked = append(acked, o)
		}
	}
	var out []anomaly
	writerOf := func(r op) (*op, bool) {
		if w, ok := writers[r.value]; ok {
			if w.outcome == outcomeFailed || w.outcome == outcomeMismatch {
				out = append(out, anomaly{kind: anomalyRefusedApplied, key: key, level: level, at: r.ret,
					detail: fmt.Sprintf("read #%d returned %d, written by #%d which the server refused", r.id, r.value, w.id),
					ops:    []op{w, r}})
			}
			return &w, true
		}
		if r.value == initialValue {
			return nil, true
		}
		if r.value == absentValue {
			out = append(out, anomaly{kind: anomalyLostWrite, key: key, level: level, at: r.ret,
				detail: fmt.Sprintf("read #%d found no document: the key's acknowledged document is gone", r.id),
				ops:    []op{r}})
			return nil, false
		}
		out = append(out, anomaly{kind: anomalyPhantomValue, key: key, level: level, at: r.ret,
			detail: fmt.Sprintf("read #%d returned %d, which no operation wrote", r.id, r.value), ops: []op{r}})
		return nil, false
	}
	for _, r := range ops {
		if r.kind != opRead || r.outcome != outcomeOK {
			continue
		}
		x, known := writerOf(r)
		if !known {
			continue
		}
		for _, w := range acked {
			if w.value != r.value && w.ret < r.call && definitelyBefore(x, w) {
				out = append(out, anomaly{kind: anomalyStaleRead, key: key, level: level, at: r.call,
					detail: fmt.Sprintf("read #%d at %s returned %d, but write #%d of %d was acknowledged at %s, after that value",
						r.id, fmtTime(r.call), r.value, w.id, w.value, fmtTime(w.ret)),
					ops: opsOf(x, w, r)})
				break
			}
		}
	}
	if final == nil {
		return out
	}
	x, known := writerOf(*final)
	if !known {
		return out
	}
	for _, w := range acked {
		if w.value != final.value && w.ret < final.call && definitelyBefore(x, w) {
			out = append(out, anomaly{kind: anomalyLostWrite, key: key, level: level, at: w.ret,
				detail: fmt.Sprintf("write #%d of %d acknowledged at %s (%s) is gone: the key holds %d, written before it",
					w.id, w.value, fmtTime(w.ret), level, final.value),
				ops: opsOf(x, w, *final)})
		}
	}
	return out
}

func opsOf(x *op, rest ...op) []op {
	if x == nil {
		return rest
	}
	return append([]op{*x}, rest...)
}

// linearizability is the porcupine verdict for one key.
type linearizability struct {
	result porcupine.CheckResult
	info   porcupine.LinearizationInfo
	took   time.Duration
}

// checkLinearizable searches a linearization of one key's operations (register and CAS model), giving up after
// `timeout` (result Unknown).
func checkLinearizable(ops []op, timeout time.Duration) linearizability {
	started := time.Now()
	result, info := porcupine.CheckOperationsVerbose(registerModel, porcupineOps(ops), timeout)
	return linearizability{result: result, info: info, took: time.Since(started)}
}

// unknownCount is how many of `ops` are writes of unknown outcome (what makes the search expensive).
func unknownCount(ops []op) int {
	n := 0
	for _, o := range ops {
		if o.kind != opRead && o.outcome == outcomeUnknown {
			n++
		}
	}
	return n
}

// window is the operations of `ops` that overlap [from, to]: the context printed with an anomaly.
func window(ops []op, from, to int64) []op {
	var out []op
	for _, o := range ops {
		ret := o.ret
		if o.outcome == outcomeUnknown || ret < 0 {
			ret = math.MaxInt64
		}
		if o.call <= to && ret >= from {
			out = append(out, o)
		}
	}
	return out
}
