package compat

import (
	"errors"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

const (
	shortTTL         = 2 * time.Second
	expiryDeadline   = 15 * time.Second
	lockedCas        = gocb.Cas(0xFFFFFFFFFFFFFFFF)
	expiryToleration = 2 * time.Minute
)

func expiryTime(t *testing.T, key string) time.Time {
	t.Helper()
	res, err := collection.Get(key, &gocb.GetOptions{WithExpiry: true})
	requireNoError(t, err, "Get WithExpiry")
	return res.ExpiryTime()
}

func requireNear(t *testing.T, got, want time.Time, what string) {
	t.Helper()
	d := got.Sub(want)
	if d < -expiryToleration || d > expiryToleration {
		t.Fatalf("%s = %v, want about %v (off by %v)", what, got, want, d)
	}
}

func documentGone(key string) error {
	_, err := collection.Get(key, nil)
	if errors.Is(err, gocb.ErrDocumentNotFound) {
		return nil
	}
	if err == nil {
		return errors.New("document still readable")
	}
	return err
}

// A document with a 2 s TTL is readable at once and then disappears.
func TestShortExpiryRemovesDocument(t *testing.T) {
	key := uniqueKey(t)
	_, err := collection.Upsert(key, 1, &gocb.UpsertOptions{Expiry: shortTTL})
	requireNoError(t, err, "Upsert with TTL")
	_, err = collection.Get(key, nil)
	requireNoError(t, err, "Get right after upsert")
	waitUntil(t, expiryDeadline, "the 2 s document to expire", func() error { return documentGone(key) })
}

// An expiry beyond 30 days is sent as absolute Unix time; the document stays and reports that time.
func TestAbsoluteExpiryBeyond30DaysKeepsDocument(t *testing.T) {
	key := uniqueKey(t)
	_, err := collection.Upsert(key, 1, &gocb.UpsertOptions{Expiry: 40 * 24 * time.Hour})
	requireNoError(t, err, "Upsert 40 days")
	requireNear(t, expiryTime(t, key), time.Now().Add(40*24*time.Hour), "expiry")
}

// A document without expiry reports no expiry time.
func TestNoExpiryReportsZero(t *testing.T) {
	key := uniqueKey(t)
	_, err := collection.Upsert(key, 1, nil)
	requireNoError(t, err, "Upsert")
	res, err := collection.Get(key, &gocb.GetOptions{WithExpiry: true})
	requireNoError(t, err, "Get WithExpiry")
	if exp := res.Expiry(); exp != nil && *exp != 0 {
		t.Fatalf("expiry = %v, want none", *exp)
	}
}

// Touch sets a TTL on an existing document (new CAS) and the document then expires.
func TestTouchSetsExpiry(t *testing.T) {
	key := uniqueKey(t)
	m, err := collection.Upsert(key, 1, nil)
	requireNoError(t, err, "Upsert")
	tr, err := collection.Touch(key, shortTTL, nil)
	requireNoError(t, err, "Touch")
	if tr.Cas() == 0 || tr.Cas() == m.Cas() {
		t.Fatalf("Touch CAS %d (before %d)", tr.Cas(), m.Cas())
	}
	waitUntil(t, expiryDeadline, "the touched document to expire", func() error { return documentGone(key) })
}

// GetAndTouch returns the value and moves the expiry.
func TestGetAndTouchReturnsValueAndSetsExpiry(t *testing.T) {
	key := uniqueKey(t)
	_, err := collection.Upsert(key, 7, nil)
	requireNoError(t, err, "Upsert")
	res, err := collection.GetAndTouch(key, 3*time.Hour, nil)
	requireNoError(t, err, "GetAndTouch")
	var v int
	requireNoError(t, res.Content(&v), "Content")
	if v != 7 {
		t.Fatalf("GetAndTouch value %d", v)
	}
	requireNear(t, expiryTime(t, key), time.Now().Add(3*time.Hour), "expiry")
}

// Replace with PreserveExpiry keeps the TTL; without it the TTL is cleared.
func TestReplacePreserveExpiry(t *testing.T) {
	key := uniqueKey(t)
	_, err := collection.Upsert(key, 1, &gocb.UpsertOptions{Expiry: time.Hour})
	requireNoError(t, err, "Upsert")
	before := expiryTime(t, key)
	_, err = collection.Replace(key, 2, &gocb.ReplaceOptions{PreserveExpiry: true})
	requireNoError(t, err, "Replace PreserveExpiry")
	after := expiryTime(t, key)
	if d := after.Sub(before); d < -2*time.Second || d > 2*time.Second {
		t.Fatalf("expiry moved from %v to %v", before, after)
	}
	_, err = collection.Replace(key, 3, nil)
	requireNoError(t, err, "Replace")
	res, err := collection.Get(key, &gocb.GetOptions{WithExpiry: true})
	requireNoError(t, err, "Get")
	if exp := res.Expiry(); exp != nil && *exp != 0 {
		t.Fatalf("plain replace kept expiry %v", *exp)
	}
}

// GetAndLock returns the value and a lock CAS; a second lock and writers get ErrDocumentLocked; Unlock releases.
func TestGetAndLockBlocksUntilUnlock(t *testing.T) {
	key := uniqueKey(t)
	m, err := collection.Upsert(key, 1, nil)
	requireNoError(t, err, "Upsert")
	locked, err := collection.GetAndLock(key, 15*time.Second, nil)
	requireNoError(t, err, "GetAndLock")
	if locked.Cas() == 0 || locked.Cas() == m.Cas() || locked.Cas() == lockedCas {
		t.Fatalf("lock CAS %d (upsert CAS %d)", locked.Cas(), m.Cas())
	}
	_, err = collection.GetAndLock(key, 15*time.Second, &gocb.GetAndLockOptions{RetryStrategy: failFast{}})
	requireErrorIs(t, err, gocb.ErrDocumentLocked, "second GetAndLock")
	_, err = collection.Upsert(key, 2, &gocb.UpsertOptions{RetryStrategy: failFast{}})
	requireErrorIs(t, err, gocb.ErrDocumentLocked, "Upsert while locked")

	got, err := collection.Get(key, nil)
	requireNoError(t, err, "Get while locked")
	if got.Cas() != lockedCas {
		t.Fatalf("Get of a locked doc returned CAS %#x, want 0xffffffffffffffff", uint64(got.Cas()))
	}

	requireNoError(t, collection.Unlock(key, locked.Cas(), nil), "Unlock")
	_, err = collection.Upsert(key, 3, nil)
	requireNoError(t, err, "Upsert after Unlock")
}

// With the default retry strategy a write to a locked document retries LOCKED until it times out.
func TestLockedWriteRetriesUntilTimeout(t *testing.T) {
	key := uniqueKey(t)
	_, err := collection.Upsert(key, 1, nil)
	requireNoError(t, err, "Upsert")
	locked, err := collection.GetAndLock(key, 15*time.Second, nil)
	requireNoError(t, err, "GetAndLock")
	defer collection.Unlock(key, locked.Cas(), nil)
	_, err = collection.Upsert(key, 2, &gocb.UpsertOptions{Timeout: time.Second})
	requireErrorIs(t, err, gocb.ErrTimeout, "Upsert while locked")
	var te *gocb.TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("not a TimeoutError: %v", err)
	}
	found := false
	for _, r := range te.RetryReasons {
		if r == gocb.KVLockedRetryReason {
			found = true
		}
	}
	if !found {
		t.Fatalf("retry reasons %v lack KV_LOCKED", te.RetryReasons)
	}
}

// A mutation carrying the lock CAS is allowed and releases the lock.
func TestReplaceWithLockCasUnlocks(t *testing.T) {
	key := uniqueKey(t)
	_, err := collection.Upsert(key, 1, nil)
	requireNoError(t, err, "Upsert")
	locked, err := collection.GetAndLock(key, 15*time.Second, nil)
	requireNoError(t, err, "GetAndLock")
	_, err = collection.Replace(key, 2, &gocb.ReplaceOptions{Cas: locked.Cas()})
	requireNoError(t, err, "Replace with lock CAS")
	_, err = collection.Upsert(key, 3, &gocb.UpsertOptions{RetryStrategy: failFast{}})
	requireNoError(t, err, "Upsert after the locking replace")
}

// Unlock with the wrong CAS fails with ErrCasMismatch; unlocking an unlocked document with ErrDocumentNotLocked.
func TestUnlockErrors(t *testing.T) {
	key := uniqueKey(t)
	m, err := collection.Upsert(key, 1, nil)
	requireNoError(t, err, "Upsert")
	err = collection.Unlock(key, m.Cas(), &gocb.UnlockOptions{RetryStrategy: failFast{}})
	requireErrorIs(t, err, gocb.ErrDocumentNotLocked, "Unlock of unlocked doc")

	locked, err := collection.GetAndLock(key, 15*time.Second, nil)
	requireNoError(t, err, "GetAndLock")
	err = collection.Unlock(key, locked.Cas()+1, &gocb.UnlockOptions{RetryStrategy: failFast{}})
	requireErrorIs(t, err, gocb.ErrCasMismatch, "Unlock with wrong CAS")
	requireNoError(t, collection.Unlock(key, locked.Cas(), nil), "Unlock")
}

// A 2 s lock expires by itself.
func TestLockExpires(t *testing.T) {
	key := uniqueKey(t)
	_, err := collection.Upsert(key, 1, nil)
	requireNoError(t, err, "Upsert")
	_, err = collection.GetAndLock(key, 2*time.Second, nil)
	requireNoError(t, err, "GetAndLock")
	_, err = collection.Upsert(key, 2, &gocb.UpsertOptions{RetryStrategy: failFast{}})
	requireErrorIs(t, err, gocb.ErrDocumentLocked, "Upsert while locked")
	waitUntil(t, expiryDeadline, "the 2 s lock to expire", func() error {
		_, err := collection.Upsert(key, 3, &gocb.UpsertOptions{RetryStrategy: failFast{}})
		return err
	})
}
