package stage

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/buyflow/buyflow/internal/workflow"
)

func ActionOf(raw json.RawMessage) (workflow.Action, error) {
	var head struct {
		Action workflow.Action `json:"action"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return "", &workflow.InvalidInputError{Field: "payload", Reason: "not a JSON object: " + err.Error()}
	}
	return head.Action, nil
}

func Decode(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(v); err != nil {
		return &workflow.InvalidInputError{Field: "payload", Reason: err.Error()}
	}
	return nil
}

func UnknownAction(a workflow.Action, want string) error {
	return &workflow.InvalidInputError{Field: "action", Reason: fmt.Sprintf("%q is not one of %s", a, want)}
}
