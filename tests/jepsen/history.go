package jepsen

import (
	"fmt"
	"sync"
	"time"
)

// opKind is what a client asked for.
type opKind int

const (
	opRead  opKind = iota // GET from the active
	opWrite               // UPSERT with the key's durability level
	opCAS                 // REPLACE with the CAS of a value read just before, with the key's durability level
)

func (k opKind) String() string {
	return [...]string{"read", "write", "cas"}[k]
}

// outcome is what the client learnt of an operation.
type outcome int

const (
	// outcomeOK: the read returned a value, or the write was acknowledged at its durability level.
	outcomeOK outcome = iota
	// outcomeFailed: the server refused it (definitely not applied), or a read that returned nothing.
	outcomeFailed
	// outcomeMismatch: a CAS refused because the document had changed (not applied).
	outcomeMismatch
	// outcomeUnknown: a write that may or may not have been applied, now or later (a timeout,
	// SYNC_WRITE_AMBIGUOUS, a connection lost after the request went out).
	outcomeUnknown
)

func (o outcome) String() string {
	return [...]string{"ok", "failed", "mismatch", "unknown"}[o]
}

// initialValue is what every key holds (acknowledged) before the history starts.
const initialValue int64 = 0

// absentValue is what a read records when the key holds no document (KEY_ENOENT): every key is preloaded and never
// deleted, so no write produces it and a read returning it shows an acknowledged document lost.
const absentValue int64 = -1

// op is one operation of the history. Times are nanoseconds since the run started (monotonic).
type op struct {
	id     int
	client int
	key    string
	level  string
	kind   opKind
	// value: for a read the value it returned; for a write or CAS the value written (unique in the run).
	value int64
	// expect: for a CAS, the value read with the CAS token it sent.
	expect  int64
	call    int64
	ret     int64
	outcome outcome
	err     string
}

func (o *op) String() string {
	var what string
	switch o.kind {
	case opRead:
		what = fmt.Sprintf("read -> %d", o.value)
		if o.outcome != outcomeOK {
			what = "read"
		} else if o.value == absentValue {
			what = "read -> no document"
		}
	case opWrite:
		what = fmt.Sprintf("write %d", o.value)
	case opCAS:
		what = fmt.Sprintf("cas %d -> %d", o.expect, o.value)
	}
	s := fmt.Sprintf("#%d client %d [%s, %s] %s: %s", o.id, o.client, fmtTime(o.call), fmtTime(o.ret), what, o.outcome)
	if o.err != "" {
		s += " (" + o.err + ")"
	}
	return s
}

func fmtTime(ns int64) string {
	return fmt.Sprintf("%.3fs", float64(ns)/1e9)
}

// acknowledged reports whether the client was told the operation's write took effect.
func (o *op) acknowledged() bool {
	return o.kind != opRead && o.outcome == outcomeOK
}

// history records operations as clients invoke and complete them. Its size is bounded by opsMax: past it, begin
// refuses new operations and the workload stops.
type history struct {
	mu      sync.Mutex
	start   time.Time
	ops     []*op
	opsMax  int
	nextVal int64
}

func newHistory(start time.Time, opsMax int) *history {
	return &history{start: start, opsMax: opsMax, nextVal: initialValue + 1}
}

func (h *history) now() int64 { return int64(time.Since(h.start)) }

// uniqueValue is a value no other write of the run uses.
func (h *history) uniqueValue() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	v := h.nextVal
	h.nextVal++
	return v
}

// begin records an invocation; nil once the history is full.
func (h *history) begin(client int, key, level string, kind opKind, value, expect int64) *op {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.ops) >= h.opsMax {
		return nil
	}
	o := &op{id: len(h.ops), client: client, key: key, level: level, kind: kind, value: value, expect: expect,
		call: int64(time.Since(h.start)), ret: -1}
	h.ops = append(h.ops, o)
	return o
}

// end records a completion.
func (h *history) end(o *op, result outcome, value int64, err error) {
	ret := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	o.ret, o.outcome = ret, result
	if o.kind == opRead {
		o.value = value
	}
	if err != nil {
		o.err = shortError(err)
	}
}

// snapshot copies every operation so far. One still open counts as not completed: a read as failed (it observed
// nothing), a write as possibly applied.
func (h *history) snapshot() []op {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]op, len(h.ops))
	for i, o := range h.ops {
		out[i] = *o
		if o.ret < 0 {
			out[i].outcome = outcomeUnknown
			if o.kind == opRead {
				out[i].outcome = outcomeFailed
			}
		}
	}
	return out
}

// byKey groups operations by key, in invocation order.
func byKey(ops []op) map[string][]op {
	out := map[string][]op{}
	for _, o := range ops {
		out[o.key] = append(out[o.key], o)
	}
	return out
}
