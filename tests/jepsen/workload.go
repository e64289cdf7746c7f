package jepsen

import (
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"time"

	"github.com/couchbase/gocb/v2"
)

// The workload: clients doing reads, writes and compare-and-swaps on a few keys through the official Go SDK,
// every operation recorded in the history.

const (
	levelMajority          = "majority"
	levelPersistToMajority = "persistToMajority"
)

// keySpec is one key of the workload and the durability level all its writes use.
type keySpec struct {
	name  string
	level string
}

// workloadKeys are `count` keys, alternately written with `majority` and `persistToMajority`.
func workloadKeys(count int) []keySpec {
	keys := make([]keySpec, count)
	for i := range keys {
		level := levelMajority
		if i%2 == 1 {
			level = levelPersistToMajority
		}
		keys[i] = keySpec{name: fmt.Sprintf("jepsen-%02d", i), level: level}
	}
	return keys
}

func durability(level string) gocb.DurabilityLevel {
	if level == levelPersistToMajority {
		return gocb.DurabilityLevelPersistToMajority
	}
	return gocb.DurabilityLevelMajority
}

// document is what every key holds.
type document struct {
	V int64 `json:"v"`
}

// workloadConfig shapes the clients.
type workloadConfig struct {
	workers      int
	readTimeout  time.Duration
	writeTimeout time.Duration
	// think is the pause between two operations of a client (keeps the cluster's CPUs for the cluster).
	think time.Duration
}

// workload runs the clients until stopped.
type workload struct {
	cfg        workloadConfig
	collection *gocb.Collection
	keys       []keySpec
	history    *history
	stop       chan struct{}
	wg         sync.WaitGroup
}

func startWorkload(cfg workloadConfig, collection *gocb.Collection, keys []keySpec, h *history, seed int64) *workload {
	w := &workload{cfg: cfg, collection: collection, keys: keys, history: h, stop: make(chan struct{})}
	for c := 0; c < cfg.workers; c++ {
		w.wg.Add(1)
		go w.client(c, rand.New(rand.NewSource(seed+int64(c)+1)))
	}
	return w
}

// halt stops the clients and waits for their operations in flight.
func (w *workload) halt() {
	close(w.stop)
	w.wg.Wait()
}

func (w *workload) stopped() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// client is one client's loop: a random key, then a read (40 %), an upsert (30 %) or a read followed by a CAS
// replace with the CAS it read (30 %).
func (w *workload) client(id int, rng *rand.Rand) {
	defer w.wg.Done()
	for !w.stopped() {
		key := w.keys[rng.Intn(len(w.keys))]
		var more bool
		switch p := rng.Float64(); {
		case p < 0.4:
			_, _, more = w.read(id, key)
		case p < 0.7:
			more = w.write(id, key)
		default:
			more = w.cas(id, key)
		}
		if !more {
			return
		}
		select {
		case <-w.stop:
			return
		case <-time.After(time.Duration(rng.Int63n(int64(w.cfg.think) + 1))):
		}
	}
}

// read records a GET; returns the value and CAS read, whether it returned one, and whether the history has room.
func (w *workload) read(client int, key keySpec) (int64, gocb.Cas, bool) {
	o := w.history.begin(client, key.name, key.level, opRead, 0, 0)
	if o == nil {
		return 0, 0, false
	}
	value, cas, err := get(w.collection, key.name, w.cfg.readTimeout)
	if err != nil {
		w.history.end(o, outcomeFailed, 0, err)
		return 0, 0, true
	}
	w.history.end(o, outcomeOK, value, nil)
	return value, cas, true
}

// get reads a key's value and CAS from its active; a key without a document reads as absentValue (CAS 0).
func get(collection *gocb.Collection, key string, timeout time.Duration) (int64, gocb.Cas, error) {
	res, err := collection.Get(key, &gocb.GetOptions{Timeout: timeout})
	if errors.Is(err, gocb.ErrDocumentNotFound) {
		return absentValue, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	var doc document
	if err := res.Content(&doc); err != nil {
		return 0, 0, err
	}
	return doc.V, res.Cas(), nil
}

func (w *workload) write(client int, key keySpec) bool {
	value := w.history.uniqueValue()
	o := w.history.begin(client, key.name, key.level, opWrite, value, 0)
	if o == nil {
		return false
	}
	_, err := w.collection.Upsert(key.name, document{V: value}, &gocb.UpsertOptions{
		DurabilityLevel: durability(key.level), Timeout: w.cfg.writeTimeout})
	w.history.end(o, writeOutcome(err), 0, err)
	return true
}

func (w *workload) cas(client int, key keySpec) bool {
	expect, cas, more := w.read(client, key)
	if !more {
		return false
	}
	if cas == 0 {
		return true
	}
	value := w.history.uniqueValue()
	o := w.history.begin(client, key.name, key.level, opCAS, value, expect)
	if o == nil {
		return false
	}
	_, err := w.collection.Replace(key.name, document{V: value}, &gocb.ReplaceOptions{
		Cas: cas, DurabilityLevel: durability(key.level), Timeout: w.cfg.writeTimeout})
	w.history.end(o, writeOutcome(err), 0, err)
	return true
}

// writeOutcome classifies a write's error. Only refusals that the server sends before it applies anything are
// definite; every other error (timeouts, SYNC_WRITE_AMBIGUOUS, a connection lost with the request in flight,
// internal errors) may hide an applied write, now or later.
func writeOutcome(err error) outcome {
	switch {
	case err == nil:
		return outcomeOK
	case errors.Is(err, gocb.ErrCasMismatch):
		return outcomeMismatch
	case errors.Is(err, gocb.ErrDurabilityImpossible),
		errors.Is(err, gocb.ErrDocumentNotFound),
		errors.Is(err, gocb.ErrDocumentExists),
		errors.Is(err, gocb.ErrValueTooLarge):
		return outcomeFailed
	default:
		return outcomeUnknown
	}
}

// shortError is an error's first line, without gocb's JSON context.
func shortError(err error) string {
	s := err.Error()
	if i := strings.Index(s, " | {"); i > 0 {
		s = s[:i]
	}
	return s
}
