package httpapi_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/httpapi"
	"github.com/buyflow/buyflow/internal/record"
)

// A write that kept losing races in the ledger is a 409 the caller may send again; any other
// failure a 500. Neither body carries the error's text, both name the request.
func TestUnexpectedAnswersALostRace409(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int
		code   string
	}{
		{"a lost race, as the ledger wraps it", fmt.Errorf("modification: begin change: %w", fmt.Errorf("ledger: begin change c of b: %w", record.ErrContention)), http.StatusConflict, httpapi.CodeConcurrentWrite},
		{"a failed condition is not a race", fmt.Errorf("ledger: %w", record.ErrConflict), http.StatusInternalServerError, "internal"},
		{"anything else", errors.New("secret detail: connection reset"), http.StatusInternalServerError, "internal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logged bytes.Buffer
			resp := httpapi.Unexpected(slog.New(slog.NewTextHandler(&logged, nil)), "req-7", tt.err)
			var p api.Problem
			if err := json.Unmarshal([]byte(resp.Body), &p); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status || p.Error.Code != tt.code || !strings.Contains(p.Error.Message, "req-7") ||
				!strings.Contains(p.Error.Message, "same Idempotency-Key") {
				t.Errorf("%d %s, want %d %s naming the request and the retry", resp.StatusCode, resp.Body, tt.status, tt.code)
			}
			if strings.Contains(resp.Body, "ledger:") || strings.Contains(resp.Body, "secret") {
				t.Errorf("the body carries the error's text: %s", resp.Body)
			}
			if !strings.Contains(logged.String(), "req-7") {
				t.Errorf("the log lacks the request id: %s", logged.String())
			}
			if (tt.status == http.StatusConflict) != (resp.Headers["Retry-After"] == "1") {
				t.Errorf("Retry-After %q", resp.Headers["Retry-After"])
			}
		})
	}
}
