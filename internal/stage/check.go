package stage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// settle stores the checked payload and the check on the operation and moves it on.
func (s *Stage) Settle(ctx context.Context, op *record.Operation, req *Request, res *adcp.GovernanceResult, payload []byte, to workflow.Status, decision workflow.GovernanceDecision, why string) (workflow.GovernanceOutput, error) {
	if res.CheckID != "" {
		if _, _, err := s.Ledger.PutIntent(ctx, record.Intent{Tenant: op.Tenant, OperationID: op.ID, Task: IntentCheckPrefix + res.CheckID,
			IdempotencyKey: res.CheckID, Request: payload, CreatedAt: s.Now()}); err != nil {
			return workflow.GovernanceOutput{}, fmt.Errorf("stage: store checked payload of %s: %w", op.ID, err)
		}
	}
	tok, err := s.PushToken(ctx, op)
	if err != nil {
		return workflow.GovernanceOutput{}, err
	}
	hash := record.HashToken(tok)
	ch := record.Patch{WebhookTokenHash: &hash, Actor: GovernanceActor(req.Governance.AgentID), EventType: record.EventGovernanceCheck,
		Detail: record.EventDetail(map[string]any{"verdict": res.Verdict, "check_id": res.CheckID, "expires_at": res.ExpiresAt, "decision": decision, "reason": why,
			"conditions": res.Conditions})}
	if res.CheckID != "" {
		ch.GovernanceCheckID = &res.CheckID
	}
	if res.GovernanceContext != "" {
		ch.GovernanceContext = &res.GovernanceContext
	}
	exp, expErr := time.Parse(time.RFC3339, res.ExpiresAt)
	if expErr == nil {
		exp = exp.UTC()
		ch.GovernanceExpiresAt = &exp
	}
	if why != "" {
		r := record.Clip(why, 1000)
		ch.Reason = &r
	}
	if decision == workflow.GovernanceProceed && (expErr != nil || !exp.After(s.Now())) {
		// A lapsed (or undated) approval is no approval.
		return workflow.GovernanceOutput{}, &workflow.TerminalError{Code: "governance_expired", Reason: fmt.Sprintf("governance approval %s has no future expires_at (%q)", res.CheckID, res.ExpiresAt)}
	}
	cur, _, err := s.Move(ctx, op, to, ch)
	if err != nil {
		return workflow.GovernanceOutput{}, err
	}
	if cur.Status != to {
		return workflow.GovernanceOutput{}, &workflow.TerminalError{Code: "operation_moved", Reason: fmt.Sprintf("operation %s is %s, expected %s", op.ID, cur.Status, to)}
	}
	s.Log.InfoContext(ctx, "governance checked", "operationId", op.ID, "verdict", res.Verdict, "decision", decision)
	return workflow.GovernanceOutput{Decision: decision, CheckID: res.CheckID, ExpiresAt: res.ExpiresAt, Reason: why}, nil
}

// BasePayload is the create_media_buy arguments as checked: the buyer's media_buy with
// plan_id and our context echo (operation_id). The seller call adds only the envelope fields
// excluded from the idempotency hash or owned by transport (idempotency_key,
// governance_context, push_notification_config, adcp_version).
func BasePayload(op *record.Operation, req *Request) ([]byte, error) {
	m, err := DecodeObject(req.MediaBuy)
	if err != nil {
		return nil, &workflow.TerminalError{Code: "bad_stored_request", Reason: "media_buy: " + err.Error()}
	}
	m["plan_id"] = req.Governance.PlanID
	ctxObj, _ := m["context"].(map[string]any)
	if ctxObj == nil {
		ctxObj = map[string]any{}
	}
	ctxObj["operation_id"] = op.ID
	m["context"] = ctxObj
	return json.Marshal(m)
}

func DecodeObject(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("not a JSON object")
	}
	return m, nil
}

func RFC3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// countAdcpError records a failed AdCP call (or an agent answer that could not be read) in
// metrics.AdcpErrors by Code.
func (s *Stage) CountAdcpError(err error) {
	s.Metrics.Count(metrics.AdcpErrors, metrics.Dims{"Code": adcp.MetricCode(err)}, 1)
}
