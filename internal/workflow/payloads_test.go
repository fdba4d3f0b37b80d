package workflow

import (
	"encoding/json"
	"slices"
	"testing"
	"time"
)

func TestSellerOutputNeedsDecision(t *testing.T) {
	tests := []struct {
		name string
		out  SellerOutput
		want bool
	}{
		{"working waits", SellerOutput{Status: StatusWorking}, false},
		{"submitted waits", SellerOutput{Status: StatusSubmitted}, false},
		{"completed", SellerOutput{Status: StatusCompleted, Terminal: true}, true},
		{"failed", SellerOutput{Status: StatusFailed, Terminal: true}, true},
		{"input required", SellerOutput{Status: StatusInputRequired}, true},
		{"deadline", SellerOutput{Status: StatusWorking, DeadlineExceeded: true}, true},
		{"budget spent", SellerOutput{Status: StatusWorking, ContinueAsNew: true, NextExecutionName: "op-g1", NextGeneration: 1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.out.NeedsDecision(); got != tt.want {
				t.Fatalf("NeedsDecision = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestActionsAreDistinct(t *testing.T) {
	seen := map[Action]bool{}
	for _, a := range Actions {
		if a == "" || seen[a] {
			t.Fatalf("action %q empty or repeated", a)
		}
		seen[a] = true
	}
	if len(Actions) != 13 {
		t.Fatalf("len(Actions) = %d, want 13", len(Actions))
	}
}

func TestFailureNamesDoNotShadowErrorNames(t *testing.T) {
	for _, f := range FailureNames {
		if slices.Contains(ErrorNames, f) {
			t.Errorf("%s is both a failure name and an error name", f)
		}
	}
}

// The Choice states read these fields without IsPresent guards: they must always be encoded.
func TestChoiceFieldsAreAlwaysEncoded(t *testing.T) {
	tests := []struct {
		v    any
		keys []string
	}{
		{SellerOutput{}, []string{"status", "terminal", "next", "continue_as_new", "deadline_exceeded"}},
		{ApprovalOutput{}, []string{"decision", "recheck_governance"}},
		{ApprovalExpiry{}, []string{"escalated"}},
		{OutcomeOutput{}, []string{"compensation_required"}},
		{GovernanceOutput{}, []string{"decision"}},
		{ExecutionInput{}, []string{"operation_id", "tenant", "config", "generation", "state_machine_arn"}},
		{PollInput{}, []string{"action", "generation", "wait"}},
	}
	for _, tt := range tests {
		b, err := json.Marshal(tt.v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		for _, k := range tt.keys {
			if _, ok := m[k]; !ok {
				t.Errorf("%T encodes without %q: %s", tt.v, k, b)
			}
		}
	}
}

func TestCallbackInputCarriesSellerOnlyWhenSet(t *testing.T) {
	b, _ := json.Marshal(CallbackInput{Action: ActionRequest, OperationID: "op", TaskToken: "tok"})
	var m map[string]any
	_ = json.Unmarshal(b, &m) // marshalled just above
	if _, ok := m["seller"]; ok {
		t.Fatalf("empty seller encoded: %s", b)
	}
	in := CallbackInput{Action: ActionPark, Seller: &SellerOutput{Status: StatusWorking, Next: WaitState{IntervalSeconds: 30}}}
	b, _ = json.Marshal(in)
	var back CallbackInput
	if err := json.Unmarshal(b, &back); err != nil || back.Seller == nil || back.Seller.Next.IntervalSeconds != 30 {
		t.Fatalf("round trip = %+v, %v", back, err)
	}
}

// IsContinuation routes on the presence of "seller": a first execution must not carry it (nor
// wait), or it would skip governance.
func TestFirstExecutionInputHasNoWaitLoopState(t *testing.T) {
	b, err := json.Marshal(ExecutionInput{OperationID: "op", Tenant: "acct", Config: DefaultRunConfig(), StateMachineARN: "arn"})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"seller", "wait"} {
		if _, ok := m[k]; ok {
			t.Fatalf("first execution input encodes %q: %s", k, b)
		}
	}
	w := StartWait(DefaultRunConfig(), time.Unix(0, 0), true, nil)
	cont := ExecutionInput{OperationID: "op", Generation: 1, Wait: &w, Seller: &Stage[SellerOutput]{Result: SellerOutput{Status: StatusWorking, Next: w}}}
	b, _ = json.Marshal(cont)
	var back ExecutionInput
	if err := json.Unmarshal(b, &back); err != nil || back.Seller == nil || back.Seller.Result.Next != w || back.Seller.Result.NeedsDecision() {
		t.Fatalf("continuation round trip %+v, %v", back, err)
	}
}
