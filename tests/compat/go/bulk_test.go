package compat

import (
	"fmt"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/couchbase/gocb/v2"
)

const bulkDocs = 5000

type bulkDoc struct {
	I   int    `json:"i"`
	Sq  int    `json:"sq"`
	Pad string `json:"pad"`
}

func bulkValue(i int) bulkDoc {
	pad := make([]byte, i%64)
	for j := range pad {
		pad[j] = 'x'
	}
	return bulkDoc{I: i, Sq: i * i, Pad: string(pad)}
}

// 5,000 upserts from 5,000 goroutines, all in flight at once, succeed; within each vBucket seqnos and CASes
// increase together; every document then reads back unchanged. gocbcore queues at most 2,048 requests per
// connection by default, so this test uses its own connection with room for all 5,000.
func TestBulkConcurrentUpserts(t *testing.T) {
	prefix := uniqueKey(t)
	c, err := connectAs(srv, srv.connStr()+"?max_queue_size=8192", adminUser, adminPassword)
	requireNoError(t, err, "Connect")
	defer c.Close(nil)
	b := c.Bucket(bucketName)
	requireNoError(t, b.WaitUntilReady(20*time.Second, nil), "WaitUntilReady")
	collection := b.DefaultCollection()
	var wg sync.WaitGroup
	errs := make([]error, bulkDocs)
	results := make([]*gocb.MutationResult, bulkDocs)
	for i := 0; i < bulkDocs; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			m, err := collection.Upsert(fmt.Sprintf("%s-%d", prefix, i), bulkValue(i), &gocb.UpsertOptions{Timeout: 30 * time.Second})
			errs[i] = err
			results[i] = m
		}(i)
	}
	wg.Wait()
	failed := 0
	var first error
	for _, err := range errs {
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d upserts failed; first: %v", failed, bulkDocs, first)
	}
	// The HLC is per vBucket: within one vBucket a higher seqno always carries a higher CAS.
	type mut struct {
		seq uint64
		cas gocb.Cas
	}
	byVB := map[uint64][]mut{}
	for _, r := range results {
		tok := r.MutationToken()
		if tok == nil || r.Cas() == 0 {
			t.Fatalf("mutation without token or CAS: %+v", r)
		}
		byVB[tok.PartitionID()] = append(byVB[tok.PartitionID()], mut{tok.SequenceNumber(), r.Cas()})
	}
	for vb, muts := range byVB {
		sort.Slice(muts, func(a, b int) bool { return muts[a].seq < muts[b].seq })
		for j := 1; j < len(muts); j++ {
			if muts[j].seq == muts[j-1].seq || muts[j].cas <= muts[j-1].cas {
				t.Fatalf("vBucket %d: seqno/CAS not strictly increasing: %+v then %+v", vb, muts[j-1], muts[j])
			}
		}
	}

	var bad atomic.Int64
	var firstBad atomic.Value
	sem := make(chan struct{}, 256)
	for i := 0; i < bulkDocs; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			res, err := collection.Get(fmt.Sprintf("%s-%d", prefix, i), &gocb.GetOptions{Timeout: 30 * time.Second})
			var got bulkDoc
			if err == nil {
				err = res.Content(&got)
			}
			if err == nil && !reflect.DeepEqual(got, bulkValue(i)) {
				err = fmt.Errorf("doc %d = %+v", i, got)
			}
			if err != nil {
				bad.Add(1)
				firstBad.CompareAndSwap(nil, err.Error())
			}
		}(i)
	}
	wg.Wait()
	if n := bad.Load(); n > 0 {
		t.Fatalf("%d documents unreadable or wrong; first: %v", n, firstBad.Load())
	}
}

// 1,000 concurrent increments of one counter lose no update.
func TestConcurrentIncrementsAreAtomic(t *testing.T) {
	key := uniqueKey(t)
	_, err := collection.Binary().Increment(key, &gocb.IncrementOptions{Initial: 0, Delta: 1})
	requireNoError(t, err, "create counter")
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := 0; i < 1000; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := collection.Binary().Increment(key, &gocb.IncrementOptions{Initial: -1, Delta: 1}); err != nil {
				failed.Add(1)
			}
		}()
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d increments failed", failed.Load())
	}
	res, err := collection.Get(key, nil)
	requireNoError(t, err, "Get")
	var n int
	requireNoError(t, res.Content(&n), "Content")
	if n != 1000 {
		t.Fatalf("counter = %d, want 1000", n)
	}
}
