package agents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/httpapi"
	"github.com/buyflow/buyflow/internal/record"
)

// ActionRefresh is the scheduled invocation's action.
const ActionRefresh = "refresh_capabilities"

// SeedProperty is the custom resource property that carries the seed document.
const SeedProperty = "Seed"

// SeedResourceType is the CloudFormation type of the seed's custom resource.
const SeedResourceType = "Custom::BuyflowAgentsSeed"

// RefreshResult is the scheduled check's answer (its log line on AWS).
type RefreshResult struct {
	Checked int `json:"checked"`
	Failed  int `json:"failed"`
}

// Invoke dispatches one invocation of the agents function by its shape: an HTTP API
// request, a CloudFormation custom resource request or the schedule.
func (s *Service) Invoke(ctx context.Context, raw json.RawMessage) (any, error) {
	var probe struct {
		RequestType    string          `json:"RequestType"`
		ResponseURL    string          `json:"ResponseURL"`
		RequestContext json.RawMessage `json:"requestContext"`
		Action         string          `json:"action"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, fmt.Errorf("agents: invocation is not a JSON object: %w", err)
	}
	switch {
	case probe.RequestType != "" && probe.ResponseURL != "":
		var ev cfn.Event
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("agents: custom resource event: %w", err)
		}
		// LambdaWrap answers CloudFormation at ResponseURL, failures included, so a bad seed
		// fails the deployment with its message instead of hanging it for an hour.
		return cfn.LambdaWrap(s.customResource)(ctx, ev)
	case len(probe.RequestContext) > 0:
		var req events.APIGatewayV2HTTPRequest
		if err := json.Unmarshal(raw, &req); err != nil {
			return nil, fmt.Errorf("agents: http event: %w", err)
		}
		return httpapi.Recovering(s.cfg.Metrics, s.HandleHTTP)(ctx, req)
	case probe.Action == ActionRefresh:
		checked, failed, err := s.RefreshAll(ctx)
		if err != nil {
			return nil, err
		}
		s.cfg.Log.InfoContext(ctx, "capabilities checked", "checked", checked, "failed", failed)
		return RefreshResult{Checked: checked, Failed: failed}, nil
	}
	return nil, errors.New("agents: unknown invocation (not an HTTP request, a custom resource request or the schedule)")
}

// maxSeedReason bounds a refused seed's reason, JSON-encoded, in CloudFormation's response
// (4,096 bytes in all, with the ids and the stack ARN beside it).
const maxSeedReason = 3000

// clipForJSON clips s so that its JSON encoding is at most n bytes (escapes can make it up to
// six times longer than s).
func clipForJSON(s string, n int) string {
	for {
		b, _ := json.Marshal(s) // a string always marshals
		if len(b) <= n {
			return s
		}
		s = record.Clip(s, max(0, len(s)*n/len(b)-4))
	}
}

// customResource loads the seed on Create and Update; Delete leaves the registry as it is
// (operators' agents are not the stack's to delete; the table goes with the stack anyway).
func (s *Service) customResource(ctx context.Context, ev cfn.Event) (string, map[string]any, error) {
	const physicalID = "buyflow-agents-seed"
	if ev.RequestType == cfn.RequestDelete {
		return physicalID, nil, nil
	}
	doc, _ := ev.ResourceProperties[SeedProperty].(string)
	added, err := s.LoadSeed(ctx, doc)
	if err != nil {
		// The reason travels in CloudFormation's response, whose body may not exceed 4,096
		// bytes: a longer one is refused, and the stack would wait out ServiceTimeout instead
		// of failing with it. The function's log keeps the whole error.
		s.cfg.Log.ErrorContext(ctx, "agents seed refused", "err", err)
		return physicalID, nil, fmt.Errorf("agents seed: %s", clipForJSON(err.Error(), maxSeedReason))
	}
	s.cfg.Log.InfoContext(ctx, "agents seeded", "added", added)
	return physicalID, map[string]any{"Added": len(added)}, nil
}
