package stages

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/buyflow/buyflow/internal/workflow"
)

// Handle handles the governance function's payload: actions check, report and fail.
// Errors come back bare (workflow.TaskError), so the ASL's ErrorEquals match them.
func (s *Governance) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	out, err := s.handle(ctx, raw)
	if err != nil {
		return nil, workflow.TaskError(err)
	}
	return out, nil
}

func (s *Governance) handle(ctx context.Context, raw json.RawMessage) (any, error) {
	action, err := actionOf(raw)
	if err != nil {
		return nil, err
	}
	switch action {
	case workflow.ActionCheck:
		var in workflow.StageInput
		if err := decode(raw, &in); err != nil {
			return nil, err
		}
		return s.Check(ctx, in)
	case workflow.ActionReport:
		var in workflow.OutcomeInput
		if err := decode(raw, &in); err != nil {
			return nil, err
		}
		return s.Report(ctx, in)
	case workflow.ActionFail:
		var in workflow.OutcomeInput
		if err := decode(raw, &in); err != nil {
			return nil, err
		}
		return s.Fail(ctx, in)
	}
	return nil, unknownAction(action, "check, report, fail")
}

// Handle handles the create function's payload: actions create and cancel.
func (s *Create) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	out, err := s.handle(ctx, raw)
	if err != nil {
		return nil, workflow.TaskError(err)
	}
	return out, nil
}

func (s *Create) handle(ctx context.Context, raw json.RawMessage) (any, error) {
	action, err := actionOf(raw)
	if err != nil {
		return nil, err
	}
	var in workflow.StageInput
	if err := decode(raw, &in); err != nil {
		return nil, err
	}
	switch action {
	case workflow.ActionCreate:
		return s.CreateMediaBuy(ctx, in)
	case workflow.ActionCancel:
		return s.Cancel(ctx, in)
	}
	return nil, unknownAction(action, "create, cancel")
}

// Handle handles the poll function's payload: actions park and poll.
func (s *Poll) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	out, err := s.handle(ctx, raw)
	if err != nil {
		return nil, workflow.TaskError(err)
	}
	return out, nil
}

func (s *Poll) handle(ctx context.Context, raw json.RawMessage) (any, error) {
	action, err := actionOf(raw)
	if err != nil {
		return nil, err
	}
	switch action {
	case workflow.ActionPark:
		var in workflow.CallbackInput
		if err := decode(raw, &in); err != nil {
			return nil, err
		}
		if err := s.Park(ctx, in); err != nil {
			return nil, err
		}
		// The Lambda's own result is ignored by a waitForTaskToken state.
		return map[string]bool{"parked": true}, nil
	case workflow.ActionPoll:
		var in workflow.PollInput
		if err := decode(raw, &in); err != nil {
			return nil, err
		}
		return s.PollSeller(ctx, in)
	}
	return nil, unknownAction(action, "park, poll")
}

func actionOf(raw json.RawMessage) (workflow.Action, error) {
	var head struct {
		Action workflow.Action `json:"action"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return "", &workflow.InvalidInputError{Field: "payload", Reason: "not a JSON object: " + err.Error()}
	}
	return head.Action, nil
}

func decode(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(v); err != nil {
		return &workflow.InvalidInputError{Field: "payload", Reason: err.Error()}
	}
	return nil
}

func unknownAction(a workflow.Action, want string) error {
	return &workflow.InvalidInputError{Field: "action", Reason: fmt.Sprintf("%q is not one of %s", a, want)}
}
