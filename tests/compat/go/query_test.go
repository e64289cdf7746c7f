package compat

import (
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

// ensurePrimary creates the default bucket's primary index through gocb's query index manager and waits for it.
func ensurePrimary(t *testing.T) {
	t.Helper()
	mgr := cluster.QueryIndexes()
	err := mgr.CreatePrimaryIndex(bucketName, &gocb.CreatePrimaryQueryIndexOptions{IgnoreIfExists: true})
	requireNoError(t, err, "CreatePrimaryIndex")
	err = mgr.WatchIndexes(bucketName, nil, 30*time.Second, &gocb.WatchQueryIndexOptions{WatchPrimary: true})
	requireNoError(t, err, "WatchIndexes")
}

// loadBatch upserts n documents tagged with a batch value unique to the test and returns the batch.
func loadBatch(t *testing.T, n int) (string, *gocb.MutationState) {
	t.Helper()
	batch := uniqueName("gb")
	state := gocb.NewMutationState()
	for i := 0; i < n; i++ {
		res, err := collection.Upsert(fmt.Sprintf("%s-%d", batch, i), map[string]interface{}{"batch": batch, "num": i}, nil)
		requireNoError(t, err, "Upsert")
		state.Add(*res.MutationToken())
	}
	return batch, state
}

func queryRows[T any](t *testing.T, res *gocb.QueryResult, err error) []T {
	t.Helper()
	requireNoError(t, err, "Query")
	var out []T
	for res.Next() {
		var row T
		requireNoError(t, res.Row(&row), "Row")
		out = append(out, row)
	}
	requireNoError(t, res.Err(), "result")
	return out
}

// gocb prepares every query by default (Adhoc false): the first run prepares with auto_execute, later ones run the
// prepared name; positional and named parameters bind, and request_plus sees the writes made just before.
func TestQueryPreparedWithParameters(t *testing.T) {
	ensurePrimary(t)
	batch, _ := loadBatch(t, 4)
	q := "SELECT RAW num FROM `default` WHERE batch = $1 AND num >= $2 ORDER BY num"
	for i := 0; i < 2; i++ {
		res, err := cluster.Query(q, &gocb.QueryOptions{PositionalParameters: []interface{}{batch, 1},
			ScanConsistency: gocb.QueryScanConsistencyRequestPlus})
		got := queryRows[int](t, res, err)
		if fmt.Sprint(got) != "[1 2 3]" {
			t.Fatalf("run %d: rows %v", i, got)
		}
	}
	res, err := cluster.Query("SELECT COUNT(*) AS n FROM `default` WHERE batch = $b", &gocb.QueryOptions{
		NamedParameters: map[string]interface{}{"b": batch}, Adhoc: true, Metrics: true,
		ScanConsistency: gocb.QueryScanConsistencyRequestPlus})
	got := queryRows[map[string]int](t, res, err)
	if len(got) != 1 || got[0]["n"] != 4 {
		t.Fatalf("count %v", got)
	}
	meta, err := res.MetaData()
	requireNoError(t, err, "MetaData")
	if meta.Status != gocb.QueryStatusSuccess || meta.Metrics.ResultCount != 1 || meta.Metrics.ElapsedTime <= 0 {
		t.Fatalf("metadata %+v", meta)
	}
}

// ConsistentWith (at_plus with the mutation tokens) sees the batch's documents.
func TestQueryConsistentWith(t *testing.T) {
	ensurePrimary(t)
	batch, state := loadBatch(t, 3)
	res, err := cluster.Query("SELECT RAW META().id FROM `default` WHERE batch = $b", &gocb.QueryOptions{
		NamedParameters: map[string]interface{}{"b": batch}, ConsistentWith: state})
	got := queryRows[string](t, res, err)
	sort.Strings(got)
	if fmt.Sprint(got) != fmt.Sprintf("[%[1]s-0 %[1]s-1 %[1]s-2]", batch) {
		t.Fatalf("rows %v", got)
	}
}

// DML through gocb: INSERT then a duplicate INSERT fails with ErrDocumentExists; UPDATE ... RETURNING shows the
// change and the mutation count.
func TestQueryDML(t *testing.T) {
	ensurePrimary(t)
	key := uniqueName("gdml")
	res, err := cluster.Query("INSERT INTO `default` (KEY, VALUE) VALUES ($1, {'n': 1})",
		&gocb.QueryOptions{PositionalParameters: []interface{}{key}, Adhoc: true})
	queryRows[interface{}](t, res, err)
	res, err = cluster.Query("INSERT INTO `default` (KEY, VALUE) VALUES ($1, {'n': 2})",
		&gocb.QueryOptions{PositionalParameters: []interface{}{key}, Adhoc: true})
	if err == nil {
		for res.Next() {
		}
		err = res.Err()
	}
	if !errors.Is(err, gocb.ErrDocumentExists) {
		t.Fatalf("duplicate insert: %v", err)
	}
	res, err = cluster.Query("UPDATE `default` AS d USE KEYS $1 SET d.n = d.n + 1 RETURNING RAW d.n",
		&gocb.QueryOptions{PositionalParameters: []interface{}{key}, Metrics: true})
	got := queryRows[int](t, res, err)
	if fmt.Sprint(got) != "[2]" {
		t.Fatalf("returning %v", got)
	}
	doc, err := collection.Get(key, nil)
	requireNoError(t, err, "Get")
	var body map[string]int
	requireNoError(t, doc.Content(&body), "Content")
	if body["n"] != 2 {
		t.Fatalf("document %v", body)
	}
}

// Errors map to gocb's: a syntax error is ErrParsingFailure, a missing keyspace ErrIndexFailure or
// ErrPlanningFailure family; a missing prepared name is retried by gocb itself.
func TestQueryErrors(t *testing.T) {
	_, err := cluster.Query("SELEC 1", &gocb.QueryOptions{Adhoc: true})
	if !errors.Is(err, gocb.ErrParsingFailure) {
		t.Fatalf("syntax error: %v", err)
	}
	_, err = cluster.Query("SELECT * FROM `no-such-bucket`", &gocb.QueryOptions{Adhoc: true})
	var qerr *gocb.QueryError
	if !errors.As(err, &qerr) || qerr.Errors[0].Code != 12003 {
		t.Fatalf("missing keyspace: %v", err)
	}
}

// The query index manager: a deferred secondary index, built and watched, listed with its keys, then dropped;
// dropping it again is ErrIndexNotFound.
func TestQueryIndexManager(t *testing.T) {
	ensurePrimary(t)
	mgr := cluster.QueryIndexes()
	name := uniqueName("gix")
	err := mgr.CreateIndex(bucketName, name, []string{"num"}, &gocb.CreateQueryIndexOptions{Deferred: true})
	requireNoError(t, err, "CreateIndex")
	err = mgr.CreateIndex(bucketName, name, []string{"num"}, nil)
	if !errors.Is(err, gocb.ErrIndexExists) {
		t.Fatalf("duplicate index: %v", err)
	}
	_, err = mgr.BuildDeferredIndexes(bucketName, nil)
	requireNoError(t, err, "BuildDeferredIndexes")
	requireNoError(t, mgr.WatchIndexes(bucketName, []string{name}, 30*time.Second, nil), "WatchIndexes")
	all, err := mgr.GetAllIndexes(bucketName, nil)
	requireNoError(t, err, "GetAllIndexes")
	found := false
	for _, ix := range all {
		if ix.Name == name {
			found = ix.State == "online" && fmt.Sprint(ix.IndexKey) == "[`num`]"
		}
	}
	if !found {
		t.Fatalf("index %s not listed online with its key: %+v", name, all)
	}
	requireNoError(t, mgr.DropIndex(bucketName, name, nil), "DropIndex")
	if err := mgr.DropIndex(bucketName, name, nil); !errors.Is(err, gocb.ErrIndexNotFound) {
		t.Fatalf("second drop: %v", err)
	}
}
