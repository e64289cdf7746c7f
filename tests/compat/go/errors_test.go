package compat

import (
	"bytes"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

const maxValueBytes = 20 * 1024 * 1024

// Insert of an existing key fails with ErrDocumentExists and leaves the document unchanged.
func TestInsertExistingReturnsDocumentExists(t *testing.T) {
	key := uniqueKey(t)
	_, err := collection.Upsert(key, 1, nil)
	requireNoError(t, err, "Upsert")
	_, err = collection.Insert(key, 2, nil)
	requireErrorIs(t, err, gocb.ErrDocumentExists, "Insert existing")
	res, err := collection.Get(key, nil)
	requireNoError(t, err, "Get")
	var v int
	requireNoError(t, res.Content(&v), "Content")
	if v != 1 {
		t.Fatalf("value changed to %d", v)
	}
}

// Replace and Remove with an outdated CAS fail with ErrCasMismatch.
func TestStaleCasReturnsCasMismatch(t *testing.T) {
	key := uniqueKey(t)
	old, err := collection.Upsert(key, 1, nil)
	requireNoError(t, err, "Upsert")
	_, err = collection.Upsert(key, 2, nil)
	requireNoError(t, err, "Upsert")
	_, err = collection.Replace(key, 3, &gocb.ReplaceOptions{Cas: old.Cas()})
	requireErrorIs(t, err, gocb.ErrCasMismatch, "Replace stale CAS")
	_, err = collection.Remove(key, &gocb.RemoveOptions{Cas: old.Cas()})
	requireErrorIs(t, err, gocb.ErrCasMismatch, "Remove stale CAS")
}

// Operations on a missing key fail with ErrDocumentNotFound.
func TestMissingDocumentReturnsDocumentNotFound(t *testing.T) {
	key := uniqueKey(t)
	_, err := collection.Get(key, nil)
	requireErrorIs(t, err, gocb.ErrDocumentNotFound, "Get")
	_, err = collection.Replace(key, 1, nil)
	requireErrorIs(t, err, gocb.ErrDocumentNotFound, "Replace")
	_, err = collection.Replace(key, 1, &gocb.ReplaceOptions{Cas: 1234})
	requireErrorIs(t, err, gocb.ErrDocumentNotFound, "Replace with CAS")
	_, err = collection.Remove(key, nil)
	requireErrorIs(t, err, gocb.ErrDocumentNotFound, "Remove")
	_, err = collection.Touch(key, time.Minute, nil)
	requireErrorIs(t, err, gocb.ErrDocumentNotFound, "Touch")
	_, err = collection.GetAndTouch(key, time.Minute, nil)
	requireErrorIs(t, err, gocb.ErrDocumentNotFound, "GetAndTouch")
	_, err = collection.GetAndLock(key, 5*time.Second, nil)
	requireErrorIs(t, err, gocb.ErrDocumentNotFound, "GetAndLock")
	err = collection.Unlock(key, 1234, nil)
	requireErrorIs(t, err, gocb.ErrDocumentNotFound, "Unlock")
	_, err = collection.LookupIn(key, []gocb.LookupInSpec{gocb.GetSpec("a", nil)}, nil)
	requireErrorIs(t, err, gocb.ErrDocumentNotFound, "LookupIn")
	_, err = collection.MutateIn(key, []gocb.MutateInSpec{gocb.UpsertSpec("a", 1, nil)}, nil)
	requireErrorIs(t, err, gocb.ErrDocumentNotFound, "MutateIn")
}

// An incompressible value of 20 MiB + 1 byte gets E2BIG → ErrValueTooLarge and is not stored.
func TestValueOver20MiBReturnsValueTooLarge(t *testing.T) {
	key := uniqueKey(t)
	payload := make([]byte, maxValueBytes+1)
	_, _ = rand.Read(payload)
	_, err := collection.Upsert(key, payload, &gocb.UpsertOptions{Transcoder: gocb.NewRawBinaryTranscoder(), Timeout: 30 * time.Second})
	requireErrorIs(t, err, gocb.ErrValueTooLarge, "Upsert 20 MiB + 1")
	ex, err := collection.Exists(key, nil)
	requireNoError(t, err, "Exists")
	if ex.Exists() {
		t.Fatal("oversized document was stored")
	}
}

// A highly compressible 20 MiB + 1 value is refused too: the limit applies to the inflated size even if the
// client sent it Snappy-compressed.
func TestCompressibleValueOver20MiBReturnsValueTooLarge(t *testing.T) {
	key := uniqueKey(t)
	payload := bytes.Repeat([]byte("z"), maxValueBytes+1)
	_, err := collection.Upsert(key, payload, &gocb.UpsertOptions{Transcoder: gocb.NewRawBinaryTranscoder(), Timeout: 30 * time.Second})
	requireErrorIs(t, err, gocb.ErrValueTooLarge, "Upsert compressible 20 MiB + 1")
}

// Exactly 20 MiB is the largest value Couchbase accepts.
func TestValueOfExactly20MiBAccepted(t *testing.T) {
	key := uniqueKey(t)
	payload := make([]byte, maxValueBytes)
	_, _ = rand.Read(payload)
	_, err := collection.Upsert(key, payload, &gocb.UpsertOptions{Transcoder: gocb.NewRawBinaryTranscoder(), Timeout: 30 * time.Second})
	requireNoError(t, err, "Upsert 20 MiB")
	res, err := collection.Get(key, &gocb.GetOptions{Transcoder: gocb.NewRawBinaryTranscoder(), Timeout: 30 * time.Second})
	requireNoError(t, err, "Get 20 MiB")
	var got []byte
	requireNoError(t, res.Content(&got), "Content")
	if !bytes.Equal(got, payload) {
		t.Fatalf("20 MiB payload changed (len %d)", len(got))
	}
	_, err = collection.Remove(key, nil)
	requireNoError(t, err, "Remove")
}

// A 251-byte key is refused with EINVAL → ErrInvalidArgument.
func TestKeyOf251BytesReturnsInvalidArgument(t *testing.T) {
	_, err := collection.Upsert(strings.Repeat("k", 251), 1, nil)
	requireErrorIs(t, err, gocb.ErrInvalidArgument, "Upsert 251-byte key")
}

// A wrong password fails SASL: WaitUntilReady reports an authentication failure rather than succeeding.
func TestWrongPasswordReturnsAuthenticationFailure(t *testing.T) {
	c, err := connectAs(srv, "", adminUser, "not-the-password")
	if err == nil {
		defer c.Close(nil)
		b := c.Bucket(bucketName)
		err = b.WaitUntilReady(5*time.Second, &gocb.WaitUntilReadyOptions{RetryStrategy: failFast{}})
		if err == nil {
			_, err = b.DefaultCollection().Get("anything", &gocb.GetOptions{Timeout: 3 * time.Second})
		}
	}
	if err == nil {
		t.Fatal("connected and operated with a wrong password")
	}
	t.Logf("wrong password: %v", err)
	if !errors.Is(err, gocb.ErrAuthenticationFailure) {
		t.Fatalf("expected ErrAuthenticationFailure, got %v", err)
	}
}
