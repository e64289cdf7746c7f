package compat

import (
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

// With 0 replicas MAJORITY is satisfied by the active alone: every mutation kind succeeds with it.
func TestDurabilityMajoritySucceeds(t *testing.T) {
	key := uniqueKey(t)
	maj := gocb.DurabilityLevelMajority
	_, err := collection.Insert(key, 1, &gocb.InsertOptions{DurabilityLevel: maj})
	requireNoError(t, err, "Insert majority")
	_, err = collection.Upsert(key, 2, &gocb.UpsertOptions{DurabilityLevel: maj})
	requireNoError(t, err, "Upsert majority")
	_, err = collection.Replace(key, map[string]int{"v": 3}, &gocb.ReplaceOptions{DurabilityLevel: maj})
	requireNoError(t, err, "Replace majority")
	_, err = collection.MutateIn(key, []gocb.MutateInSpec{gocb.UpsertSpec("w", 4, nil)}, &gocb.MutateInOptions{DurabilityLevel: maj})
	requireNoError(t, err, "MutateIn majority")
	r, err := collection.Binary().Increment(key+"-ctr", &gocb.IncrementOptions{Initial: 7, DurabilityLevel: maj})
	requireNoError(t, err, "Increment majority")
	if r.Content() != 7 {
		t.Fatalf("counter %d", r.Content())
	}
	res, err := collection.Get(key, nil)
	requireNoError(t, err, "Get")
	var v map[string]int
	requireNoError(t, res.Content(&v), "Content")
	if v["v"] != 3 || v["w"] != 4 {
		t.Fatalf("document %v", v)
	}
	_, err = collection.Remove(key, &gocb.RemoveOptions{DurabilityLevel: maj})
	requireNoError(t, err, "Remove majority")
}

// Persist levels are refused on an ephemeral bucket with ErrDurabilityLevelNotAvailable (DURABILITY_INVALID_LEVEL).
func TestDurabilityPersistLevelsOnEphemeral(t *testing.T) {
	key := uniqueKey(t)
	_, err := collection.Upsert(key, 1, &gocb.UpsertOptions{DurabilityLevel: gocb.DurabilityLevelPersistToMajority})
	requireErrorIs(t, err, gocb.ErrDurabilityLevelNotAvailable, "Upsert persistToMajority")
	_, err = collection.Upsert(key, 1, &gocb.UpsertOptions{DurabilityLevel: gocb.DurabilityLevelMajorityAndPersistOnMaster})
	requireErrorIs(t, err, gocb.ErrDurabilityLevelNotAvailable, "Upsert majorityAndPersistActive")
	ex, err := collection.Exists(key, nil)
	requireNoError(t, err, "Exists")
	if ex.Exists() {
		t.Fatal("a refused durable write was stored")
	}
}

// On one node, a bucket with 1 replica cannot reach a majority: durable writes get ErrDurabilityImpossible.
func TestDurabilityImpossibleWithUnreachableReplica(t *testing.T) {
	mgr := cluster.Buckets()
	name := uniqueName("durimp")
	requireNoError(t, mgr.CreateBucket(gocb.CreateBucketSettings{BucketSettings: gocb.BucketSettings{
		Name: name, BucketType: gocb.EphemeralBucketType, RAMQuotaMB: 100, NumReplicas: 1,
		EvictionPolicy: gocb.EvictionPolicyTypeNoEviction}}, nil), "CreateBucket")
	defer func() { _ = mgr.DropBucket(name, nil) }()
	coll := openWritable(t, cluster, name)
	_, err := coll.Upsert("durable", 1, &gocb.UpsertOptions{DurabilityLevel: gocb.DurabilityLevelMajority, Timeout: 5 * time.Second})
	requireErrorIs(t, err, gocb.ErrDurabilityImpossible, "Upsert majority with an unreachable replica")
}
