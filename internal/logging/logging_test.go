package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

func TestRedactsSecretsAtEveryDepth(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(Redact(slog.NewJSONHandler(&buf, nil)))
	log.With("taskToken", "AAAA-token").Info("parked",
		"operationId", "op-1",
		slog.Group("webhook", "signature", "sig1=:abc:", "status", "completed"),
		"Authorization", "Bearer xyz",
		"slack_bot_token", "xoxb-1",
	)
	line := buf.String()
	for _, secret := range []string{"AAAA-token", "sig1=:abc:", "Bearer xyz", "xoxb-1"} {
		if strings.Contains(line, secret) {
			t.Fatalf("log line leaks %q: %s", secret, line)
		}
	}
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got["operationId"] != "op-1" || got["taskToken"] != Redacted {
		t.Fatalf("unexpected fields: %v", got)
	}
	if wh := got["webhook"].(map[string]any); wh["status"] != "completed" || wh["signature"] != Redacted {
		t.Fatalf("group not redacted properly: %v", wh)
	}
}

func TestIsSecretKey(t *testing.T) {
	for key, want := range map[string]bool{
		"task_token": true, "X-ADCP-Signature": true, "credentialRef": true, "linkSig": true,
		"operationId": false, "status": false, "amount": false,
	} {
		if got := IsSecretKey(key); got != want {
			t.Errorf("IsSecretKey(%q) = %v, want %v", key, got, want)
		}
	}
}
