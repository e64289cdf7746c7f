package jepsen

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The end-of-run checks on the nodes themselves, once the cluster is healed and the clients have stopped:
// every vBucket's replica has caught up with its active (same high seqno), every workload key has the same value
// and CAS on its active and its replica, and no bucket's persistence failed.

// convergeLimit is how long replicas get to catch up once the writes stopped.
const convergeLimit = 30 * time.Second

// vbCopies is, per vBucket, the KV addresses of its active and replica.
type vbCopies struct {
	active, replica string
}

func copiesOf(m vbucketMap) (map[uint16]vbCopies, error) {
	out := map[uint16]vbCopies{}
	for vb, chain := range m.VBucketMap {
		if len(chain) < 2 || chain[0] < 0 || chain[0] >= len(m.ServerList) {
			return nil, fmt.Errorf("vBucket %d has no active in the map: %v", vb, chain)
		}
		c := vbCopies{active: m.ServerList[chain[0]]}
		if chain[1] >= 0 && chain[1] < len(m.ServerList) {
			c.replica = m.ServerList[chain[1]]
		}
		out[uint16(vb)] = c
	}
	return out, nil
}

// checkSeqnos compares each vBucket's high seqno on its active and its replica, until they agree or
// convergeLimit passes; what still differs is an anomaly.
func checkSeqnos(copies map[uint16]vbCopies) []anomaly {
	var diverged []string
	missing := 0
	_ = waitFor(convergeLimit, func() error {
		seqnos := map[string]map[string]string{}
		for _, c := range copies {
			for _, addr := range []string{c.active, c.replica} {
				if _, ok := seqnos[addr]; ok || addr == "" {
					continue
				}
				stats, err := nodeStats(addr, bucketName, "vbucket-seqno")
				if err != nil {
					return err
				}
				seqnos[addr] = stats
			}
		}
		diverged, missing = nil, 0
		for vb, c := range copies {
			if c.replica == "" {
				missing++
				continue
			}
			name := fmt.Sprintf("vb_%d:high_seqno", vb)
			a, r := seqnos[c.active][name], seqnos[c.replica][name]
			if a != r {
				diverged = append(diverged, fmt.Sprintf("vb %d: active %s high seqno %s, replica %s %s", vb, c.active, a, c.replica, r))
			}
		}
		if len(diverged) > 0 {
			return fmt.Errorf("%d vBuckets differ", len(diverged))
		}
		return nil
	})
	var out []anomaly
	if len(diverged) > 0 {
		sort.Strings(diverged)
		shown := diverged
		if len(shown) > 10 {
			shown = shown[:10]
		}
		out = append(out, anomaly{kind: anomalySeqnoDivergence, at: -1, detail: fmt.Sprintf(
			"%d vBuckets' replicas did not reach their active's high seqno within %s: %s", len(diverged),
			convergeLimit, strings.Join(shown, "; "))})
	}
	if missing > 0 {
		out = append(out, anomaly{kind: anomalyReplicaDivergence, at: -1,
			detail: fmt.Sprintf("%d vBuckets have no replica in the final map", missing)})
	}
	return out
}

// checkKeyCopies compares each key's value and CAS on its active and its replica.
func checkKeyCopies(copies map[uint16]vbCopies, keys []keySpec) []anomaly {
	var out []anomaly
	for _, k := range keys {
		c := copies[vbucketOf(k.name)]
		if c.replica == "" {
			continue
		}
		var active, replica copyOf
		err := waitFor(convergeLimit, func() error {
			var err error
			if active, err = readCopy(c.active, k.name, false); err != nil {
				return err
			}
			if replica, err = readCopy(c.replica, k.name, true); err != nil {
				return err
			}
			if active != replica {
				return fmt.Errorf("active %s holds %+v, replica %s holds %+v", c.active, active, c.replica, replica)
			}
			return nil
		})
		if err != nil {
			out = append(out, anomaly{kind: anomalyReplicaDivergence, key: k.name, level: k.level, at: -1,
				detail: fmt.Sprintf("vBucket %d after %s: %v", vbucketOf(k.name), convergeLimit, err)})
		}
	}
	return out
}

func readCopy(addr, key string, replica bool) (copyOf, error) {
	c, err := dialKV(addr, bucketName, 5*time.Second)
	if err != nil {
		return copyOf{}, err
	}
	defer c.close()
	return c.getCopy(key, replica)
}

// checkPersistence asks every member whether its bucket's persistence failed (TMPFAIL until restart).
func checkPersistence(members []*node) []anomaly {
	var out []anomaly
	for _, m := range members {
		stats, err := nodeStats(m.kvAddr(), bucketName, "")
		if err != nil {
			out = append(out, anomaly{kind: anomalyKVUnresponsive, at: -1, detail: fmt.Sprintf("%s: STAT: %v", m, err)})
			continue
		}
		if failed, _ := strconv.Atoi(stats["ep_persistence_failed"]); failed != 0 {
			out = append(out, anomaly{kind: anomalyPersistenceFailed, at: -1,
				detail: fmt.Sprintf("%s: the bucket's persistence failed (writes refused until restart)", m)})
		}
	}
	return out
}
