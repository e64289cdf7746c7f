package compat

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

type sofa struct {
	Name  string   `json:"name"`
	Seats int      `json:"seats"`
	Tags  []string `json:"tags"`
}

var aSofa = sofa{Name: "settee", Seats: 3, Tags: []string{"red", "velvet"}}

func getSofa(t *testing.T, c *gocb.Collection, key string) (sofa, gocb.Cas) {
	t.Helper()
	res, err := c.Get(key, nil)
	requireNoError(t, err, "Get")
	var s sofa
	requireNoError(t, res.Content(&s), "Content")
	return s, res.Cas()
}

// Upsert stores the value and Get returns it with the same CAS.
func TestUpsertThenGetReturnsValueAndCas(t *testing.T) {
	key := uniqueKey(t)
	mut, err := collection.Upsert(key, aSofa, nil)
	requireNoError(t, err, "Upsert")
	if mut.Cas() == 0 {
		t.Fatal("Upsert returned CAS 0")
	}
	got, cas := getSofa(t, collection, key)
	if !reflect.DeepEqual(got, aSofa) || cas != mut.Cas() {
		t.Fatalf("Get = %+v cas %d, want %+v cas %d", got, cas, aSofa, mut.Cas())
	}
}

// Every mutation produces a new CAS and the last write wins.
func TestUpsertOverwritesAndChangesCas(t *testing.T) {
	key := uniqueKey(t)
	m1, err := collection.Upsert(key, map[string]int{"v": 1}, nil)
	requireNoError(t, err, "Upsert 1")
	m2, err := collection.Upsert(key, map[string]int{"v": 2}, nil)
	requireNoError(t, err, "Upsert 2")
	if m1.Cas() == m2.Cas() || m2.Cas() == 0 {
		t.Fatalf("CAS did not change: %d -> %d", m1.Cas(), m2.Cas())
	}
	res, err := collection.Get(key, nil)
	requireNoError(t, err, "Get")
	var v map[string]int
	requireNoError(t, res.Content(&v), "Content")
	if v["v"] != 2 {
		t.Fatalf("got %v, want v=2", v)
	}
}

// Mutation tokens carry the vBucket uuid and a seqno that grows with each write.
func TestMutationTokensGrow(t *testing.T) {
	key := uniqueKey(t)
	m1, err := collection.Upsert(key, 1, nil)
	requireNoError(t, err, "Upsert")
	m2, err := collection.Upsert(key, 2, nil)
	requireNoError(t, err, "Upsert")
	t1, t2 := m1.MutationToken(), m2.MutationToken()
	if t1 == nil || t2 == nil {
		t.Fatal("no mutation token returned")
	}
	if t1.PartitionID() != t2.PartitionID() || t1.PartitionUUID() != t2.PartitionUUID() {
		t.Fatalf("same key, different vBucket/uuid: %+v %+v", t1, t2)
	}
	if t2.SequenceNumber() <= t1.SequenceNumber() {
		t.Fatalf("seqno did not grow: %d -> %d", t1.SequenceNumber(), t2.SequenceNumber())
	}
}

// Insert creates a new document.
func TestInsertCreatesMissingDocument(t *testing.T) {
	key := uniqueKey(t)
	_, err := collection.Insert(key, aSofa, nil)
	requireNoError(t, err, "Insert")
	got, _ := getSofa(t, collection, key)
	if !reflect.DeepEqual(got, aSofa) {
		t.Fatalf("got %+v", got)
	}
}

// Replace with the current CAS swaps the value and returns a fresh CAS.
func TestReplaceWithCurrentCasSucceeds(t *testing.T) {
	key := uniqueKey(t)
	m, err := collection.Upsert(key, aSofa, nil)
	requireNoError(t, err, "Upsert")
	changed := aSofa
	changed.Seats = 4
	r, err := collection.Replace(key, changed, &gocb.ReplaceOptions{Cas: m.Cas()})
	requireNoError(t, err, "Replace")
	got, cas := getSofa(t, collection, key)
	if got.Seats != 4 || cas != r.Cas() || r.Cas() == m.Cas() {
		t.Fatalf("after replace: %+v cas %d (replace cas %d, old %d)", got, cas, r.Cas(), m.Cas())
	}
}

// Remove deletes the document; a later Get is DocumentNotFound and Exists is false.
func TestRemoveDeletesDocument(t *testing.T) {
	key := uniqueKey(t)
	m, err := collection.Upsert(key, aSofa, nil)
	requireNoError(t, err, "Upsert")
	_, err = collection.Remove(key, &gocb.RemoveOptions{Cas: m.Cas()})
	requireNoError(t, err, "Remove")
	_, err = collection.Get(key, nil)
	requireErrorIs(t, err, gocb.ErrDocumentNotFound, "Get after Remove")
	ex, err := collection.Exists(key, nil)
	requireNoError(t, err, "Exists")
	if ex.Exists() {
		t.Fatal("Exists after Remove = true")
	}
}

// Exists (GET_META) is true for a stored document (with its CAS) and false for a missing one.
func TestExistsReportsPresence(t *testing.T) {
	key := uniqueKey(t)
	ex, err := collection.Exists(key, nil)
	requireNoError(t, err, "Exists missing")
	if ex.Exists() {
		t.Fatal("Exists of a missing key = true")
	}
	m, err := collection.Upsert(key, aSofa, nil)
	requireNoError(t, err, "Upsert")
	ex, err = collection.Exists(key, nil)
	requireNoError(t, err, "Exists")
	if !ex.Exists() || ex.Cas() != m.Cas() {
		t.Fatalf("Exists = %v cas %d, want true cas %d", ex.Exists(), ex.Cas(), m.Cas())
	}
}

// GetAnyReplica on a single node with no replicas is served by the active copy.
func TestGetAnyReplicaServedByActive(t *testing.T) {
	key := uniqueKey(t)
	_, err := collection.Upsert(key, aSofa, nil)
	requireNoError(t, err, "Upsert")
	res, err := collection.GetAnyReplica(key, nil)
	requireNoError(t, err, "GetAnyReplica")
	var s sofa
	requireNoError(t, res.Content(&s), "Content")
	if !reflect.DeepEqual(s, aSofa) || res.IsReplica() {
		t.Fatalf("GetAnyReplica = %+v replica=%v", s, res.IsReplica())
	}
}

// GetAllReplicas on a 0-replica bucket yields exactly one result: the active.
func TestGetAllReplicasReturnsOnlyActive(t *testing.T) {
	key := uniqueKey(t)
	_, err := collection.Upsert(key, aSofa, nil)
	requireNoError(t, err, "Upsert")
	all, err := collection.GetAllReplicas(key, &gocb.GetAllReplicaOptions{Timeout: 5 * time.Second})
	requireNoError(t, err, "GetAllReplicas")
	n := 0
	for r := all.Next(); r != nil; r = all.Next() {
		n++
		var s sofa
		requireNoError(t, r.Content(&s), "Content")
		if !reflect.DeepEqual(s, aSofa) || r.IsReplica() {
			t.Fatalf("replica result %+v replica=%v", s, r.IsReplica())
		}
	}
	requireNoError(t, all.Close(), "Close")
	if n != 1 {
		t.Fatalf("GetAllReplicas returned %d results, want 1", n)
	}
}

// Get with a projection returns only the requested fields.
func TestGetWithProjection(t *testing.T) {
	key := uniqueKey(t)
	_, err := collection.Upsert(key, aSofa, nil)
	requireNoError(t, err, "Upsert")
	res, err := collection.Get(key, &gocb.GetOptions{Project: []string{"name"}})
	requireNoError(t, err, "Get projected")
	var m map[string]interface{}
	requireNoError(t, res.Content(&m), "Content")
	if !reflect.DeepEqual(m, map[string]interface{}{"name": "settee"}) {
		t.Fatalf("projection = %v", m)
	}
}

// The raw binary transcoder round-trips arbitrary bytes, and the binary flags are returned verbatim.
func TestRawBinaryTranscoderRoundTrip(t *testing.T) {
	key := uniqueKey(t)
	payload := make([]byte, 1024)
	for i := range payload {
		payload[i] = byte(i)
	}
	_, err := collection.Upsert(key, payload, &gocb.UpsertOptions{Transcoder: gocb.NewRawBinaryTranscoder()})
	requireNoError(t, err, "Upsert")
	res, err := collection.Get(key, &gocb.GetOptions{Transcoder: gocb.NewRawBinaryTranscoder()})
	requireNoError(t, err, "Get")
	var got []byte
	requireNoError(t, res.Content(&got), "Content")
	if !bytes.Equal(got, payload) {
		t.Fatal("binary payload changed in round trip")
	}
	// The flags say "binary": decoding as JSON must be refused by the JSON transcoder.
	res, err = collection.Get(key, nil)
	requireNoError(t, err, "Get default transcoder")
	var v interface{}
	if err := res.Content(&v); err == nil {
		t.Fatal("JSON transcoder decoded a binary-flagged document; flags were not kept")
	}
}

// The raw string transcoder round-trips UTF-8 text.
func TestRawStringTranscoderRoundTrip(t *testing.T) {
	key := uniqueKey(t)
	text := "héllo wörld ✓"
	_, err := collection.Upsert(key, text, &gocb.UpsertOptions{Transcoder: gocb.NewRawStringTranscoder()})
	requireNoError(t, err, "Upsert")
	res, err := collection.Get(key, &gocb.GetOptions{Transcoder: gocb.NewRawStringTranscoder()})
	requireNoError(t, err, "Get")
	var got string
	requireNoError(t, res.Content(&got), "Content")
	if got != text {
		t.Fatalf("got %q want %q", got, text)
	}
}

// The raw JSON transcoder returns exactly the bytes that were written.
func TestRawJSONTranscoderExactBytes(t *testing.T) {
	key := uniqueKey(t)
	raw := []byte(`{"b":2,  "a":[1,2,3]}`)
	_, err := collection.Upsert(key, raw, &gocb.UpsertOptions{Transcoder: gocb.NewRawJSONTranscoder()})
	requireNoError(t, err, "Upsert")
	res, err := collection.Get(key, &gocb.GetOptions{Transcoder: gocb.NewRawJSONTranscoder()})
	requireNoError(t, err, "Get")
	var got []byte
	requireNoError(t, res.Content(&got), "Content")
	if !bytes.Equal(got, raw) {
		t.Fatalf("got %q want %q", got, raw)
	}
}

// A 5 MiB value is stored and returned intact.
func TestLargeValueRoundTrip(t *testing.T) {
	key := uniqueKey(t)
	payload := bytes.Repeat([]byte("0123456789abcdef"), 5*65536)
	_, err := collection.Upsert(key, payload, &gocb.UpsertOptions{Transcoder: gocb.NewRawBinaryTranscoder(), Timeout: 30 * time.Second})
	requireNoError(t, err, "Upsert")
	res, err := collection.Get(key, &gocb.GetOptions{Transcoder: gocb.NewRawBinaryTranscoder(), Timeout: 30 * time.Second})
	requireNoError(t, err, "Get")
	var got []byte
	requireNoError(t, res.Content(&got), "Content")
	if !bytes.Equal(got, payload) {
		t.Fatalf("5 MiB payload changed (len %d)", len(got))
	}
}

// A 250-byte key (the maximum) is accepted.
func TestKeyOf250BytesAccepted(t *testing.T) {
	key := strings.Repeat("g", 250)
	_, err := collection.Upsert(key, 250, nil)
	requireNoError(t, err, "Upsert 250-byte key")
	res, err := collection.Get(key, nil)
	requireNoError(t, err, "Get 250-byte key")
	var n int
	requireNoError(t, res.Content(&n), "Content")
	if n != 250 {
		t.Fatalf("got %d", n)
	}
}
