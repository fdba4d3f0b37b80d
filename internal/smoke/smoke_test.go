package smoke

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/api"
)

// ev is a timeline event at second s past 06:00:00.
func ev(s, typ, to, reason, detail string) api.Event {
	e := api.Event{At: "2026-12-02T06:00:" + s + "Z", Type: typ, To: to, Reason: reason}
	if detail != "" {
		e.Detail = json.RawMessage(detail)
	}
	return e
}

// The timeline of a buy at the local stack's agents, as the ledger recorded it.
var completedTimeline = []api.Event{
	ev("00.000", "created", "requested", "", ""),
	ev("00.100", "transition", "checking_governance", "", `{"after_approval":false}`),
	ev("00.500", "governance_check", "", "", `{"verdict":"approved","round":1}`),
	ev("00.550", "governance_check", "creating", "", `{"verdict":"approved","decision":"proceed"}`),
	ev("00.800", "seller_call", "", "", `{"status":"submitted","task_id":"task_1","tool":"create_media_buy"}`),
	ev("00.810", "seller_call", "submitted", "", `{"task_id":"task_1","tool":"create_media_buy"}`),
	ev("01.000", "webhook", "working", "", `{"seller_status":"working","task_id":"task_1"}`),
	ev("01.400", "webhook", "completed", "", `{"seller_status":"completed","task_id":"task_1"}`),
	ev("01.500", "outcome_report", "", "", `{"outcome":"completed","outcome_state":"accepted"}`),
	ev("01.510", "lock_released", "", "", ""),
}

func TestStagesComeFromTheTimelineInOrder(t *testing.T) {
	var told []string
	got := reached(completedTimeline, nil, func(s Stage) { told = append(told, s.Name) })
	want := []string{"governance checked", "approval", "create sent", "seller task submitted", "webhook received", "completed", "outcome reported"}
	if strings.Join(told, ",") != strings.Join(want, ",") || len(got) != len(want) {
		t.Fatalf("stages %v, want %v", told, want)
	}
	if got[1].Note != "skipped (under the approval threshold)" || got[3].Note != "task task_1" || got[4].At.Seconds() != 1 || got[5].Note != "by webhook" {
		t.Errorf("stages %+v", got)
	}
	// A stage is reached only after the ones before it: a timeline without the webhook stops
	// at it even though the buy completed (by polling).
	var polled []api.Event
	for _, e := range completedTimeline {
		if e.Type == "webhook" {
			e.Type = "poll"
		}
		polled = append(polled, e)
	}
	if got := reached(polled, nil, nil); len(got) != 4 {
		t.Errorf("without a webhook the smoke reached %d stages, want 4 (up to the task): %+v", len(got), got)
	}
	// Seen stages are not told twice.
	told = nil
	reached(completedTimeline, got[:2], func(s Stage) { told = append(told, s.Name) })
	if len(told) != 5 {
		t.Errorf("told %v again", told)
	}
}

func TestDiagnosisNamesTheDeniedPermission(t *testing.T) {
	reason := "TransientError: create: write the intent: operation error DynamoDB: PutItem, https response error StatusCode: 400, " +
		"RequestID: R1, api error AccessDeniedException: User: arn:aws:sts::123456789012:assumed-role/Buyflow-CreateServiceRole1A2B/buyflow-create " +
		"is not authorized to perform: dynamodb:PutItem on resource: arn:aws:dynamodb:eu-west-1:123456789012:table/buyflow-ledger because no identity-based policy allows the dynamodb:PutItem action"
	evs := completedTimeline[:4]
	evs = append(evs, ev("01.000", "failure", "failed", reason, `{"error":"TransientError"}`))
	d := diagnose(stages[len(reached(evs, nil, nil))], api.MediaBuy{Status: "failed", Reason: reason}, evs, nil)
	if d.Stage != "create sent" || d.Permission != "dynamodb:PutItem" || d.Resource != "arn:aws:dynamodb:eu-west-1:123456789012:table/buyflow-ledger" ||
		d.Call != "DynamoDB PutItem" || !strings.Contains(d.Function, "create (role Buyflow-CreateServiceRole1A2B)") || !strings.Contains(d.Hint, "dynamodb:PutItem") {
		t.Errorf("diagnosis %+v", d)
	}
}

func TestDiagnosisOfABuyThatEndedOrStalled(t *testing.T) {
	refused := append(completedTimeline[:4:4],
		ev("00.800", "seller_call", "", "adcp: create_media_buy at s: POLICY_VIOLATION (terminal): declined", `{"error_code":"POLICY_VIOLATION"}`),
		ev("00.810", "failure", "failed", "TerminalError: …", `{"error":"TerminalError"}`))
	d := diagnose(stages[len(reached(refused, nil, nil))], api.MediaBuy{Status: "failed", Reason: "TerminalError: …"}, refused, nil)
	if d.Stage != "create sent" || d.Function != "create" || !strings.Contains(d.Reason, "POLICY_VIOLATION") || d.Permission != "" {
		t.Errorf("diagnosis of a refused buy %+v", d)
	}
	d = diagnose(stages[4], api.MediaBuy{Status: "submitted"}, completedTimeline[:6], errTimeout)
	if d.Stage != "webhook received" || d.Function != "webhook" || !strings.Contains(d.Reason, "still submitted") {
		t.Errorf("diagnosis of a stalled buy %+v", d)
	}
}

var errTimeout = &timeoutError{}

type timeoutError struct{}

func (*timeoutError) Error() string { return "context deadline exceeded" }

func TestBodyIsASmallBuyAtTheNamedAgents(t *testing.T) {
	b, err := Body(Options{SellerID: "s1", Sim: "rejected"})
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		SellerID   string `json:"seller_id"`
		Governance struct {
			AgentID string `json:"agent_id"`
		} `json:"governance"`
		MediaBuy struct {
			PO       string           `json:"po_number"`
			Packages []map[string]any `json:"packages"`
			Context  map[string]any   `json:"context"`
		} `json:"media_buy"`
	}
	if err := json.Unmarshal(b, &req); err != nil {
		t.Fatal(err)
	}
	if req.SellerID != "s1" || req.Governance.AgentID != SandboxGovernanceID || !strings.HasPrefix(req.MediaBuy.PO, "SMOKE-") ||
		len(req.MediaBuy.Packages) != 1 || req.MediaBuy.Packages[0]["budget"] != 100.0 || req.MediaBuy.Context["sim"] != "rejected" {
		t.Errorf("body %s", b)
	}
}

// FuzzDiagnose: whatever a failure's reason says (an AWS error, a seller's words), the
// diagnosis names the stage and its function, and never panics.
func FuzzDiagnose(f *testing.F) {
	f.Add("is not authorized to perform: dynamodb:PutItem on resource: arn:aws:dynamodb:x:1:table/t because", "failed")
	f.Add("assumed-role/R/s is not authorized to perform: s:A operation error X: Y", "submitted")
	f.Add("not authorized to perform: a:b on resource: ", "")
	f.Fuzz(func(t *testing.T, reason, status string) {
		evs := append(completedTimeline[:4:4], ev("01.000", "failure", "failed", reason, `{"error":"X"}`))
		d := diagnose(stages[2], api.MediaBuy{Status: status, Reason: reason}, evs, nil)
		if d.Stage != "create sent" || d.Function == "" || d.Call == "" {
			t.Fatalf("diagnosis %+v", d)
		}
	})
}
