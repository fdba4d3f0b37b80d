package modify

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/buyflow/buyflow/internal/workflow"
)

// The change stages refuse a payload that does not name the operation and its tenant before
// they read anything.
func TestHandleRefusesAnUnnamedOperation(t *testing.T) {
	s := New(nil, nil, Policy{}, Config{})
	for _, raw := range []string{`{"action":"check_change","tenant":"t"}`, `{"action":"update","operation_id":"op-1"}`, `{"action":"apply"}`} {
		_, err := s.Handle(context.Background(), json.RawMessage(raw))
		if invalid, ok := err.(*workflow.InvalidInputError); !ok || invalid.Field != "operation_id" { //nolint:errorlint // the ASL matches the bare type: a wrapped error is the bug
			t.Errorf("%s: err = %T %v, want a bare InvalidInputError on operation_id", raw, err, err)
		}
	}
}
