package notify_test

import (
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/approval"
	"github.com/buyflow/buyflow/internal/notify"
)

func TestNewRefusesIncompleteConfig(t *testing.T) {
	t.Parallel()
	_, err := notify.New(approval.Config{})
	for _, want := range []string{"no ledger", "no link signer", "no clock", "no Slack client", "no public base URL", "no approvers"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NewNotifier(empty) = %v, want %q named", err, want)
		}
	}
}
