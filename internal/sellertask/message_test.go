package sellertask

import (
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/adcp"
)

// The seller's words in a task status answer: its message, else the progress's current step
// (the official SDK's handoff reports only that while people work); a field of another type
// is no message and costs nothing.
func TestUpdateFromKeepsTheSellersWords(t *testing.T) {
	for raw, want := range map[string]string{
		`{"status":"working","message":"IO review by the sales team"}`:                         "IO review by the sales team",
		`{"status":"working","message":" ","progress":{"current_step":"awaiting trafficker"}}`: "awaiting trafficker",
		`{"status":"working","message":"IO review","progress":{"current_step":"step 2"}}`:      "IO review",
		`{"status":"working","message":{"text":"x"},"progress":{"current_step":7}}`:            "",
		`{"status":"submitted"}`: "",
	} {
		if got := UpdateFrom(&adcp.TaskStatusResult{Status: "working", Raw: []byte(raw)}).Message; got != want {
			t.Errorf("%s: message %q, want %q", raw, got, want)
		}
	}
	if m := Message(strings.Repeat("ü", MaxMessageBytes)); len(m) > MaxMessageBytes+len("…") || !strings.HasSuffix(m, "…") {
		t.Errorf("Message is not bounded: %d bytes", len(m))
	}
}
