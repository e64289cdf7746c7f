package compat

import (
	"testing"

	"github.com/couchbase/gocb/v2"
)

func getRaw(t *testing.T, key string) []byte {
	t.Helper()
	res, err := collection.Get(key, &gocb.GetOptions{Transcoder: gocb.NewRawBinaryTranscoder()})
	requireNoError(t, err, "Get raw")
	var b []byte
	requireNoError(t, res.Content(&b), "Content")
	return b
}

// Increment with an initial value creates the counter at that value, then adds the delta on later calls.
func TestIncrementWithInitial(t *testing.T) {
	key := uniqueKey(t)
	r, err := collection.Binary().Increment(key, &gocb.IncrementOptions{Initial: 10, Delta: 5})
	requireNoError(t, err, "Increment create")
	if r.Content() != 10 || r.Cas() == 0 {
		t.Fatalf("created counter = %d cas %d, want 10", r.Content(), r.Cas())
	}
	r2, err := collection.Binary().Increment(key, &gocb.IncrementOptions{Initial: -1, Delta: 5})
	requireNoError(t, err, "Increment")
	if r2.Content() != 15 || r2.Cas() == r.Cas() {
		t.Fatalf("counter = %d, want 15 (cas %d -> %d)", r2.Content(), r.Cas(), r2.Cas())
	}
	res, err := collection.Get(key, nil)
	requireNoError(t, err, "Get")
	var n int
	requireNoError(t, res.Content(&n), "Content")
	if n != 15 {
		t.Fatalf("stored counter %d", n)
	}
}

// Increment/Decrement without an initial value (Initial < 0) on a missing key fail with ErrDocumentNotFound.
func TestCounterWithoutInitialReturnsNotFound(t *testing.T) {
	key := uniqueKey(t)
	_, err := collection.Binary().Increment(key, &gocb.IncrementOptions{Initial: -1, Delta: 1})
	requireErrorIs(t, err, gocb.ErrDocumentNotFound, "Increment")
	_, err = collection.Binary().Decrement(key, &gocb.DecrementOptions{Initial: -1, Delta: 1})
	requireErrorIs(t, err, gocb.ErrDocumentNotFound, "Decrement")
	ex, err := collection.Exists(key, nil)
	requireNoError(t, err, "Exists")
	if ex.Exists() {
		t.Fatal("counter was created without an initial value")
	}
}

// Decrement subtracts and floors at zero.
func TestDecrementFloorsAtZero(t *testing.T) {
	key := uniqueKey(t)
	r, err := collection.Binary().Decrement(key, &gocb.DecrementOptions{Initial: 100, Delta: 1})
	requireNoError(t, err, "Decrement create")
	if r.Content() != 100 {
		t.Fatalf("created at %d", r.Content())
	}
	r, err = collection.Binary().Decrement(key, &gocb.DecrementOptions{Initial: -1, Delta: 30})
	requireNoError(t, err, "Decrement")
	if r.Content() != 70 {
		t.Fatalf("after -30: %d", r.Content())
	}
	r, err = collection.Binary().Decrement(key, &gocb.DecrementOptions{Initial: -1, Delta: 1000})
	requireNoError(t, err, "Decrement below zero")
	if r.Content() != 0 {
		t.Fatalf("decrement below zero gave %d, want 0", r.Content())
	}
}

// Counters are unsigned 64-bit and wrap at 2^64.
func TestIncrementWrapsAt2Pow64(t *testing.T) {
	key := uniqueKey(t)
	_, err := collection.Upsert(key, "18446744073709551615", &gocb.UpsertOptions{Transcoder: gocb.NewRawStringTranscoder()})
	requireNoError(t, err, "Upsert max")
	r, err := collection.Binary().Increment(key, &gocb.IncrementOptions{Initial: -1, Delta: 1})
	requireNoError(t, err, "Increment")
	if r.Content() != 0 {
		t.Fatalf("2^64-1 + 1 = %d, want 0", r.Content())
	}
}

// Incrementing a non-numeric document fails with ErrDeltaInvalid.
func TestIncrementNonNumericReturnsDeltaInvalid(t *testing.T) {
	key := uniqueKey(t)
	_, err := collection.Upsert(key, map[string]string{"not": "a number"}, nil)
	requireNoError(t, err, "Upsert")
	_, err = collection.Binary().Increment(key, &gocb.IncrementOptions{Initial: -1, Delta: 1})
	requireErrorIs(t, err, gocb.ErrDeltaInvalid, "Increment non-numeric")
}

// Append and Prepend concatenate bytes and return new CASes.
func TestAppendPrepend(t *testing.T) {
	key := uniqueKey(t)
	m, err := collection.Upsert(key, []byte("middle"), &gocb.UpsertOptions{Transcoder: gocb.NewRawBinaryTranscoder()})
	requireNoError(t, err, "Upsert")
	a, err := collection.Binary().Append(key, []byte("-end"), nil)
	requireNoError(t, err, "Append")
	p, err := collection.Binary().Prepend(key, []byte("start-"), nil)
	requireNoError(t, err, "Prepend")
	if a.Cas() == m.Cas() || p.Cas() == a.Cas() || p.Cas() == 0 {
		t.Fatalf("CAS did not change: %d %d %d", m.Cas(), a.Cas(), p.Cas())
	}
	if got := string(getRaw(t, key)); got != "start-middle-end" {
		t.Fatalf("got %q", got)
	}
}

// Append with a stale CAS fails with ErrCasMismatch; on a missing key with ErrDocumentNotFound.
func TestAppendErrors(t *testing.T) {
	key := uniqueKey(t)
	_, err := collection.Binary().Append(key, []byte("x"), nil)
	requireErrorIs(t, err, gocb.ErrDocumentNotFound, "Append missing")
	_, err = collection.Binary().Prepend(key, []byte("x"), nil)
	requireErrorIs(t, err, gocb.ErrDocumentNotFound, "Prepend missing")

	old, err := collection.Upsert(key, []byte("a"), &gocb.UpsertOptions{Transcoder: gocb.NewRawBinaryTranscoder()})
	requireNoError(t, err, "Upsert")
	_, err = collection.Upsert(key, []byte("b"), &gocb.UpsertOptions{Transcoder: gocb.NewRawBinaryTranscoder()})
	requireNoError(t, err, "Upsert")
	_, err = collection.Binary().Append(key, []byte("c"), &gocb.AppendOptions{Cas: old.Cas()})
	requireErrorIs(t, err, gocb.ErrCasMismatch, "Append stale CAS")
	if got := string(getRaw(t, key)); got != "b" {
		t.Fatalf("value changed to %q", got)
	}
}
