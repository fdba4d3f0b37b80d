package webhookauth_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/buyflow/buyflow/internal/webhookauth"
)

// A simulated seller signs a webhook; the buyer verifies it as its API
// Gateway handler would, and maps failures to a 401 with WWW-Authenticate.
func Example() {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	jwk, _ := webhookauth.PublicJWK("seller-2026", key)
	now := func() time.Time { return time.Unix(1776520800, 0) }

	body := []byte(`{"idempotency_key":"whk_0123456789abcdef","operation_id":"op_1","task_id":"t_1","task_type":"create_media_buy","status":"completed","timestamp":"2026-04-18T10:00:00Z"}`)
	out, _ := http.NewRequest(http.MethodPost, "https://buyer.example.com/webhooks/op_1", nil)
	signer := &webhookauth.RFC9421Signer{KeyID: "seller-2026", Key: key, Now: now}
	if err := signer.Sign(out, body); err != nil {
		panic(err)
	}

	v, err := webhookauth.New(webhookauth.Config{JWKS: []byte(`{"keys":[` + string(jwk) + `]}`), Now: now})
	if err != nil {
		panic(err)
	}
	// From an events.APIGatewayV2HTTPRequest: "https://" + DomainName + RawPath (+ "?" + RawQueryString).
	in := webhookauth.Request{Method: "POST", URL: "https://buyer.example.com/webhooks/op_1", Header: out.Header, Body: body}
	res, err := v.Verify(context.Background(), in)
	fmt.Println(res.Mode, res.KeyID, err)

	in.Body = []byte(strings.Replace(string(body), "completed", "failed", 1))
	_, err = v.Verify(context.Background(), in)
	fmt.Println(webhookauth.Code(err))
	fmt.Println(webhookauth.WWWAuthenticate(err))
	// Output:
	// rfc9421 seller-2026 <nil>
	// webhook_signature_digest_mismatch
	// Signature error="webhook_signature_digest_mismatch"
}
