package compat

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

const collectionReady = 15 * time.Second

func uniqueName(prefix string) string {
	return fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano()%1_000_000_000)
}

func scopeSpecs(t *testing.T) map[string]map[string]gocb.CollectionSpec {
	t.Helper()
	scopes, err := bucket.CollectionsV2().GetAllScopes(nil)
	requireNoError(t, err, "GetAllScopes")
	out := map[string]map[string]gocb.CollectionSpec{}
	for _, s := range scopes {
		cs := map[string]gocb.CollectionSpec{}
		for _, c := range s.Collections {
			cs[c.Name] = c
		}
		out[s.Name] = cs
	}
	return out
}

// waitWritable waits until a KV write to c succeeds (the collection id resolves).
func waitWritable(t *testing.T, c *gocb.Collection) {
	t.Helper()
	waitUntil(t, collectionReady, "collection "+c.ScopeName()+"."+c.Name()+" to accept writes", func() error {
		_, err := c.Upsert("__probe", true, &gocb.UpsertOptions{Timeout: 2 * time.Second})
		return err
	})
}

// newCollection creates a scope and a collection with the collection manager and waits until KV can use it.
func newCollection(t *testing.T) (string, string, *gocb.Collection) {
	t.Helper()
	scope, coll := uniqueName("scope"), uniqueName("coll")
	mgr := bucket.CollectionsV2()
	requireNoError(t, mgr.CreateScope(scope, nil), "CreateScope")
	requireNoError(t, mgr.CreateCollection(scope, coll, nil, nil), "CreateCollection")
	c := bucket.Scope(scope).Collection(coll)
	waitWritable(t, c)
	return scope, coll, c
}

// The default scope and collection are always listed.
func TestDefaultScopeListed(t *testing.T) {
	specs := scopeSpecs(t)
	if _, ok := specs["_default"]["_default"]; !ok {
		t.Fatalf("_default._default missing from %v", specs)
	}
}

// A collection created through the manager is listed and serves KV, subdoc and counters, isolated from _default.
func TestKVInNonDefaultCollection(t *testing.T) {
	scope, coll, c := newCollection(t)
	if _, ok := scopeSpecs(t)[scope][coll]; !ok {
		t.Fatalf("%s.%s not listed", scope, coll)
	}
	key := uniqueKey(t)
	_, err := collection.Upsert(key, "default", nil)
	requireNoError(t, err, "Upsert default")
	_, err = c.Upsert(key, "named", nil)
	requireNoError(t, err, "Upsert named")
	for _, tc := range []struct {
		c    *gocb.Collection
		want string
	}{{collection, "default"}, {c, "named"}} {
		res, err := tc.c.Get(key, nil)
		requireNoError(t, err, "Get")
		var v string
		requireNoError(t, res.Content(&v), "Content")
		if v != tc.want {
			t.Fatalf("collection %s: got %q want %q", tc.c.Name(), v, tc.want)
		}
	}
	_, err = c.Insert(key, "again", nil)
	requireErrorIs(t, err, gocb.ErrDocumentExists, "Insert existing in named collection")
	_, err = c.Binary().Increment(key+"-ctr", &gocb.IncrementOptions{Initial: 5, Delta: 1})
	requireNoError(t, err, "Increment in named collection")
	_, err = c.MutateIn(key+"-ctr2", []gocb.MutateInSpec{gocb.UpsertSpec("a", 1, nil)},
		&gocb.MutateInOptions{StoreSemantic: gocb.StoreSemanticsUpsert})
	requireNoError(t, err, "MutateIn in named collection")
	_, err = c.Remove(key, nil)
	requireNoError(t, err, "Remove named")
	_, err = c.Get(key, nil)
	requireErrorIs(t, err, gocb.ErrDocumentNotFound, "Get removed named")
	_, err = collection.Get(key, nil)
	requireNoError(t, err, "default copy survives")
}

// Manager errors: scope/collection exists, scope/collection not found.
func TestCollectionManagerErrors(t *testing.T) {
	scope, coll, _ := newCollection(t)
	mgr := bucket.CollectionsV2()
	requireErrorIs(t, mgr.CreateScope(scope, nil), gocb.ErrScopeExists, "CreateScope existing")
	requireErrorIs(t, mgr.CreateCollection(scope, coll, nil, nil), gocb.ErrCollectionExists, "CreateCollection existing")
	requireErrorIs(t, mgr.CreateCollection(uniqueName("noscope"), "c", nil, nil), gocb.ErrScopeNotFound, "CreateCollection in missing scope")
	requireErrorIs(t, mgr.DropScope(uniqueName("noscope"), nil), gocb.ErrScopeNotFound, "DropScope missing")
	requireErrorIs(t, mgr.DropCollection(scope, uniqueName("nocoll"), nil), gocb.ErrCollectionNotFound, "DropCollection missing")
}

// KV on a missing collection is retried (UNKNOWN_COLLECTION) until the operation times out.
func TestKVOnMissingCollectionTimesOut(t *testing.T) {
	scope, _, _ := newCollection(t)
	c := bucket.Scope(scope).Collection(uniqueName("nocoll"))
	_, err := c.Get("k", &gocb.GetOptions{Timeout: 2 * time.Second})
	if !errors.Is(err, gocb.ErrTimeout) && !errors.Is(err, gocb.ErrCollectionNotFound) {
		t.Fatalf("Get on missing collection: %v", err)
	}
	c = bucket.Scope(uniqueName("noscope")).Collection("c")
	_, err = c.Get("k", &gocb.GetOptions{Timeout: 2 * time.Second})
	if !errors.Is(err, gocb.ErrTimeout) && !errors.Is(err, gocb.ErrScopeNotFound) {
		t.Fatalf("Get on missing scope: %v", err)
	}
}

// Dropping a collection removes it from the manifest and KV on it stops working; dropping a scope removes it.
func TestDropCollectionAndScope(t *testing.T) {
	scope, coll, c := newCollection(t)
	mgr := bucket.CollectionsV2()
	requireNoError(t, mgr.DropCollection(scope, coll, nil), "DropCollection")
	if _, ok := scopeSpecs(t)[scope][coll]; ok {
		t.Fatal("dropped collection still listed")
	}
	waitUntil(t, collectionReady, "KV on the dropped collection to fail", func() error {
		_, err := c.Upsert("k", 1, &gocb.UpsertOptions{Timeout: 2 * time.Second})
		if err == nil {
			return errors.New("write to a dropped collection succeeded")
		}
		return nil
	})
	requireNoError(t, mgr.DropScope(scope, nil), "DropScope")
	if _, ok := scopeSpecs(t)[scope]; ok {
		t.Fatal("dropped scope still listed")
	}
}

// A collection created with MaxExpiry reports it and documents in it inherit the TTL.
func TestCollectionMaxExpiry(t *testing.T) {
	coll := uniqueName("ttl")
	mgr := bucket.CollectionsV2()
	requireNoError(t, mgr.CreateCollection("_default", coll, &gocb.CreateCollectionSettings{MaxExpiry: 2 * time.Second}, nil), "CreateCollection")
	spec, ok := scopeSpecs(t)["_default"][coll]
	if !ok || spec.MaxExpiry != 2*time.Second {
		t.Fatalf("collection spec %+v (listed %v)", spec, ok)
	}
	c := bucket.Scope("_default").Collection(coll)
	waitWritable(t, c)
	key := uniqueKey(t)
	_, err := c.Upsert(key, 1, nil)
	requireNoError(t, err, "Upsert")
	waitUntil(t, expiryDeadline, "the document to expire by the collection's max expiry", func() error {
		_, err := c.Get(key, nil)
		if errors.Is(err, gocb.ErrDocumentNotFound) {
			return nil
		}
		return fmt.Errorf("still there (err=%v)", err)
	})
}
