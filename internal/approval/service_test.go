package approval_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/approval"
)

func TestApprovalIDIsStableAndOpaque(t *testing.T) {
	t.Parallel()
	tok := token(7)
	id := approval.ApprovalID(tok)
	if id != approval.ApprovalID(tok) || id == approval.ApprovalID(token(8)) {
		t.Fatal("approval id is not a function of the token")
	}
	if len(id) != 26 || !strings.HasPrefix(id, "apr_") || strings.Contains(tok, id[4:]) {
		t.Errorf("approval id %q", id)
	}
}

// token is a task token of Step Functions' shape and size.
func token(n int) string {
	return fmt.Sprintf("AQB%04d", n) + strings.Repeat("x9Z-_", 260)
}
