package compat

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

const managementReady = 30 * time.Second

// openWritable opens bucket name on c and waits until a KV write succeeds.
func openWritable(t *testing.T, c *gocb.Cluster, name string) *gocb.Collection {
	t.Helper()
	coll := c.Bucket(name).DefaultCollection()
	waitUntil(t, managementReady, "bucket "+name+" to accept writes", func() error {
		_, err := coll.Upsert("__probe", true, &gocb.UpsertOptions{Timeout: 2 * time.Second})
		return err
	})
	return coll
}

// The server's own bucket is reported as ephemeral with its RAM quota and replica count.
func TestGetDefaultBucketSettings(t *testing.T) {
	s, err := cluster.Buckets().GetBucket(bucketName, nil)
	requireNoError(t, err, "GetBucket")
	if s.Name != bucketName || s.BucketType != gocb.EphemeralBucketType || s.RAMQuotaMB != 256 || s.NumReplicas != 0 {
		t.Fatalf("settings %+v", s)
	}
}

// An ephemeral bucket can be created, listed, read, updated, used, flushed and dropped through the bucket manager.
func TestBucketLifecycle(t *testing.T) {
	mgr := cluster.Buckets()
	name := uniqueName("eph")
	settings := gocb.BucketSettings{Name: name, BucketType: gocb.EphemeralBucketType, RAMQuotaMB: 100, FlushEnabled: true,
		EvictionPolicy: gocb.EvictionPolicyTypeNoEviction}
	requireNoError(t, mgr.CreateBucket(gocb.CreateBucketSettings{BucketSettings: settings}, nil), "CreateBucket")
	defer func() { _ = mgr.DropBucket(name, nil) }()

	s, err := mgr.GetBucket(name, nil)
	requireNoError(t, err, "GetBucket")
	if s.BucketType != gocb.EphemeralBucketType || s.RAMQuotaMB != 100 || !s.FlushEnabled {
		t.Fatalf("created settings %+v", s)
	}
	all, err := mgr.GetAllBuckets(nil)
	requireNoError(t, err, "GetAllBuckets")
	if _, ok := all[name]; !ok {
		t.Fatalf("GetAllBuckets lacks %s: %v", name, all)
	}
	if _, ok := all[bucketName]; !ok {
		t.Fatalf("GetAllBuckets lacks %s", bucketName)
	}

	settings.RAMQuotaMB = 128
	requireNoError(t, mgr.UpdateBucket(settings, nil), "UpdateBucket")
	waitUntil(t, managementReady, "the RAM quota update", func() error {
		s, err := mgr.GetBucket(name, nil)
		if err != nil {
			return err
		}
		if s.RAMQuotaMB != 128 {
			return fmt.Errorf("quota %d", s.RAMQuotaMB)
		}
		return nil
	})

	coll := openWritable(t, cluster, name)
	for i := 0; i < 20; i++ {
		_, err := coll.Upsert(fmt.Sprintf("doc-%d", i), i, nil)
		requireNoError(t, err, "Upsert")
	}
	requireNoError(t, mgr.FlushBucket(name, nil), "FlushBucket")
	waitUntil(t, managementReady, "flushed documents to disappear", func() error {
		for i := 0; i < 20; i++ {
			_, err := coll.Get(fmt.Sprintf("doc-%d", i), &gocb.GetOptions{Timeout: 2 * time.Second})
			if !errors.Is(err, gocb.ErrDocumentNotFound) {
				return fmt.Errorf("doc-%d: %v", i, err)
			}
		}
		return nil
	})

	requireNoError(t, mgr.DropBucket(name, nil), "DropBucket")
	_, err = mgr.GetBucket(name, nil)
	requireErrorIs(t, err, gocb.ErrBucketNotFound, "GetBucket after drop")
}

// Bucket manager errors: create an existing bucket, get/drop/flush a missing one, flush with flush disabled.
func TestBucketManagerErrors(t *testing.T) {
	mgr := cluster.Buckets()
	err := mgr.CreateBucket(gocb.CreateBucketSettings{BucketSettings: gocb.BucketSettings{
		Name: bucketName, BucketType: gocb.EphemeralBucketType, RAMQuotaMB: 100}}, nil)
	requireErrorIs(t, err, gocb.ErrBucketExists, "CreateBucket existing")
	missing := uniqueName("missing")
	_, err = mgr.GetBucket(missing, nil)
	requireErrorIs(t, err, gocb.ErrBucketNotFound, "GetBucket missing")
	requireErrorIs(t, mgr.DropBucket(missing, nil), gocb.ErrBucketNotFound, "DropBucket missing")

	name := uniqueName("noflush")
	requireNoError(t, mgr.CreateBucket(gocb.CreateBucketSettings{BucketSettings: gocb.BucketSettings{
		Name: name, BucketType: gocb.EphemeralBucketType, RAMQuotaMB: 100, FlushEnabled: false}}, nil), "CreateBucket")
	defer func() { _ = mgr.DropBucket(name, nil) }()
	requireErrorIs(t, mgr.FlushBucket(name, nil), gocb.ErrBucketNotFlushable, "FlushBucket disabled")
}

// A user upserted with data_reader[default] is returned by GetUser, can read over KV and is refused writes.
func TestDataReaderUser(t *testing.T) {
	users := cluster.Users()
	name := uniqueName("reader")
	requireNoError(t, users.UpsertUser(gocb.User{Username: name, Password: "reader-pw",
		Roles: []gocb.Role{{Name: "data_reader", Bucket: bucketName}}}, nil), "UpsertUser")
	defer func() { _ = users.DropUser(name, nil) }()

	u, err := users.GetUser(name, nil)
	requireNoError(t, err, "GetUser")
	if u.Username != name || len(u.Roles) != 1 || u.Roles[0].Name != "data_reader" || u.Roles[0].Bucket != bucketName {
		t.Fatalf("user %+v", u)
	}
	all, err := users.GetAllUsers(nil)
	requireNoError(t, err, "GetAllUsers")
	found := false
	for _, x := range all {
		found = found || x.Username == name
	}
	if !found {
		t.Fatalf("GetAllUsers lacks %s", name)
	}

	key := uniqueKey(t)
	_, err = collection.Upsert(key, "seeded", nil)
	requireNoError(t, err, "seed")

	c, err := connectAs(srv, "", name, "reader-pw")
	requireNoError(t, err, "Connect as reader")
	defer c.Close(nil)
	rc := c.Bucket(bucketName).DefaultCollection()
	waitUntil(t, managementReady, "the reader to be able to read", func() error {
		_, err := rc.Get(key, &gocb.GetOptions{Timeout: 2 * time.Second})
		return err
	})
	_, err = rc.Upsert(key, "overwritten", &gocb.UpsertOptions{Timeout: 5 * time.Second, RetryStrategy: failFast{}})
	requireErrorIs(t, err, gocb.ErrAuthenticationFailure, "Upsert as data_reader")
	res, err := collection.Get(key, nil)
	requireNoError(t, err, "Get")
	var v string
	requireNoError(t, res.Content(&v), "Content")
	if v != "seeded" {
		t.Fatalf("reader's write went through: %q", v)
	}
}

// A data_writer[default] user can write but not read.
func TestDataWriterUser(t *testing.T) {
	users := cluster.Users()
	name := uniqueName("writer")
	requireNoError(t, users.UpsertUser(gocb.User{Username: name, Password: "writer-pw",
		Roles: []gocb.Role{{Name: "data_writer", Bucket: bucketName}}}, nil), "UpsertUser")
	defer func() { _ = users.DropUser(name, nil) }()

	c, err := connectAs(srv, "", name, "writer-pw")
	requireNoError(t, err, "Connect as writer")
	defer c.Close(nil)
	wc := c.Bucket(bucketName).DefaultCollection()
	key := uniqueKey(t)
	waitUntil(t, managementReady, "the writer to be able to write", func() error {
		_, err := wc.Upsert(key, "by-writer", &gocb.UpsertOptions{Timeout: 2 * time.Second})
		return err
	})
	_, err = wc.Get(key, &gocb.GetOptions{Timeout: 5 * time.Second, RetryStrategy: failFast{}})
	requireErrorIs(t, err, gocb.ErrAuthenticationFailure, "Get as data_writer")
}

// GetUser/DropUser of a missing user fail with ErrUserNotFound.
func TestMissingUser(t *testing.T) {
	users := cluster.Users()
	_, err := users.GetUser(uniqueName("ghost"), nil)
	requireErrorIs(t, err, gocb.ErrUserNotFound, "GetUser missing")
	requireErrorIs(t, users.DropUser(uniqueName("ghost"), nil), gocb.ErrUserNotFound, "DropUser missing")
}
