package jepsen

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

func countKind(anomalies []anomaly, kind anomalyKind) int {
	n := 0
	for _, a := range anomalies {
		if a.kind == kind {
			n++
		}
	}
	return n
}

// A write acknowledged after the final read began (the end-of-run probe write) is no lost write: the final read
// may rightly miss it. This broke the first short runs, which reported every key's probe write as lost.
func TestCheckValuesIgnoresWritesAfterTheFinalReadWhenComparing(t *testing.T) {
	ops := []op{
		{id: 1, kind: opWrite, value: 10, call: 100, ret: 200, outcome: outcomeOK},
		{id: 2, kind: opRead, value: 10, call: 300, ret: 400, outcome: outcomeOK},
		{id: 3, kind: opWrite, value: 11, call: 500, ret: 600, outcome: outcomeOK},
	}
	final := ops[1]
	if got := countKind(checkValues("k", "majority", ops, &final), anomalyLostWrite); got != 0 {
		t.Fatalf("a write after the final read was reported lost (%d anomalies)", got)
	}
}

// A write acknowledged before the final read began, whose value the final read does not return although the
// final value was written before it, is a lost write.
func TestCheckValuesReportsALostWriteWhenTheFinalReadMissesIt(t *testing.T) {
	ops := []op{
		{id: 1, kind: opWrite, value: 10, call: 100, ret: 200, outcome: outcomeOK},
		{id: 2, kind: opWrite, value: 11, call: 300, ret: 400, outcome: outcomeOK},
		{id: 3, kind: opRead, value: 10, call: 500, ret: 600, outcome: outcomeOK},
	}
	final := ops[2]
	if got := countKind(checkValues("k", "majority", ops, &final), anomalyLostWrite); got != 1 {
		t.Fatalf("want the lost write of 11 reported once, got %d", got)
	}
}

// A read returning a value an acknowledged write had replaced before the read began is stale; one overlapping
// that write is not.
func TestCheckValuesReportsStaleReadsOnlyWhenTheNewerWriteCompletedFirst(t *testing.T) {
	ops := []op{
		{id: 1, kind: opWrite, value: 10, call: 100, ret: 200, outcome: outcomeOK},
		{id: 2, kind: opWrite, value: 11, call: 300, ret: 400, outcome: outcomeOK},
		{id: 3, kind: opRead, value: 10, call: 350, ret: 380, outcome: outcomeOK},
		{id: 4, kind: opRead, value: 10, call: 500, ret: 600, outcome: outcomeOK},
	}
	got := checkValues("k", "majority", ops, nil)
	if countKind(got, anomalyStaleRead) != 1 || got[0].ops[len(got[0].ops)-1].id != 4 {
		t.Fatalf("want read #4 alone reported stale, got %v", got)
	}
}

// A read that finds no document shows the key's preloaded, acknowledged document lost (no key is ever deleted).
func TestCheckValuesReportsALostWriteWhenAReadFindsNoDocument(t *testing.T) {
	ops := []op{
		{id: 1, kind: opWrite, value: 10, call: 100, ret: 200, outcome: outcomeOK},
		{id: 2, kind: opRead, value: absentValue, call: 300, ret: 400, outcome: outcomeOK},
	}
	if got := countKind(checkValues("k", "majority", ops, nil), anomalyLostWrite); got != 1 {
		t.Fatalf("want the missing document reported once, got %d", got)
	}
	if lin := checkLinearizable(ops, time.Second); lin.result != porcupine.Illegal {
		t.Fatalf("a read of no document must not linearize, got %v", lin.result)
	}
}
