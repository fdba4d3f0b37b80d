package webhook_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/sfn"
	"github.com/buyflow/buyflow/internal/webhook"
	"github.com/buyflow/buyflow/internal/webhookauth"
	"github.com/buyflow/buyflow/internal/workflow"
)

func TestGoodDeliveryIsAppliedAndWakesTheToken(t *testing.T) {
	for _, seller := range []string{seller9421, sellerHMAC} {
		t.Run(seller, func(t *testing.T) {
			e := newEnv(t)
			e.op("op-1", seller, true)
			resp := e.deliver("op-1", seller, payload("op-1", "completed", key("a")), signOpts{})
			if resp.StatusCode != http.StatusOK || outcome(t, resp) != webhook.OutcomeApplied {
				t.Fatalf("answer = %d %s, want 200 applied", resp.StatusCode, resp.Body)
			}
			op := e.get("op-1")
			if op.Status != workflow.StatusCompleted || op.MediaBuyID != "mb-op-1" || op.Version != 2 {
				t.Fatalf("operation = %s v%d media buy %q, want completed v2 mb-op-1", op.Status, op.Version, op.MediaBuyID)
			}
			if op.TaskToken != "" {
				t.Errorf("the woken task token is still stored")
			}
			calls := e.tasks.Completed()
			if len(calls) != 1 || calls[0].Token != "sfn-token-op-1" || calls[0].Output.Status != workflow.StatusCompleted || !calls[0].Output.Terminal {
				t.Fatalf("wakes = %+v, want one completed wake of sfn-token-op-1", calls)
			}
			if !e.hasReceipt(seller, key("a")) {
				t.Error("no receipt stored")
			}
			if evs := e.webhookEvents("op-1"); len(evs) != 1 || evs[0].To != workflow.StatusCompleted {
				t.Errorf("webhook events = %+v, want one transition to completed", evs)
			}
			log := e.logBuf.String()
			for _, secret := range []string{token("op-1"), "sfn-token-op-1", "signature", "sha256="} {
				if strings.Contains(strings.ToLower(log), strings.ToLower(secret)) {
					t.Errorf("log line contains %q: %s", secret, log)
				}
			}
			if !strings.Contains(log, `"outcome":"applied"`) || !strings.Contains(log, `"operationId":"op-1"`) || !strings.Contains(log, `"seller":"`+seller+`"`) {
				t.Errorf("log line lacks operationId/seller/outcome: %s", log)
			}
		})
	}
}

func TestNonDecisionUpdateIsAppliedWithoutWake(t *testing.T) {
	e := newEnv(t)
	e.op("op-1", seller9421, true)
	resp := e.deliver("op-1", seller9421, payload("op-1", "working", key("w")), signOpts{})
	if resp.StatusCode != http.StatusOK || outcome(t, resp) != webhook.OutcomeApplied {
		t.Fatalf("answer = %d %s", resp.StatusCode, resp.Body)
	}
	if op := e.get("op-1"); op.Status != workflow.StatusWorking || op.TaskToken == "" {
		t.Fatalf("operation = %s token kept %v, want working with the token still parked", op.Status, op.TaskToken != "")
	}
	if n := len(e.tasks.Completed()); n != 0 {
		t.Fatalf("%d wakes for a working update, want 0 (the next poll reads the ledger)", n)
	}
}

// assertNothingStored checks that a refused delivery left no receipt, no event and no
// transition, and woke nothing.
func assertNothingStored(t *testing.T, e *env, id, seller, idemKey string) {
	t.Helper()
	if e.hasReceipt(seller, idemKey) {
		t.Error("a receipt was stored")
	}
	if evs := e.webhookEvents(id); len(evs) != 0 {
		t.Errorf("events were stored: %+v", evs)
	}
	if op := e.get(id); op.Status != workflow.StatusSubmitted || op.Version != 1 {
		t.Errorf("operation moved to %s v%d", op.Status, op.Version)
	}
	if n := len(e.tasks.Completed()); n != 0 {
		t.Errorf("%d wakes", n)
	}
}

func TestSignatureFailuresAre401WithNothingStored(t *testing.T) {
	cases := []struct {
		name, seller string
		opts         signOpts
		code         string
	}{
		{"9421 corrupted signature", seller9421, signOpts{badSig: true}, "webhook_signature_invalid"},
		{"9421 body changed after signing", seller9421, signOpts{tamper: true}, "webhook_signature_digest_mismatch"},
		{"9421 expired", seller9421, signOpts{at: time.Date(2099, 1, 1, 11, 50, 0, 0, time.UTC)}, "webhook_signature_window_invalid"},
		{"hmac wrong secret", sellerHMAC, signOpts{wrongSecret: true}, "webhook_signature_invalid"},
		{"hmac body changed after signing", sellerHMAC, signOpts{tamper: true}, "webhook_signature_invalid"},
		{"hmac expired", sellerHMAC, signOpts{at: time.Date(2099, 1, 1, 11, 50, 0, 0, time.UTC)}, "webhook_signature_window_invalid"},
		{"mode mismatch: 9421 headers for an hmac seller", sellerHMAC, signOpts{mode: "9421"}, "webhook_mode_mismatch"},
		{"mode mismatch: hmac headers for a 9421 seller", seller9421, signOpts{mode: "hmac"}, "webhook_mode_mismatch"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.op("op-1", c.seller, true)
			resp := e.deliver("op-1", c.seller, payload("op-1", "completed", key("a")), c.opts)
			want := `Signature error="` + c.code + `"`
			if resp.StatusCode != http.StatusUnauthorized || resp.Headers["WWW-Authenticate"] != want {
				t.Fatalf("answer = %d WWW-Authenticate %q, want 401 %q (body %s)", resp.StatusCode, resp.Headers["WWW-Authenticate"], want, resp.Body)
			}
			assertNothingStored(t, e, "op-1", c.seller, key("a"))
			if n := e.count("NONCE#"); n != 0 {
				t.Errorf("%d replay nonces stored for a refused signature", n)
			}
		})
	}
}

func TestReplayedNonceIsRefused(t *testing.T) {
	e := newEnv(t)
	e.op("op-1", seller9421, true)
	req := e.request("op-1", seller9421, mustJSON(t, payload("op-1", "working", key("a"))), signOpts{})
	if resp := e.post(req); resp.StatusCode != http.StatusOK {
		t.Fatalf("first delivery = %d %s", resp.StatusCode, resp.Body)
	}
	// The very same signed request again (a captured replay, not a seller retry).
	resp := e.post(req)
	if resp.StatusCode != http.StatusUnauthorized || resp.Headers["WWW-Authenticate"] != `Signature error="webhook_signature_replayed"` {
		t.Fatalf("replay = %d %q", resp.StatusCode, resp.Headers["WWW-Authenticate"])
	}
	if evs := e.webhookEvents("op-1"); len(evs) != 1 {
		t.Fatalf("%d webhook events, want 1", len(evs))
	}
}

// onceFailingLedger fails the first move, as a ledger outage after the receipt's claim would.
type onceFailingLedger struct {
	webhook.Ledger
	failed bool
}

func (f *onceFailingLedger) Advance(ctx context.Context, op *record.Operation, to workflow.Status, ch record.Patch, take bool) (*record.Operation, error) {
	if !f.failed {
		f.failed = true
		return nil, errors.New("dynamodb: service unavailable")
	}
	return f.Ledger.Advance(ctx, op, to, ch, take)
}

// The nonce is recorded while the receipt is claimed: a replay that found no receipt (its first
// copy's was released after a ledger failure) releases the one it claimed, and is refused as a
// replay with nothing stored.
func TestReplayWhileClaimingLeavesNoReceipt(t *testing.T) {
	e := newEnvWith(t, func(c *webhook.Config) { c.Ledger = &onceFailingLedger{Ledger: c.Ledger} })
	e.op("op-1", seller9421, true)
	req := e.request("op-1", seller9421, mustJSON(t, payload("op-1", "completed", key("a"))), signOpts{})
	if resp := e.post(req); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("first delivery = %d %s, want 503", resp.StatusCode, resp.Body)
	}
	if e.hasReceipt(seller9421, key("a")) {
		t.Fatal("the failed delivery's receipt was not released")
	}
	resp := e.post(req)
	if resp.StatusCode != http.StatusUnauthorized || resp.Headers["WWW-Authenticate"] != `Signature error="webhook_signature_replayed"` {
		t.Fatalf("replay = %d %q %s", resp.StatusCode, resp.Headers["WWW-Authenticate"], resp.Body)
	}
	assertNothingStored(t, e, "op-1", seller9421, key("a"))
	// The seller's own retry (a fresh signature) is applied.
	if resp := e.deliver("op-1", seller9421, payload("op-1", "completed", key("a")), signOpts{}); resp.StatusCode != http.StatusOK || outcome(t, resp) != webhook.OutcomeApplied {
		t.Fatalf("retry = %d %s", resp.StatusCode, resp.Body)
	}
}

// A refusal after verification records the nonce first: the same request again is a replay,
// whatever it would otherwise be refused for.
func TestRefusedAfterVerificationStillTakesTheNonce(t *testing.T) {
	e := newEnv(t)
	e.op("op-1", seller9421, true)
	p := payload("op-1", "completed", key("a"))
	p["token"] = "not-the-token-registered-for-op-1"
	req := e.request("op-1", seller9421, mustJSON(t, p), signOpts{})
	if resp := e.post(req); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("first = %d %s, want 403 token_mismatch", resp.StatusCode, resp.Body)
	}
	if n := e.count("NONCE#"); n != 1 {
		t.Fatalf("%d nonces stored, want 1", n)
	}
	if resp := e.post(req); resp.StatusCode != http.StatusUnauthorized || resp.Headers["WWW-Authenticate"] != `Signature error="webhook_signature_replayed"` {
		t.Fatalf("replay = %d %q", resp.StatusCode, resp.Headers["WWW-Authenticate"])
	}
	assertNothingStored(t, e, "op-1", seller9421, key("a"))
}

func TestCheapRefusalsComeBeforeVerification(t *testing.T) {
	e := newEnv(t)
	e.op("op-1", seller9421, true)
	big := payload("op-1", "working", key("a"))
	big["message"] = strings.Repeat("x", webhookauth.MaxBodyBytes)
	t.Run("413", func(t *testing.T) {
		if n := len(mustJSON(t, big)); n <= webhookauth.MaxBodyBytes {
			t.Fatalf("body of %d bytes is not too large", n)
		}
		// Signers refuse such bodies; sign a small one and send the big one.
		req := e.request("op-1", seller9421, mustJSON(t, payload("op-1", "working", key("a"))), signOpts{})
		req.Body = string(mustJSON(t, big))
		if resp := e.post(req); resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("answer = %d, want 413", resp.StatusCode)
		}
		req.IsBase64Encoded, req.Body = true, base64.StdEncoding.EncodeToString([]byte(req.Body))
		if resp := e.post(req); resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Fatalf("base64 answer = %d, want 413", resp.StatusCode)
		}
	})
	t.Run("415", func(t *testing.T) {
		for _, ct := range []string{"text/plain", "", "application/x-www-form-urlencoded", "application/jsonx"} {
			req := e.request("op-1", seller9421, mustJSON(t, payload("op-1", "working", key("a"))), signOpts{})
			req.Headers["content-type"] = ct
			if resp := e.post(req); resp.StatusCode != http.StatusUnsupportedMediaType {
				t.Fatalf("content-type %q: answer = %d, want 415", ct, resp.StatusCode)
			}
		}
	})
	assertNothingStored(t, e, "op-1", seller9421, key("a"))
	if n := e.count("NONCE#"); n != 0 {
		t.Errorf("%d nonces stored: the verifier ran", n)
	}
}

func TestBase64BodyIsVerifiedOverTheDecodedBytes(t *testing.T) {
	e := newEnv(t)
	e.op("op-1", seller9421, true)
	req := e.request("op-1", seller9421, mustJSON(t, payload("op-1", "completed", key("a"))), signOpts{})
	req.IsBase64Encoded, req.Body = true, base64.StdEncoding.EncodeToString([]byte(req.Body))
	if resp := e.post(req); resp.StatusCode != http.StatusOK || outcome(t, resp) != webhook.OutcomeApplied {
		t.Fatalf("answer = %d %s", resp.StatusCode, resp.Body)
	}
}

func TestTargetURIFromDomainAndRawPath(t *testing.T) {
	e := newEnv(t)
	e.op("op-1", seller9421, true)
	// The seller posted to the execute-api URL with a named stage: rawPath carries /prod.
	body := mustJSON(t, payload("op-1", "working", key("a")))
	req := e.request("op-1", seller9421, body, signOpts{})
	req.RawPath, req.RequestContext.Stage = "/prod/v1/webhooks/adcp/op-1", "prod"
	if resp := e.post(req); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a signature over another path was accepted: %d", resp.StatusCode)
	}
	// kumo prefixes $default; the signature over the real path still verifies.
	req = e.request("op-1", seller9421, body, signOpts{})
	req.RawPath = "/$default/v1/webhooks/adcp/op-1"
	if resp := e.post(req); resp.StatusCode != http.StatusOK {
		t.Fatalf("$default prefix: answer = %d %s", resp.StatusCode, resp.Body)
	}
}

func TestTargetURIFromPublicBaseURLBehindACustomDomain(t *testing.T) {
	// The create stage registered https://api.example.com/v1/webhooks/adcp/op-1; behind a custom
	// domain with an API mapping, API Gateway puts the stage, not the mapping key, in rawPath.
	e := newEnvWith(t, func(c *webhook.Config) { c.PublicBaseURL = "https://" + domain + "/" })
	e.op("op-1", seller9421, true)
	req := e.request("op-1", seller9421, mustJSON(t, payload("op-1", "working", key("a"))), signOpts{})
	req.RawPath, req.RequestContext.Stage, req.RequestContext.DomainName = "/live/v1/webhooks/adcp/op-1", "live", "d-123.execute-api.us-east-1.amazonaws.com"
	if resp := e.post(req); resp.StatusCode != http.StatusOK {
		t.Fatalf("answer = %d %s", resp.StatusCode, resp.Body)
	}
}

func TestUnknownOperationRevealsNothing(t *testing.T) {
	e := newEnv(t)
	e.op("op-1", seller9421, true)
	body := mustJSON(t, payload("op-404", "completed", key("a")))
	for _, id := range []string{"op-404", "bad#id", strings.Repeat("x", 300)} {
		resp := e.post(e.request(id, seller9421, body, signOpts{}))
		if resp.StatusCode != http.StatusUnauthorized || resp.Headers["WWW-Authenticate"] != `Signature error="webhook_signature_key_unknown"` {
			t.Fatalf("%.20s: answer = %d %q", id, resp.StatusCode, resp.Headers["WWW-Authenticate"])
		}
	}
	// A known operation and an unknown one answer an unsigned request alike.
	known := e.request("op-1", seller9421, body, signOpts{})
	unknown := e.request("op-404", seller9421, body, signOpts{})
	for _, r := range []*map[string]string{&known.Headers, &unknown.Headers} {
		delete(*r, "signature")
		delete(*r, "signature-input")
	}
	a, b := e.post(known), e.post(unknown)
	if a.StatusCode != b.StatusCode || a.Headers["WWW-Authenticate"] != b.Headers["WWW-Authenticate"] || a.Body != b.Body {
		t.Fatalf("known %d %q %s vs unknown %d %q %s", a.StatusCode, a.Headers["WWW-Authenticate"], a.Body, b.StatusCode, b.Headers["WWW-Authenticate"], b.Body)
	}
	if n := e.count("RECEIPT#"); n != 0 {
		t.Fatalf("%d receipts", n)
	}
}

func TestAuthenticatedButWrongPayloadIsRefusedWithNothingStored(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(p map[string]any)
		status int
		code   string
	}{
		{"operation_id of another operation", func(p map[string]any) { p["operation_id"] = "op-2" }, http.StatusBadRequest, "operation_mismatch"},
		{"wrong token echo", func(p map[string]any) { p["token"] = "tok-op-2-0123456789" }, http.StatusForbidden, "token_mismatch"},
		{"no token echo", func(p map[string]any) { delete(p, "token") }, http.StatusForbidden, "token_mismatch"},
		{"no idempotency_key", func(p map[string]any) { delete(p, "idempotency_key") }, http.StatusBadRequest, "invalid_payload"},
		{"bad timestamp", func(p map[string]any) { p["timestamp"] = "yesterday" }, http.StatusBadRequest, "invalid_payload"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			e.op("op-1", seller9421, true)
			e.op("op-2", seller9421, true)
			p := payload("op-1", "completed", key("a"))
			c.mutate(p)
			resp := e.deliver("op-1", seller9421, p, signOpts{})
			if resp.StatusCode != c.status || !strings.Contains(resp.Body, c.code) {
				t.Fatalf("answer = %d %s, want %d %s", resp.StatusCode, resp.Body, c.status, c.code)
			}
			assertNothingStored(t, e, "op-1", seller9421, key("a"))
			if op := e.get("op-2"); op.Version != 1 {
				t.Errorf("op-2 moved")
			}
		})
	}
}

func TestDuplicateIsAnswered2xxAndAppliedOnce(t *testing.T) {
	e := newEnv(t)
	e.op("op-1", sellerHMAC, true)
	for i := range 3 {
		// A seller retry: same body and idempotency_key, a new signature.
		resp := e.deliver("op-1", sellerHMAC, payload("op-1", "completed", key("a")), signOpts{})
		want := webhook.OutcomeApplied
		if i > 0 {
			want = webhook.OutcomeDuplicate
		}
		if resp.StatusCode != http.StatusOK || outcome(t, resp) != want {
			t.Fatalf("delivery %d = %d %s, want 200 %s", i, resp.StatusCode, resp.Body, want)
		}
		e.clock.Advance(time.Second)
	}
	if op := e.get("op-1"); op.Version != 2 {
		t.Fatalf("version %d, want 2", op.Version)
	}
	if n, m := len(e.webhookEvents("op-1")), len(e.tasks.Completed()); n != 1 || m != 1 {
		t.Fatalf("%d events, %d wakes; want 1 and 1", n, m)
	}
}

func TestOutOfOrderNeverRegresses(t *testing.T) {
	e := newEnv(t)
	e.op("op-1", seller9421, true)
	if resp := e.deliver("op-1", seller9421, payload("op-1", "completed", key("c")), signOpts{}); outcome(t, resp) != webhook.OutcomeApplied {
		t.Fatalf("completed: %s", resp.Body)
	}
	for _, st := range []string{"working", "submitted", "input-required", "failed"} {
		resp := e.deliver("op-1", seller9421, payload("op-1", st, key("late-"+st)), signOpts{})
		if resp.StatusCode != http.StatusOK || outcome(t, resp) != webhook.OutcomeStale {
			t.Fatalf("%s after completed = %d %s, want 200 stale", st, resp.StatusCode, resp.Body)
		}
	}
	op := e.get("op-1")
	if op.Status != workflow.StatusCompleted || op.Version != 2 {
		t.Fatalf("operation = %s v%d, want completed v2", op.Status, op.Version)
	}
	evs := e.webhookEvents("op-1")
	if len(evs) != 5 {
		t.Fatalf("%d webhook events, want 1 transition + 4 stale", len(evs))
	}
	for _, ev := range evs[1:] {
		if !strings.HasPrefix(ev.Reason, "stale") {
			t.Errorf("event %+v is not a stale record", ev)
		}
		// A stale delivery moved nothing: the timeline's From/To are for moves only (a
		// reader would see completed → completed, or a regression).
		if ev.From != "" || ev.To != "" || !strings.Contains(string(ev.Detail), `"current_status":"completed"`) {
			t.Errorf("stale event %+v claims a move, or lacks the status it found", ev)
		}
	}
	if n := len(e.tasks.Completed()); n != 1 {
		t.Fatalf("%d wakes, want 1", n)
	}
}

func TestGoneTokenIsStill2xx(t *testing.T) {
	e := newEnv(t)
	e.op("op-1", seller9421, true)
	e.tasks.Err = fmt.Errorf("send task success: %w", sfn.ErrTaskGone)
	resp := e.deliver("op-1", seller9421, payload("op-1", "failed", key("f")), signOpts{})
	if resp.StatusCode != http.StatusOK || outcome(t, resp) != webhook.OutcomeApplied {
		t.Fatalf("answer = %d %s", resp.StatusCode, resp.Body)
	}
	if op := e.get("op-1"); op.Status != workflow.StatusFailed || !strings.Contains(op.Reason, "failed") {
		t.Fatalf("operation = %s %q", op.Status, op.Reason)
	}
	if n := len(e.tasks.Completed()); n != 1 {
		t.Fatalf("%d wakes, want 1", n)
	}
}

func TestFailedWakeIsStill2xx(t *testing.T) {
	e := newEnv(t)
	e.op("op-1", seller9421, true)
	e.tasks.Err = errors.New("throttled")
	resp := e.deliver("op-1", seller9421, payload("op-1", "completed", key("c")), signOpts{})
	if resp.StatusCode != http.StatusOK || outcome(t, resp) != webhook.OutcomeApplied {
		t.Fatalf("answer = %d %s", resp.StatusCode, resp.Body)
	}
	if !strings.Contains(e.logBuf.String(), "throttled") {
		t.Fatalf("the failed wake is not logged: %s", e.logBuf.String())
	}
}

func TestIgnoredDeliveriesLeaveAnEvent(t *testing.T) {
	e := newEnv(t)
	e.op("op-1", seller9421, true)
	auth := payload("op-1", "auth-required", key("u"))
	tt := payload("op-1", "completed", key("v"))
	tt["task_type"] = "update_media_buy"
	for _, p := range []map[string]any{auth, tt} {
		if resp := e.deliver("op-1", seller9421, p, signOpts{}); resp.StatusCode != http.StatusOK || outcome(t, resp) != webhook.OutcomeIgnored {
			t.Fatalf("answer = %d %s, want 200 ignored", resp.StatusCode, resp.Body)
		}
	}
	if op := e.get("op-1"); op.Status != workflow.StatusSubmitted {
		t.Fatalf("operation moved to %s", op.Status)
	}
	if n := len(e.webhookEvents("op-1")); n != 2 {
		t.Fatalf("%d events, want 2", n)
	}
}

// TestCorrelationByWhatTheSignatureCovers: the URL path names the operation, the body's
// task_id must be its seller task, and a body operation_id (3.1) must agree when present.
func TestCorrelationByWhatTheSignatureCovers(t *testing.T) {
	t.Run("a 3.0 delivery without operation_id is applied", func(t *testing.T) {
		e := newEnv(t)
		e.op("op-1", seller9421, true)
		p := payload("op-1", "completed", key("a"))
		delete(p, "operation_id")
		if resp := e.deliver("op-1", seller9421, p, signOpts{}); resp.StatusCode != http.StatusOK || outcome(t, resp) != webhook.OutcomeApplied {
			t.Fatalf("answer = %d %s", resp.StatusCode, resp.Body)
		}
		if op := e.get("op-1"); op.Status != workflow.StatusCompleted || op.MediaBuyID != "mb-op-1" {
			t.Fatalf("operation = %s %q", op.Status, op.MediaBuyID)
		}
	})
	t.Run("another task is refused and nothing is stored", func(t *testing.T) {
		e := newEnv(t)
		e.op("op-1", seller9421, true)
		p := payload("op-1", "completed", key("b"))
		p["task_id"] = "task-other"
		resp := e.deliver("op-1", seller9421, p, signOpts{})
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Body, "task_mismatch") {
			t.Fatalf("answer = %d %s", resp.StatusCode, resp.Body)
		}
		if e.hasReceipt(seller9421, key("b")) || len(e.webhookEvents("op-1")) != 0 || e.get("op-1").Status != workflow.StatusSubmitted {
			t.Fatal("a refused delivery left a trace")
		}
	})
	t.Run("the completion of a synchronous create is acknowledged and changes nothing", func(t *testing.T) {
		e := newEnv(t)
		synced := e.syncOp("op-1", seller9421, "mb-sync")
		p := payload("op-1", "completed", key("c"))
		delete(p, "operation_id")
		p["task_id"] = "sync-6f1c2a8e-2b7d-4a53-9d3e-0c1a2b3c4d5e"
		resp := e.deliver("op-1", seller9421, p, signOpts{})
		if resp.StatusCode != http.StatusOK || outcome(t, resp) != webhook.OutcomeAcknowledged {
			t.Fatalf("answer = %d %s", resp.StatusCode, resp.Body)
		}
		op := e.get("op-1")
		if op.Version != synced.Version || op.SellerTaskID != "" || op.MediaBuyID != "mb-sync" {
			t.Fatalf("the operation changed: %+v", op)
		}
		if evs := e.webhookEvents("op-1"); len(evs) != 1 || !strings.HasPrefix(evs[0].Reason, "acknowledged") {
			t.Fatalf("events %+v", evs)
		}
		// A resend is a duplicate; a sync- id with the wrong token is still refused.
		if resp := e.deliver("op-1", seller9421, p, signOpts{}); outcome(t, resp) != webhook.OutcomeDuplicate {
			t.Fatalf("resend = %d %s", resp.StatusCode, resp.Body)
		}
		p["token"], p["idempotency_key"] = "tok-someone-else-0123", key("d")
		if resp := e.deliver("op-1", seller9421, p, signOpts{}); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("wrong token = %d %s", resp.StatusCode, resp.Body)
		}
	})
	t.Run("a delivery ahead of the create's recorded answer is answered 503", func(t *testing.T) {
		e := newEnv(t)
		if _, err := e.store.CreateOperation(e.ctx, record.Operation{ID: "op-1", Tenant: tenant, SellerID: seller9421,
			Status: workflow.StatusCreating, BudgetTotal: "1500.00", Currency: "USD"}); err != nil {
			t.Fatal(err)
		}
		p := payload("op-1", "completed", key("f"))
		resp := e.deliver("op-1", seller9421, p, signOpts{})
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Headers["Retry-After"] == "" {
			t.Fatalf("answer = %d %v %s", resp.StatusCode, resp.Headers, resp.Body)
		}
		if e.hasReceipt(seller9421, key("f")) || e.get("op-1").Status != workflow.StatusCreating {
			t.Fatal("the early delivery was stored")
		}
	})
	t.Run("another task after a synchronous create is refused", func(t *testing.T) {
		e := newEnv(t)
		e.syncOp("op-1", seller9421, "mb-sync")
		p := payload("op-1", "completed", key("e"))
		p["task_id"] = "task-guess"
		if resp := e.deliver("op-1", seller9421, p, signOpts{}); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("answer = %d %s", resp.StatusCode, resp.Body)
		}
	})
}

// failingLedger fails every move and records receipt releases.
type failingLedger struct {
	webhook.Ledger
	released []string
}

func (f *failingLedger) Transition(context.Context, string, string, workflow.Status, int64, record.Patch) (*record.Operation, error) {
	return nil, errors.New("dynamodb: service unavailable")
}

func (f *failingLedger) Advance(context.Context, *record.Operation, workflow.Status, record.Patch, bool) (*record.Operation, error) {
	return nil, errors.New("dynamodb: service unavailable")
}

func (f *failingLedger) ReleaseReceipt(_ context.Context, sellerID, key string) error {
	f.released = append(f.released, sellerID+"/"+key)
	return nil
}

func TestLedgerFailureAfterTheReceiptIs503AndReleasesIt(t *testing.T) {
	var fl *failingLedger
	e := newEnvWith(t, func(c *webhook.Config) {
		fl = &failingLedger{Ledger: c.Ledger}
		c.Ledger = fl
	})
	e.op("op-1", seller9421, true)
	resp := e.deliver("op-1", seller9421, payload("op-1", "completed", key("a")), signOpts{})
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Headers["Retry-After"] == "" || strings.Contains(resp.Body, "dynamodb") {
		t.Fatalf("answer = %d %v %s, want 503 with Retry-After and no internal detail", resp.StatusCode, resp.Headers, resp.Body)
	}
	if len(fl.released) != 1 || fl.released[0] != seller9421+"/"+key("a") {
		t.Fatalf("released %v", fl.released)
	}
	if n := len(e.tasks.Completed()); n != 0 {
		t.Fatalf("%d wakes", n)
	}
}
