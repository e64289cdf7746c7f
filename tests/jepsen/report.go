package jepsen

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"
)

// summary is one run's outcome in numbers (printed as JSON, and summed over runs by scripts/jepsen.sh).
type summary struct {
	Seed            int64          `json:"seed"`
	Passed          bool           `json:"passed"`
	Error           string         `json:"error,omitempty"`
	Operations      opCounts       `json:"operations"`
	Faults          map[string]int `json:"faults"`
	Anomalies       map[string]int `json:"anomalies"`
	Linearizability linCounts      `json:"linearizability"`
	Notes           int            `json:"notes"`
	Kept            string         `json:"kept,omitempty"`
}

type opCounts struct {
	Total    int `json:"total"`
	Reads    int `json:"reads"`
	Writes   int `json:"writes"`
	CAS      int `json:"cas"`
	OK       int `json:"ok"`
	Failed   int `json:"failed"`
	Mismatch int `json:"casMismatch"`
	Unknown  int `json:"unknown"`
	// Acknowledged counts acknowledged writes and CAS by durability level.
	Acknowledged map[string]int `json:"acknowledged"`
}

type linCounts struct {
	Keys      int `json:"keys"`
	Ok        int `json:"ok"`
	Illegal   int `json:"illegal"`
	Undecided int `json:"undecided"`
	// SlowestMs: the longest search of one key.
	SlowestMs int64 `json:"slowestMs"`
}

func summarize(res *result) summary {
	s := summary{Seed: res.seed, Faults: map[string]int{}, Anomalies: map[string]int{}}
	s.Operations.Acknowledged = map[string]int{}
	for _, o := range res.ops {
		s.Operations.Total++
		switch o.kind {
		case opRead:
			s.Operations.Reads++
		case opWrite:
			s.Operations.Writes++
		case opCAS:
			s.Operations.CAS++
		}
		switch o.outcome {
		case outcomeOK:
			s.Operations.OK++
			if o.kind != opRead {
				s.Operations.Acknowledged[o.level]++
			}
		case outcomeFailed:
			s.Operations.Failed++
		case outcomeMismatch:
			s.Operations.Mismatch++
		case outcomeUnknown:
			s.Operations.Unknown++
		}
	}
	for k, n := range res.faults {
		s.Faults[string(k)] = n
	}
	for _, a := range res.anomalies {
		s.Anomalies[string(a.kind)]++
	}
	for _, l := range res.lin {
		s.Linearizability.Keys++
		switch l.result {
		case porcupine.Ok:
			s.Linearizability.Ok++
		case porcupine.Illegal:
			s.Linearizability.Illegal++
		default:
			s.Linearizability.Undecided++
		}
		if ms := l.took.Milliseconds(); ms > s.Linearizability.SlowestMs {
			s.Linearizability.SlowestMs = ms
		}
	}
	s.Notes = len(res.notes)
	if res.err != nil {
		s.Error = res.err.Error()
	}
	s.Passed = res.err == nil && len(res.anomalies) == 0
	return s
}

// report prints a run's outcome: the notes, every anomaly with the history of its key around it, and the summary.
// A run that passed has its directory removed; one that did not keeps its logs, each failing key's full history
// and, for a linearizability violation, porcupine's visualization.
func report(res *result) summary {
	s := summarize(res)
	fmt.Printf("\n== seed %d: %d operations, faults %v\n", res.seed, s.Operations.Total, s.Faults)
	for _, n := range res.notes {
		fmt.Printf("  note: %s\n", n)
	}
	perKey := byKey(res.ops)
	for _, a := range res.anomalies {
		fmt.Printf("\n  ANOMALY %s\n", a)
		if a.key == "" {
			continue
		}
		printContext(perKey[a.key], a, res.timeline)
	}
	if !s.Passed {
		keepEvidence(res, perKey)
		s.Kept = res.dir
		fmt.Printf("\n  seed %d FAILED: rerun the schedule with SETTEE_JEPSEN_SEED=%d; logs and histories in %s\n",
			res.seed, res.seed, res.dir)
	} else if res.dir != "" {
		_ = os.RemoveAll(res.dir)
	}
	raw, _ := json.Marshal(s)
	fmt.Printf("JEPSEN-SUMMARY %s\n", raw)
	return s
}

// printContext prints the operations of the anomaly's key that overlap the anomaly's own, and the nemesis events
// of that stretch.
func printContext(ops []op, a anomaly, timeline []event) {
	from, to := int64(math.MaxInt64), int64(0)
	for _, o := range a.ops {
		from = min(from, o.call)
		ret := o.ret
		if ret < 0 || o.outcome == outcomeUnknown {
			ret = o.call
		}
		to = max(to, ret)
	}
	if len(a.ops) == 0 {
		from, to = 0, math.MaxInt64
	}
	from -= 1e9
	to += 1e9
	context := window(ops, from, to)
	fmt.Printf("    history of %s from %s to %s (%d operations; the full history is kept):\n", a.key, fmtTime(from),
		fmtTime(to), len(context))
	shown := context
	if len(shown) > 80 {
		shown = shown[len(shown)-80:]
		fmt.Printf("    ... (%d earlier operations)\n", len(context)-80)
	}
	for _, o := range shown {
		fmt.Printf("    %s\n", o.String())
	}
	for _, e := range timeline {
		if e.at >= from-10e9 && e.at <= to {
			fmt.Printf("    [%7.2fs] %s\n", float64(e.at)/1e9, e.what)
		}
	}
}

// keepEvidence writes each failing key's whole history, the run's timeline and porcupine's visualization of the
// keys it found no linearization for into the run's directory.
func keepEvidence(res *result, perKey map[string][]op) {
	if res.dir == "" {
		return
	}
	keys := map[string]bool{}
	for _, a := range res.anomalies {
		if a.key != "" {
			keys[a.key] = true
		}
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		var b strings.Builder
		for _, o := range perKey[k] {
			b.WriteString(o.String())
			b.WriteByte('\n')
		}
		_ = os.WriteFile(filepath.Join(res.dir, "history-"+k+".txt"), []byte(b.String()), 0o644)
		if lin, ok := res.lin[k]; ok && lin.result == porcupine.Illegal {
			_ = porcupine.VisualizePath(registerModel, lin.info, filepath.Join(res.dir, "linearizability-"+k+".html"))
		}
	}
	var b strings.Builder
	for _, e := range res.timeline {
		fmt.Fprintf(&b, "[%7.2fs] %s\n", float64(e.at)/1e9, e.what)
	}
	_ = os.WriteFile(filepath.Join(res.dir, "timeline.txt"), []byte(b.String()), 0o644)
}
