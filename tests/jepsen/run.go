package jepsen

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/couchbase/gocb/v2"
)

// runConfig shapes one run.
type runConfig struct {
	seed int64
	// faults: how long the nemesis injects faults (the run lasts longer: formation, healing, checks).
	faults time.Duration
	// slots: node processes in all; members: how many form the cluster; maxMembers: most members at once.
	slots, members, maxMembers int
	keys                       int
	workload                   workloadConfig
	// linTimeout bounds the linearizability search of one key.
	linTimeout time.Duration
	opsMax     int
	// root: the directory each run's directory is made in.
	root string
	// omit: fault kinds left out of the schedule.
	omit map[faultKind]bool
}

// result is what one run found.
type result struct {
	seed      int64
	dir       string
	ops       []op
	keys      []keySpec
	faults    map[faultKind]int
	anomalies []anomaly
	notes     []string
	lin       map[string]linearizability
	timeline  []event
	// err: the run could not be carried out (the cluster did not form, the SDK did not connect).
	err error
}

// recoveryLimit: after the final heal, how long each key gets to be readable and writable again.
const recoveryLimit = 45 * time.Second

// afterNoRecovery: once one key did not recover, how long each next one gets (the run is failed already; this
// bounds its end).
const afterNoRecovery = 5 * time.Second

// run carries out one run: form the cluster, run the workload under the nemesis, heal, check.
func run(cfg runConfig) *result {
	res := &result{seed: cfg.seed, keys: workloadKeys(cfg.keys), faults: map[faultKind]int{}}
	if err := os.MkdirAll(cfg.root, 0o755); err != nil {
		res.err = err
		return res
	}
	dir, err := os.MkdirTemp(cfg.root, fmt.Sprintf("seed-%d-", cfg.seed))
	if err != nil {
		res.err = err
		return res
	}
	res.dir = dir
	nodes, err := newNodes(cfg.slots, dir)
	if err != nil {
		res.err = err
		return res
	}
	c := &cluster{nodes: nodes, members: map[*node]bool{}, started: time.Now()}
	defer func() {
		c.stopAll()
		_ = os.RemoveAll(filepath.Join(dir, "data"))
		res.timeline, res.notes = c.timeline, c.notes
		res.anomalies = append(c.anomalies, res.anomalies...)
	}()
	c.log("seed %d: %d nodes (%d members), %d keys, %d clients, faults for %s; logs in %s", cfg.seed, cfg.slots,
		cfg.members, cfg.keys, cfg.workload.workers, cfg.faults, dir)
	if partitionsUnavailable != "" {
		c.log("partitions disabled: %s", partitionsUnavailable)
	}
	for kind := range cfg.omit {
		c.log("left out of the schedule: %s", kind)
	}
	if err := c.form(cfg.members); err != nil {
		res.err = fmt.Errorf("forming the cluster: %w", err)
		return res
	}
	sdk, bucket, err := connectSDK(c.memberList())
	if err != nil {
		res.err = err
		return res
	}
	defer sdk.Close(nil)
	collection := bucket.DefaultCollection()
	if err := preload(collection, res.keys); err != nil {
		res.err = err
		return res
	}
	h := newHistory(c.started, cfg.opsMax)
	w := startWorkload(cfg.workload, collection, res.keys, h, cfg.seed)
	nem := &nemesis{c: c, counts: res.faults}
	sched := newScheduler(cfg.seed, cfg.members, cfg.slots-cfg.members, cfg.maxMembers, partitionsUnavailable == "",
		cfg.omit)
	faultsStarted := time.Now()
	for time.Since(faultsStarted) < cfg.faults {
		nem.run(sched.next())
	}
	c.log("faults over: final heal")
	nem.heal("delta")
	w.halt()
	c.log("clients stopped after %d operations", len(h.snapshot()))
	finals := finalReads(c, collection, res.keys, h, cfg.workload.workers)
	probeWrites(c, collection, res.keys, h, cfg.workload.workers)
	res.anomalies = append(res.anomalies, checkNodes(c, res.keys)...)
	checkSDKPing(c, bucket)
	c.stopAll()
	res.anomalies = append(res.anomalies, scanLogs(dir)...)
	res.ops = h.snapshot()
	res.anomalies = append(res.anomalies, checkHistory(res, finals, cfg.linTimeout)...)
	return res
}

func connectSDK(members []*node) (*gocb.Cluster, *gocb.Bucket, error) {
	hosts := make([]string, len(members))
	for i, m := range members {
		hosts[i] = m.kvAddr()
	}
	sdk, err := gocb.Connect("couchbase://"+strings.Join(hosts, ","), gocb.ClusterOptions{
		Authenticator: gocb.PasswordAuthenticator{Username: adminUser, Password: adminPassword},
		TimeoutsConfig: gocb.TimeoutsConfig{
			ConnectTimeout:   10 * time.Second,
			KVTimeout:        5 * time.Second,
			KVDurableTimeout: 10 * time.Second,
		},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("connecting the SDK: %w", err)
	}
	bucket := sdk.Bucket(bucketName)
	if err := bucket.WaitUntilReady(60*time.Second, nil); err != nil {
		sdk.Close(nil)
		return nil, nil, fmt.Errorf("waiting for the bucket: %w", err)
	}
	return sdk, bucket, nil
}

// preload writes every key's initial value, acknowledged, before the history starts.
func preload(collection *gocb.Collection, keys []keySpec) error {
	for _, k := range keys {
		err := waitFor(60*time.Second, func() error {
			_, err := collection.Upsert(k.name, document{V: initialValue}, &gocb.UpsertOptions{
				DurabilityLevel: durability(k.level), Timeout: 10 * time.Second})
			return err
		})
		if err != nil {
			return fmt.Errorf("preloading %s: %w", k.name, err)
		}
	}
	return nil
}

// finalReads reads every key once the cluster is healed and the clients stopped, recording the reads in the
// history (as client `client`): the values the lost-write check compares with what was acknowledged.
func finalReads(c *cluster, collection *gocb.Collection, keys []keySpec, h *history, client int) map[string]*op {
	out := map[string]*op{}
	limit := recoveryLimit
	for _, k := range keys {
		var read *op
		err := waitFor(limit, func() error {
			o := h.begin(client, k.name, k.level, opRead, 0, 0)
			if o == nil {
				return errors.New("history full")
			}
			value, _, err := get(collection, k.name, 5*time.Second)
			if err != nil {
				h.end(o, outcomeFailed, 0, err)
				return err
			}
			h.end(o, outcomeOK, value, nil)
			read = o
			return nil
		})
		if err != nil {
			c.problem(anomalyNoRecovery, "%s cannot be read %s after the final heal: %v", k.name, limit, shortError(err))
			limit = afterNoRecovery
			continue
		}
		copied := *read
		out[k.name] = &copied
	}
	return out
}

// probeWrites checks that every key takes a write again after the final heal (recorded in the history too).
func probeWrites(c *cluster, collection *gocb.Collection, keys []keySpec, h *history, client int) {
	limit := recoveryLimit
	for _, k := range keys {
		err := waitFor(limit, func() error {
			value := h.uniqueValue()
			o := h.begin(client, k.name, k.level, opWrite, value, 0)
			if o == nil {
				return errors.New("history full")
			}
			_, err := collection.Upsert(k.name, document{V: value}, &gocb.UpsertOptions{
				DurabilityLevel: durability(k.level), Timeout: 5 * time.Second})
			h.end(o, writeOutcome(err), 0, err)
			return err
		})
		if err != nil {
			c.problem(anomalyNoRecovery, "%s takes no %s write %s after the final heal: %v", k.name, k.level,
				limit, shortError(err))
			limit = afterNoRecovery
		}
	}
}

// checkNodes runs the end-of-run checks on the nodes: replicas caught up and equal to their actives, no failed
// persistence, every member's KV service answering a fresh connection.
func checkNodes(c *cluster, keys []keySpec) []anomaly {
	via, err := c.orchestrator()
	if err != nil {
		return []anomaly{{kind: anomalyNoRecovery, at: -1, detail: "at the end: " + err.Error()}}
	}
	m, err := bucketMap(via, bucketName)
	if err != nil {
		return []anomaly{{kind: anomalyNoRecovery, at: -1, detail: "reading the final map: " + err.Error()}}
	}
	copies, err := copiesOf(m)
	if err != nil {
		return []anomaly{{kind: anomalyReplicaDivergence, at: -1, detail: err.Error()}}
	}
	var out []anomaly
	out = append(out, checkSeqnos(copies)...)
	out = append(out, checkKeyCopies(copies, keys)...)
	out = append(out, checkPersistence(c.memberList())...)
	for _, member := range c.memberList() {
		took, err := probeKV(member.kvAddr(), bucketName, 5*time.Second)
		if err != nil || took > 4*time.Second {
			out = append(out, anomaly{kind: anomalyKVUnresponsive, at: -1,
				detail: fmt.Sprintf("%s: a fresh KV connection took %s to answer a NOOP (%v)", member, took, err)})
		}
	}
	return out
}

// checkSDKPing checks that the SDK reaches every member's KV service after the final heal.
func checkSDKPing(c *cluster, bucket *gocb.Bucket) {
	var last string
	err := waitFor(recoveryLimit, func() error {
		report, err := bucket.Ping(&gocb.PingOptions{ServiceTypes: []gocb.ServiceType{gocb.ServiceTypeKeyValue},
			Timeout: 5 * time.Second})
		if err != nil {
			return err
		}
		endpoints := report.Services[gocb.ServiceTypeKeyValue]
		ok := 0
		var states []string
		for _, e := range endpoints {
			states = append(states, fmt.Sprintf("%s=%v", e.Remote, e.State))
			if e.State == gocb.PingStateOk {
				ok++
			}
		}
		last = strings.Join(states, " ")
		if ok < len(c.memberList()) || ok < len(endpoints) {
			return fmt.Errorf("KV pings: %s", last)
		}
		return nil
	})
	if err != nil {
		c.problem(anomalyKVUnresponsive, "the SDK's KV pings did not all succeed within %s: %v", recoveryLimit, err)
	}
}

// checkHistory runs the history checks on every key: values (stale reads, lost writes, phantoms) and
// linearizability.
func checkHistory(res *result, finals map[string]*op, timeout time.Duration) []anomaly {
	var out []anomaly
	res.lin = map[string]linearizability{}
	perKey := byKey(res.ops)
	for _, k := range res.keys {
		ops := perKey[k.name]
		out = append(out, checkValues(k.name, k.level, ops, finals[k.name])...)
		lin := checkLinearizable(ops, timeout)
		res.lin[k.name] = lin
		if lin.result == "Illegal" {
			out = append(out, anomaly{kind: anomalyNonLinearizable, key: k.name, level: k.level, at: -1,
				detail: fmt.Sprintf("no linearization of its %d operations (%d of unknown outcome)", len(ops), unknownCount(ops))})
		}
	}
	return out
}

// scanLogs looks for what must never appear in a node's log: a panic, a bucket whose persistence failed, a record
// the store rejected.
func scanLogs(dir string) []anomaly {
	var out []anomaly
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, path := range logs {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(raw), "\n") {
			for _, marker := range []string{"panicked at", "persistence failed", "rejected record"} {
				if strings.Contains(line, marker) {
					if len(line) > 400 {
						line = line[:400]
					}
					out = append(out, anomaly{kind: anomalyServerLog, at: -1,
						detail: fmt.Sprintf("%s: %s", filepath.Base(path), line)})
				}
			}
		}
	}
	return out
}
