package jepsen

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(envInNamespace) != "":
		if err := loopbackUp(); err != nil {
			fmt.Fprintf(os.Stderr, "jepsen: no loopback in the network namespace: %v\n", err)
			os.Exit(2)
		}
		if err := setUpNamespace(); err != nil {
			partitionsUnavailable = err.Error()
		} else {
			partitionsUnavailable = ""
		}
	case os.Getenv("SETTEE_JEPSEN_NO_NETNS") != "":
		partitionsUnavailable = "SETTEE_JEPSEN_NO_NETNS is set"
	default:
		code, err := reexecInNamespace()
		if err == nil {
			os.Exit(code)
		}
		partitionsUnavailable = "cannot create a network namespace (needs root): " + err.Error()
	}
	os.Exit(m.Run())
}

func envInt(name string, fallback int64) int64 {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err == nil {
			return n
		}
		fmt.Fprintf(os.Stderr, "jepsen: ignoring %s=%q: %v\n", name, v, err)
	}
	return fallback
}

// omitted parses SETTEE_JEPSEN_OMIT: fault kinds, separated by commas, to leave out of the schedule (e.g.
// "kill-9,partition").
func omitted(list string) map[faultKind]bool {
	out := map[faultKind]bool{}
	for _, kind := range strings.Split(list, ",") {
		if kind = strings.TrimSpace(kind); kind != "" {
			out[faultKind(kind)] = true
		}
	}
	return out
}

// TestBlackBox runs the black-box checker: SETTEE_JEPSEN_RUNS runs (default 1) of SETTEE_JEPSEN_SECONDS seconds
// of faults each (default 60, the CI setting), the first with seed SETTEE_JEPSEN_SEED (default: the time) and
// each next one with the next seed, on SETTEE_JEPSEN_NODES node processes (default 4) of which
// SETTEE_JEPSEN_MEMBERS (default 3) form the cluster, without the fault kinds SETTEE_JEPSEN_OMIT names. It proves
// that under every fault of the schedule no acknowledged write is lost, every key's history is linearizable, no
// read is stale, replicas end equal to their actives and the cluster recovers; it fails on any anomaly, printing
// the seed that repeats the schedule and the failing key's history.
func TestBlackBox(t *testing.T) {
	if _, err := os.Stat(setteeBinary()); err != nil {
		t.Fatalf("settee binary not found at %s (build with `cargo build -p settee-server --bin settee` or set SETTEE_BIN)", setteeBinary())
	}
	for kind := range omitted(os.Getenv("SETTEE_JEPSEN_OMIT")) {
		if !knownFault(kind) {
			t.Fatalf("SETTEE_JEPSEN_OMIT names %q, which is no fault kind", kind)
		}
	}
	runs := envInt("SETTEE_JEPSEN_RUNS", 1)
	seed := envInt("SETTEE_JEPSEN_SEED", time.Now().UnixNano()%1_000_000_000)
	slots := int(envInt("SETTEE_JEPSEN_NODES", 4))
	cfg := runConfig{
		faults:     time.Duration(envInt("SETTEE_JEPSEN_SECONDS", 60)) * time.Second,
		slots:      slots,
		members:    int(envInt("SETTEE_JEPSEN_MEMBERS", 3)),
		maxMembers: min(slots, 4),
		keys:       16,
		workload: workloadConfig{workers: 8, readTimeout: 2 * time.Second, writeTimeout: 4 * time.Second,
			think: 20 * time.Millisecond},
		linTimeout: time.Duration(envInt("SETTEE_JEPSEN_LIN_SECONDS", 30)) * time.Second,
		opsMax:     2_000_000,
		root:       filepath.Join(os.TempDir(), "settee-jepsen"),
		omit:       omitted(os.Getenv("SETTEE_JEPSEN_OMIT")),
	}
	total := totals{Faults: map[string]int{}, Anomalies: map[string]int{}}
	for i := int64(0); i < runs; i++ {
		cfg.seed = seed + i
		fmt.Printf("\n==== run %d/%d, seed %d\n", i+1, runs, cfg.seed)
		s := report(run(cfg))
		total.add(s)
		if !s.Passed {
			t.Errorf("seed %d: %s %v (kept in %s)", s.Seed, s.Error, s.Anomalies, s.Kept)
		}
	}
	raw, _ := json.Marshal(total)
	fmt.Printf("JEPSEN-TOTAL %s\n", raw)
}

// totals sums the summaries of several runs.
type totals struct {
	Runs        int            `json:"runs"`
	Failed      int            `json:"failed"`
	FailedSeeds []int64        `json:"failedSeeds"`
	Operations  int            `json:"operations"`
	Acked       int            `json:"acknowledgedWrites"`
	Unknown     int            `json:"unknownWrites"`
	Faults      map[string]int `json:"faults"`
	Anomalies   map[string]int `json:"anomalies"`
	Undecided   int            `json:"undecidedKeys"`
}

func (t *totals) add(s summary) {
	t.Runs++
	if !s.Passed {
		t.Failed++
		t.FailedSeeds = append(t.FailedSeeds, s.Seed)
	}
	t.Operations += s.Operations.Total
	for _, n := range s.Operations.Acknowledged {
		t.Acked += n
	}
	t.Unknown += s.Operations.Unknown
	for k, n := range s.Faults {
		t.Faults[k] += n
	}
	for k, n := range s.Anomalies {
		t.Anomalies[k] += n
	}
	t.Undecided += s.Linearizability.Undecided
}
