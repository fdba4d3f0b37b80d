package sdkseller

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/api"
)

// A buy at a seller that requires OAuth 2.0 client credentials (the official SDK's serve()
// with verifyBearer, 60 s tokens from its own authorization server, a 401 whose challenge
// names its RFC 9728 metadata). buyflow is configured with a client id and secret only: it
// discovers the token endpoint from the 401. The seller refuses the create's token as expired
// when it arrives (scenario token_expires): buyflow gets one new token and resends the create,
// which the seller runs once, with one idempotency key. (No function logs the client secret
// or a token: logsHoldNoSecret, after the suite.)
func TestOAuthSellerTokenExpiresMidBuy(t *testing.T) {
	c := begin(t)
	id := place(t, c, "key-"+randomID(t), withSeller(t, oauthSellerID, "token_expires"))
	rec, _ := renewedOnce(t, suite.oauth, id, finished(t, c, id, "completed"))
	if !slices.ContainsFunc(rec.AuthRefusals, func(r authRefusal) bool { return r.Why == "no token" }) {
		t.Errorf("no token-less request was refused: buyflow did not discover the token endpoint from a 401 (%+v)", rec.AuthRefusals)
	}
}

// renewedOnce checks, at an OAuth seller whose token expired as buy id's create arrived, that
// the seller ran the create once, for the buy's media buy, that the only refusal of the create's
// idempotency key was that expired token, and that exactly one token was granted between that
// refusal and the create. It returns the seller's record and the refusal.
func renewedOnce(t *testing.T, s *sdkSeller, id string, op api.MediaBuy) (recorded, authRefusal) {
	t.Helper()
	rec := s.recorded(t)
	i := slices.IndexFunc(rec.Creates, func(cr sellerCreate) bool { return cr.OperationID == id })
	if n := createsFor(rec, id); n != 1 || rec.Creates[i].MediaBuyID != op.MediaBuyID {
		t.Fatalf("the seller ran %d creates for %s (%+v), want 1 for media buy %s", n, id, rec.Creates, op.MediaBuyID)
	}
	created := rec.Creates[i]
	var refused []authRefusal
	for _, r := range rec.AuthRefusals {
		if r.IdempotencyKey == created.IdempotencyKey {
			refused = append(refused, r)
		}
	}
	if len(refused) != 1 || refused[0].Why != "expired" || refused[0].Tool != "create_media_buy" {
		t.Fatalf("refusals of the create's key %s: %+v, want one, of an expired token", created.IdempotencyKey, refused)
	}
	refreshes := 0
	for _, g := range rec.Grants {
		if g.ClientID != oauthClientID || g.Resource != s.MCPURL() || g.Scope != "adcp:buy" {
			t.Errorf("grant %+v: want client %s, resource %s, scope adcp:buy", g, oauthClientID, s.MCPURL())
		}
		if g.At >= refused[0].At && g.At <= created.At {
			refreshes++
		}
	}
	if refreshes != 1 {
		t.Errorf("%d tokens granted between the refusal and the create, want 1", refreshes)
	}
	return rec, refused[0]
}

// A seller that requires both OAuth 2.0 client credentials and signed create_media_buy (the
// SDK's serve() with verifyBearer and its own authorization server, and the SDK's request
// verifier over the stack's JWKS), whose token for the create expires as the create arrives
// (scenario token_expires): buyflow discovers the token endpoint, signs the create, gets the
// 401, takes exactly one new token and sends the create again, signed afresh (a new nonce: a
// verifier refuses a replayed one) over the same bytes with the same idempotency key; the
// verifier accepts it, the seller runs it once and the buy completes.
func TestOAuthAndSigningSellerTokenExpiresMidBuy(t *testing.T) {
	c := begin(t)
	id := place(t, c, "key-"+randomID(t), withSeller(t, oauthSigningSellerID, "token_expires"))
	rec, _ := renewedOnce(t, suite.oauthSigning, id, finished(t, c, id, "completed"))

	// The create went out signed twice, with buyflow's one key: the attempt whose token expired
	// (refused by serve()'s authenticator before the verifier saw it) and the resend, which the
	// verifier accepted. Each carries its own nonce.
	nonce := regexp.MustCompile(`;nonce="([^"]+)"`)
	var refusedSig, acceptedSig []string
	for _, v := range rec.Signed {
		if v.SignatureInput == "" {
			continue
		}
		for _, want := range []string{`keyid="` + suite.SigningKeyID + `"`, `tag="adcp/request-signing/v1"`, `"content-digest"`} {
			if !strings.Contains(v.SignatureInput, want) {
				t.Errorf("a signed request's Signature-Input %q lacks %s", v.SignatureInput, want)
			}
		}
		m := nonce.FindStringSubmatch(v.SignatureInput)
		if m == nil {
			t.Fatalf("no nonce in %q", v.SignatureInput)
		}
		switch {
		case v.Status == 401 && !strings.Contains(v.Challenge, "request_signature"):
			refusedSig = append(refusedSig, m[1])
		case v.Status == 200:
			acceptedSig = append(acceptedSig, m[1])
		}
	}
	if len(refusedSig) != 1 || len(acceptedSig) != 1 {
		t.Fatalf("signed requests around the create: %d refused for the token, %d accepted (%+v), want 1 and 1", len(refusedSig), len(acceptedSig), rec.Signed)
	}
	if refusedSig[0] == acceptedSig[0] {
		t.Errorf("the resent create reused the refused one's nonce %s", refusedSig[0])
	}
}
