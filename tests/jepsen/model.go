package jepsen

import (
	"fmt"
	"math"

	"github.com/anishathalye/porcupine"
)

// The linearizability model: each key is a register holding one value, read with GET, overwritten with UPSERT and
// compare-and-set with REPLACE and a CAS. Values are unique in a run, so the CAS token a client read stands for
// the value it read with it: the REPLACE succeeds exactly when the register still holds that value.

// regInput is an operation's invocation as the model sees it.
type regInput struct {
	kind   opKind
	value  int64
	expect int64
}

// regOutput is its completion. Operations whose outcome the client does not know complete "never" (their
// porcupine return time is the end of time), so the checker may place them anywhere after their invocation,
// including after everything else, where they change nothing observed.
type regOutput struct {
	outcome outcome
	value   int64
}

// registerModel is the per-key sequential specification; the state is the register's value (an int64).
var registerModel = porcupine.Model{
	Init: func() interface{} { return initialValue },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		return step(state.(int64), input.(regInput), output.(regOutput))
	},
	Equal: func(a, b interface{}) bool { return a.(int64) == b.(int64) },
	Hash:  func(s interface{}) uint64 { return uint64(s.(int64)) },
	DescribeOperation: func(input, output interface{}) string {
		in, out := input.(regInput), output.(regOutput)
		switch in.kind {
		case opRead:
			return fmt.Sprintf("read -> %d", out.value)
		case opWrite:
			return fmt.Sprintf("write %d (%s)", in.value, out.outcome)
		default:
			return fmt.Sprintf("cas %d -> %d (%s)", in.expect, in.value, out.outcome)
		}
	},
	DescribeState: func(s interface{}) string { return fmt.Sprint(s.(int64)) },
}

// step is the register's transition: whether an operation with this outcome is possible in `state`, and the
// state after it.
func step(state int64, in regInput, out regOutput) (bool, int64) {
	switch in.kind {
	case opRead:
		return out.value == state, state
	case opWrite:
		// Acknowledged, or possibly applied and placed here: either way it sets the register.
		return true, in.value
	default:
		switch out.outcome {
		case outcomeOK:
			return state == in.expect, in.value
		case outcomeMismatch:
			return state != in.expect, state
		default:
			// Possibly applied: if it took effect here, it set the register exactly when it held `expect`.
			if state == in.expect {
				return true, in.value
			}
			return true, state
		}
	}
}

// porcupineOps turns one key's operations into porcupine's: failed reads and writes refused by the server are
// left out (they observed and changed nothing), writes of unknown outcome never return.
func porcupineOps(ops []op) []porcupine.Operation {
	out := make([]porcupine.Operation, 0, len(ops))
	for _, o := range ops {
		if o.outcome == outcomeFailed {
			continue
		}
		ret := o.ret
		if o.outcome == outcomeUnknown || ret < 0 {
			ret = math.MaxInt64
		}
		out = append(out, porcupine.Operation{
			ClientId: o.client,
			Input:    regInput{kind: o.kind, value: o.value, expect: o.expect},
			Call:     o.call,
			Output:   regOutput{outcome: o.outcome, value: o.value},
			Return:   ret,
		})
	}
	return out
}
