package approve_test

import (
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/approval"
	"github.com/buyflow/buyflow/internal/approve"
)

func TestNewRefusesIncompleteConfig(t *testing.T) {
	t.Parallel()
	_, err := approve.New(approval.Config{}, nil, "")
	for _, want := range []string{"no ledger", "no link signer", "no clock", "no task completer"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NewApprover(empty) = %v, want %q named", err, want)
		}
	}
}
