package compat

import (
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

func baseDoc() map[string]interface{} {
	return map[string]interface{}{
		"name": "settee", "seats": 3, "tags": []interface{}{"red", "velvet"},
		"dims": map[string]interface{}{"w": 200, "h": 90}, "n": 10,
	}
}

func upsertBase(t *testing.T, key string) gocb.Cas {
	t.Helper()
	m, err := collection.Upsert(key, baseDoc(), nil)
	requireNoError(t, err, "Upsert")
	return m.Cas()
}

func bodyOf(t *testing.T, key string) map[string]interface{} {
	t.Helper()
	res, err := collection.Get(key, nil)
	requireNoError(t, err, "Get")
	var m map[string]interface{}
	requireNoError(t, res.Content(&m), "Content")
	return m
}

func xattr() *gocb.GetSpecOptions { return &gocb.GetSpecOptions{IsXattr: true} }

// macroCas decodes a `${Mutation.CAS}` expansion: Couchbase writes the CAS bytes in network order as hex, which
// reads as the little-endian value.
func macroCas(t *testing.T, s string) gocb.Cas {
	t.Helper()
	b, err := hex.DecodeString(strings.TrimPrefix(s, "0x"))
	if err != nil || len(b) != 8 {
		t.Fatalf("macro CAS %q is not 16 hex digits", s)
	}
	return gocb.Cas(binary.LittleEndian.Uint64(b))
}

// LookupIn get/exists/count report values, presence and element counts; missing paths fail per spec.
func TestLookupInGetExistsCount(t *testing.T) {
	key := uniqueKey(t)
	cas := upsertBase(t, key)
	res, err := collection.LookupIn(key, []gocb.LookupInSpec{
		gocb.GetSpec("name", nil), gocb.ExistsSpec("tags", nil), gocb.ExistsSpec("nope", nil),
		gocb.CountSpec("tags", nil), gocb.GetSpec("dims.w", nil), gocb.GetSpec("nope.deeper", nil),
		gocb.GetSpec("name.first", nil),
	}, nil)
	requireNoError(t, err, "LookupIn")
	if res.Cas() != cas {
		t.Fatalf("LookupIn CAS %d, want %d", res.Cas(), cas)
	}
	var name string
	requireNoError(t, res.ContentAt(0, &name), "get name")
	if name != "settee" {
		t.Fatalf("name = %q", name)
	}
	if !res.Exists(1) || res.Exists(2) {
		t.Fatalf("exists tags=%v nope=%v", res.Exists(1), res.Exists(2))
	}
	var count, w int
	requireNoError(t, res.ContentAt(3, &count), "count")
	requireNoError(t, res.ContentAt(4, &w), "dims.w")
	if count != 2 || w != 200 {
		t.Fatalf("count=%d w=%d", count, w)
	}
	var ignored interface{}
	requireErrorIs(t, res.ContentAt(5, &ignored), gocb.ErrPathNotFound, "get missing path")
	requireErrorIs(t, res.ContentAt(6, &ignored), gocb.ErrPathMismatch, "get through a string")
}

// The empty-path get spec returns the whole document.
func TestLookupInFullDocument(t *testing.T) {
	key := uniqueKey(t)
	upsertBase(t, key)
	res, err := collection.LookupIn(key, []gocb.LookupInSpec{gocb.GetSpec("", nil)}, nil)
	requireNoError(t, err, "LookupIn")
	var m map[string]interface{}
	requireNoError(t, res.ContentAt(0, &m), "ContentAt")
	if !reflect.DeepEqual(m, bodyOf(t, key)) {
		t.Fatalf("full doc %v", m)
	}
}

// MutateIn insert/upsert/replace/remove/array specs/counters are applied together and counters return values.
func TestMutateInAllSpecTypes(t *testing.T) {
	key := uniqueKey(t)
	cas := upsertBase(t, key)
	res, err := collection.MutateIn(key, []gocb.MutateInSpec{
		gocb.InsertSpec("color", "red", nil),
		gocb.UpsertSpec("seats", 4, nil),
		gocb.ReplaceSpec("name", "couch", nil),
		gocb.RemoveSpec("dims.h", nil),
		gocb.ArrayAppendSpec("tags", "soft", nil),
		gocb.ArrayPrependSpec("tags", "first", nil),
		gocb.ArrayInsertSpec("tags[1]", "second", nil),
		gocb.ArrayAddUniqueSpec("tags", "unique", nil),
		gocb.ArrayAppendSpec("more", []interface{}{1, 2}, &gocb.ArrayAppendSpecOptions{CreatePath: true, HasMultiple: true}),
		gocb.IncrementSpec("n", 5, nil),
		gocb.DecrementSpec("seats", 1, nil),
		gocb.UpsertSpec("deep.a.b", true, &gocb.UpsertSpecOptions{CreatePath: true}),
	}, nil)
	requireNoError(t, err, "MutateIn")
	if res.Cas() == 0 || res.Cas() == cas {
		t.Fatalf("MutateIn CAS %d (before %d)", res.Cas(), cas)
	}
	var n, seats int
	requireNoError(t, res.ContentAt(9, &n), "increment result")
	requireNoError(t, res.ContentAt(10, &seats), "decrement result")
	if n != 15 || seats != 3 {
		t.Fatalf("counter results n=%d seats=%d", n, seats)
	}
	got := bodyOf(t, key)
	want := map[string]interface{}{
		"name": "couch", "seats": 3.0, "color": "red", "n": 15.0,
		"tags": []interface{}{"first", "second", "red", "velvet", "soft", "unique"},
		"dims": map[string]interface{}{"w": 200.0},
		"more": []interface{}{1.0, 2.0},
		"deep": map[string]interface{}{"a": map[string]interface{}{"b": true}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("body after MutateIn:\n got %v\nwant %v", got, want)
	}
}

// Sub-document errors: PathExists, PathNotFound, PathMismatch; a failed MutateIn applies nothing.
func TestMutateInErrors(t *testing.T) {
	key := uniqueKey(t)
	cas := upsertBase(t, key)
	_, err := collection.MutateIn(key, []gocb.MutateInSpec{gocb.InsertSpec("name", "x", nil)}, nil)
	requireErrorIs(t, err, gocb.ErrPathExists, "insert existing path")
	_, err = collection.MutateIn(key, []gocb.MutateInSpec{gocb.ReplaceSpec("nope", 1, nil)}, nil)
	requireErrorIs(t, err, gocb.ErrPathNotFound, "replace missing path")
	_, err = collection.MutateIn(key, []gocb.MutateInSpec{gocb.RemoveSpec("nope", nil)}, nil)
	requireErrorIs(t, err, gocb.ErrPathNotFound, "remove missing path")
	_, err = collection.MutateIn(key, []gocb.MutateInSpec{gocb.UpsertSpec("a.b", 1, nil)}, nil)
	requireErrorIs(t, err, gocb.ErrPathNotFound, "upsert without parents")
	_, err = collection.MutateIn(key, []gocb.MutateInSpec{gocb.ArrayAppendSpec("name", "x", nil)}, nil)
	requireErrorIs(t, err, gocb.ErrPathMismatch, "array append on string")
	_, err = collection.MutateIn(key, []gocb.MutateInSpec{gocb.ArrayAddUniqueSpec("tags", "red", nil)}, nil)
	requireErrorIs(t, err, gocb.ErrPathExists, "add unique duplicate")
	_, err = collection.MutateIn(key, []gocb.MutateInSpec{gocb.IncrementSpec("name", 1, nil)}, nil)
	requireErrorIs(t, err, gocb.ErrPathMismatch, "increment a string")
	_, err = collection.MutateIn(key, []gocb.MutateInSpec{
		gocb.UpsertSpec("seats", 99, nil), gocb.ReplaceSpec("missing.path", 1, nil),
	}, nil)
	requireErrorIs(t, err, gocb.ErrPathNotFound, "second spec fails")
	res, err := collection.Get(key, nil)
	requireNoError(t, err, "Get")
	if res.Cas() != cas {
		t.Fatalf("a failed MutateIn changed the document (CAS %d -> %d)", cas, res.Cas())
	}
}

// MutateIn with a stale CAS gets KEY_EEXISTS; gocb 2.11 deliberately reports it as ErrDocumentExists for MutateIn
// (GOCBC-1019 in kvprovider_coresubdoc.go), and nothing is written.
func TestMutateInStaleCas(t *testing.T) {
	key := uniqueKey(t)
	old := upsertBase(t, key)
	current := upsertBase(t, key)
	_, err := collection.MutateIn(key, []gocb.MutateInSpec{gocb.UpsertSpec("a", 1, nil)}, &gocb.MutateInOptions{Cas: old})
	requireErrorIs(t, err, gocb.ErrDocumentExists, "MutateIn stale CAS")
	_, err = collection.MutateIn(key, []gocb.MutateInSpec{gocb.UpsertSpec("a", 1, nil)}, &gocb.MutateInOptions{Cas: current})
	requireNoError(t, err, "MutateIn current CAS")
}

// Store semantics: Upsert creates a missing document, Insert creates then refuses, Replace needs the document.
func TestMutateInStoreSemantics(t *testing.T) {
	key := uniqueKey(t)
	_, err := collection.MutateIn(key, []gocb.MutateInSpec{gocb.UpsertSpec("a", 1, nil)},
		&gocb.MutateInOptions{StoreSemantic: gocb.StoreSemanticsReplace})
	requireErrorIs(t, err, gocb.ErrDocumentNotFound, "replace semantics on missing doc")
	_, err = collection.MutateIn(key, []gocb.MutateInSpec{gocb.UpsertSpec("a", 1, nil)},
		&gocb.MutateInOptions{StoreSemantic: gocb.StoreSemanticsUpsert})
	requireNoError(t, err, "upsert semantics on missing doc")
	if got := bodyOf(t, key); !reflect.DeepEqual(got, map[string]interface{}{"a": 1.0}) {
		t.Fatalf("created %v", got)
	}
	_, err = collection.MutateIn(key, []gocb.MutateInSpec{gocb.UpsertSpec("b", 2, nil)},
		&gocb.MutateInOptions{StoreSemantic: gocb.StoreSemanticsInsert})
	requireErrorIs(t, err, gocb.ErrDocumentExists, "insert semantics on existing doc")
	key2 := key + "-ins"
	_, err = collection.MutateIn(key2, []gocb.MutateInSpec{gocb.UpsertSpec("b", 2, nil)},
		&gocb.MutateInOptions{StoreSemantic: gocb.StoreSemanticsInsert})
	requireNoError(t, err, "insert semantics on missing doc")
	if got := bodyOf(t, key2); !reflect.DeepEqual(got, map[string]interface{}{"b": 2.0}) {
		t.Fatalf("created %v", got)
	}
}

// User xattrs are stored apart from the body and read with xattr lookups.
func TestXattrsStoredApartFromBody(t *testing.T) {
	key := uniqueKey(t)
	upsertBase(t, key)
	_, err := collection.MutateIn(key, []gocb.MutateInSpec{
		gocb.UpsertSpec("meta.owner", "alice", &gocb.UpsertSpecOptions{IsXattr: true, CreatePath: true}),
		gocb.IncrementSpec("meta.rev", 1, &gocb.CounterSpecOptions{IsXattr: true, CreatePath: true}),
	}, nil)
	requireNoError(t, err, "MutateIn xattrs")
	if got := bodyOf(t, key); len(got) != len(baseDoc()) || got["meta"] != nil {
		t.Fatalf("xattr leaked into the body: %v", got)
	}
	res, err := collection.LookupIn(key, []gocb.LookupInSpec{
		gocb.GetSpec("meta", xattr()), gocb.GetSpec("name", nil), gocb.ExistsSpec("meta.owner", &gocb.ExistsSpecOptions{IsXattr: true}),
	}, nil)
	requireNoError(t, err, "LookupIn xattrs")
	var meta map[string]interface{}
	requireNoError(t, res.ContentAt(0, &meta), "meta")
	if !reflect.DeepEqual(meta, map[string]interface{}{"owner": "alice", "rev": 1.0}) {
		t.Fatalf("meta = %v", meta)
	}
	var name string
	requireNoError(t, res.ContentAt(1, &name), "name")
	if name != "settee" || !res.Exists(2) {
		t.Fatalf("name=%q exists=%v", name, res.Exists(2))
	}
	_, err = collection.MutateIn(key, []gocb.MutateInSpec{gocb.InsertSpec("meta", 1, &gocb.InsertSpecOptions{IsXattr: true})}, nil)
	requireErrorIs(t, err, gocb.ErrPathExists, "insert existing xattr")
}

// `$document` reports CAS, seqno, exptime, flags, value_bytes, datatype, deleted and value_crc32c as Couchbase does.
func TestDocumentVirtualXattr(t *testing.T) {
	key := uniqueKey(t)
	m, err := collection.Upsert(key, baseDoc(), &gocb.UpsertOptions{Expiry: time.Hour})
	requireNoError(t, err, "Upsert")
	raw, err := collection.Get(key, &gocb.GetOptions{Transcoder: gocb.NewRawJSONTranscoder()})
	requireNoError(t, err, "Get raw")
	var body []byte
	requireNoError(t, raw.Content(&body), "raw content")
	res, err := collection.LookupIn(key, []gocb.LookupInSpec{
		gocb.GetSpec("$document", xattr()), gocb.GetSpec("$document.exptime", xattr()), gocb.GetSpec("$document.CAS", xattr()),
	}, nil)
	requireNoError(t, err, "LookupIn $document")
	var doc struct {
		CAS          string   `json:"CAS"`
		Seqno        string   `json:"seqno"`
		VbucketUUID  string   `json:"vbucket_uuid"`
		Exptime      int64    `json:"exptime"`
		Flags        uint32   `json:"flags"`
		ValueBytes   int      `json:"value_bytes"`
		Datatype     []string `json:"datatype"`
		Deleted      bool     `json:"deleted"`
		LastModified string   `json:"last_modified"`
		ValueCrc32c  string   `json:"value_crc32c"`
	}
	requireNoError(t, res.ContentAt(0, &doc), "$document")
	cas, err := strconv.ParseUint(strings.TrimPrefix(doc.CAS, "0x"), 16, 64)
	if err != nil || gocb.Cas(cas) != m.Cas() {
		t.Fatalf("$document.CAS %q, want %#x", doc.CAS, uint64(m.Cas()))
	}
	if !strings.HasPrefix(doc.Seqno, "0x") || !strings.HasPrefix(doc.VbucketUUID, "0x") {
		t.Fatalf("seqno %q vbucket_uuid %q", doc.Seqno, doc.VbucketUUID)
	}
	if d := doc.Exptime - time.Now().Add(time.Hour).Unix(); d < -120 || d > 120 {
		t.Fatalf("exptime %d is not ~1h from now", doc.Exptime)
	}
	if doc.Flags != 0x02000000 || doc.ValueBytes != len(body) || doc.Deleted {
		t.Fatalf("flags %#x value_bytes %d (body %d) deleted %v", doc.Flags, doc.ValueBytes, len(body), doc.Deleted)
	}
	hasJSON := false
	for _, d := range doc.Datatype {
		hasJSON = hasJSON || d == "json"
	}
	if !hasJSON {
		t.Fatalf("datatype %v lacks json", doc.Datatype)
	}
	lm, err := strconv.ParseInt(doc.LastModified, 10, 64)
	if err != nil || lm-int64(uint64(m.Cas())/1e9) > 1 || int64(uint64(m.Cas())/1e9)-lm > 1 {
		t.Fatalf("last_modified %q vs CAS %d", doc.LastModified, m.Cas())
	}
	crc, err := strconv.ParseUint(strings.TrimPrefix(doc.ValueCrc32c, "0x"), 16, 32)
	if want := crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)); err != nil || uint32(crc) != want {
		t.Fatalf("value_crc32c %q, want %#08x", doc.ValueCrc32c, want)
	}
	var exptime int64
	var casField string
	requireNoError(t, res.ContentAt(1, &exptime), "$document.exptime")
	requireNoError(t, res.ContentAt(2, &casField), "$document.CAS")
	if exptime != doc.Exptime || casField != doc.CAS {
		t.Fatalf("field lookups disagree with $document: %d/%d %s/%s", exptime, doc.Exptime, casField, doc.CAS)
	}
}

// Get with expiry (gocb reads $document.exptime and $document.flags) reports the TTL.
func TestGetWithExpiryUsesVirtualXattrs(t *testing.T) {
	key := uniqueKey(t)
	_, err := collection.Upsert(key, baseDoc(), &gocb.UpsertOptions{Expiry: 2 * time.Hour})
	requireNoError(t, err, "Upsert")
	requireNear(t, expiryTime(t, key), time.Now().Add(2*time.Hour), "expiry")
}

// MutationMacroCAS expands to the mutation's CAS (byte-swapped hex), seqno to the new seqno, crc32c to the body's.
func TestMutationMacros(t *testing.T) {
	key := uniqueKey(t)
	upsertBase(t, key)
	res, err := collection.MutateIn(key, []gocb.MutateInSpec{
		gocb.UpsertSpec("m.cas", gocb.MutationMacroCAS, &gocb.UpsertSpecOptions{CreatePath: true}),
		gocb.UpsertSpec("m.seqno", gocb.MutationMacroSeqNo, &gocb.UpsertSpecOptions{CreatePath: true}),
		gocb.UpsertSpec("m.crc", gocb.MutationMacroValueCRC32c, &gocb.UpsertSpecOptions{CreatePath: true}),
	}, nil)
	requireNoError(t, err, "MutateIn macros")
	look, err := collection.LookupIn(key, []gocb.LookupInSpec{gocb.GetSpec("m", xattr())}, nil)
	requireNoError(t, err, "LookupIn m")
	var m map[string]string
	requireNoError(t, look.ContentAt(0, &m), "m")
	if got := macroCas(t, m["cas"]); got != res.Cas() {
		t.Fatalf("${Mutation.CAS} = %s → %d, want %d", m["cas"], got, res.Cas())
	}
	seq, err := strconv.ParseUint(strings.TrimPrefix(m["seqno"], "0x"), 16, 64)
	if err != nil || res.MutationToken() == nil || seq != res.MutationToken().SequenceNumber() {
		t.Fatalf("${Mutation.seqno} = %q, token %+v", m["seqno"], res.MutationToken())
	}
	raw, err := collection.Get(key, &gocb.GetOptions{Transcoder: gocb.NewRawJSONTranscoder()})
	requireNoError(t, err, "Get raw")
	var body []byte
	requireNoError(t, raw.Content(&body), "raw content")
	crc, err := strconv.ParseUint(strings.TrimPrefix(m["crc"], "0x"), 16, 32)
	if want := crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)); err != nil || uint32(crc) != want {
		t.Fatalf("${Mutation.value_crc32c} = %q, want %#08x", m["crc"], want)
	}
}

// MutateIn with an expiry sets the document's TTL.
func TestMutateInExpiry(t *testing.T) {
	key := uniqueKey(t)
	upsertBase(t, key)
	_, err := collection.MutateIn(key, []gocb.MutateInSpec{gocb.UpsertSpec("a", 1, nil)}, &gocb.MutateInOptions{Expiry: time.Hour})
	requireNoError(t, err, "MutateIn with expiry")
	requireNear(t, expiryTime(t, key), time.Now().Add(time.Hour), "expiry")
}

// A document created as deleted (CREATE_AS_DELETED, as transactions stage inserts) is a tombstone: invisible to
// Get, readable with ACCESS_DELETED, and an ordinary Insert of the key still succeeds.
func TestCreateAsDeletedTombstone(t *testing.T) {
	key := uniqueKey(t)
	opts := &gocb.MutateInOptions{StoreSemantic: gocb.StoreSemanticsInsert}
	opts.Internal.DocFlags = gocb.SubdocDocFlagCreateAsDeleted | gocb.SubdocDocFlagAccessDeleted
	_, err := collection.MutateIn(key, []gocb.MutateInSpec{
		gocb.UpsertSpec("_txn", map[string]string{"state": "staged"}, &gocb.UpsertSpecOptions{IsXattr: true, CreatePath: true}),
	}, opts)
	requireNoError(t, err, "MutateIn create-as-deleted")
	_, err = collection.Get(key, nil)
	requireErrorIs(t, err, gocb.ErrDocumentNotFound, "Get of a tombstone")

	lopts := &gocb.LookupInOptions{}
	lopts.Internal.DocFlags = gocb.SubdocDocFlagAccessDeleted
	res, err := collection.LookupIn(key, []gocb.LookupInSpec{
		gocb.GetSpec("_txn", xattr()), gocb.GetSpec("$document.deleted", xattr()),
	}, lopts)
	requireNoError(t, err, "LookupIn access-deleted")
	var txn map[string]string
	var deleted bool
	requireNoError(t, res.ContentAt(0, &txn), "_txn")
	requireNoError(t, res.ContentAt(1, &deleted), "$document.deleted")
	if txn["state"] != "staged" || !deleted {
		t.Fatalf("tombstone xattr %v deleted=%v", txn, deleted)
	}
	_, err = collection.Insert(key, "alive", nil)
	requireNoError(t, err, "Insert over a tombstone")
}

// `$vbucket.HLC.now` reports the vBucket clock in seconds.
func TestVbucketVirtualXattr(t *testing.T) {
	key := uniqueKey(t)
	upsertBase(t, key)
	res, err := collection.LookupIn(key, []gocb.LookupInSpec{gocb.GetSpec("$vbucket.HLC", xattr())}, nil)
	requireNoError(t, err, "LookupIn $vbucket")
	var hlc struct {
		Now  string `json:"now"`
		Mode string `json:"mode"`
	}
	requireNoError(t, res.ContentAt(0, &hlc), "$vbucket.HLC")
	now, err := strconv.ParseInt(hlc.Now, 10, 64)
	if err != nil || now-time.Now().Unix() > 300 || time.Now().Unix()-now > 300 {
		t.Fatalf("$vbucket.HLC = %+v", hlc)
	}
}
