package modify_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/modify"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/stagetest"
	"github.com/buyflow/buyflow/internal/workflow"
)

// A stage's terminal error reaches RecordChangeFailure as the Lambda's JSON envelope; the change,
// the buy's state and the modification_ended event carry the error's own words and its code,
// never the envelope (the buy's failure path reads it the same way).
func TestAFailedChangeReadsTheLambdaEnvelope(t *testing.T) {
	t.Parallel()
	w := newChangeWorld(t, stagetest.Options{})
	id := w.checked(t, "3500")
	msg := "terminal: media_buy_not_found: the seller does not list media buy mb-1"
	cause, _ := json.Marshal(map[string]string{"errorMessage": msg, "errorType": "TerminalError"})
	out, err := w.svc.Fail(context.Background(), workflow.OutcomeInput{Action: modify.ActionFail, OperationID: id, Tenant: stagetest.Tenant,
		Failure: &workflow.StepError{Error: "TerminalError", Cause: string(cause)}})
	if err != nil || out.Outcome != modify.OutcomeFailed {
		t.Fatalf("fail: %+v, %v", out, err)
	}
	for what, reason := range map[string]string{"the change's outcome": out.Reason, "the buy's last reason": lastReason(t, w)} {
		if strings.Contains(reason, "errorMessage") || !strings.Contains(reason, msg) {
			t.Errorf("%s = %q, want the error's own words without the envelope", what, reason)
		}
	}
	var ended *record.Event
	page, err := w.e.Store.ListEvents(context.Background(), stagetest.Tenant, w.buy.ID, record.MaxListLimit, "")
	if err != nil {
		t.Fatal(err)
	}
	for i := range page.Items {
		if page.Items[i].Type == record.EventModificationEnded {
			ended = &page.Items[i]
		}
	}
	if ended == nil {
		t.Fatal("no modification_ended event on the buy")
	}
	var detail struct {
		ErrorCode string `json:"error_code"`
	}
	_ = json.Unmarshal(ended.Detail, &detail)
	if strings.Contains(ended.Reason, "errorMessage") || detail.ErrorCode != "media_buy_not_found" {
		t.Errorf("modification_ended: reason %q, error_code %q; want the words and media_buy_not_found", ended.Reason, detail.ErrorCode)
	}
}

func lastReason(t *testing.T, w *changeWorld) string {
	t.Helper()
	st, err := w.e.Store.GetBuyState(context.Background(), stagetest.Tenant, w.buy.ID)
	if err != nil {
		t.Fatal(err)
	}
	return st.LastReason
}
