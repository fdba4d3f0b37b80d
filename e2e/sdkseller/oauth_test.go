package sdkseller

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"testing"
)

// A buy at a seller that requires OAuth 2.0 client credentials (the official SDK's serve()
// with verifyBearer, 60 s tokens from its own authorization server, a 401 whose challenge
// names its RFC 9728 metadata). buyflow is configured with a client id and secret only: it
// discovers the token endpoint from the 401. The seller refuses the create's token as expired
// when it arrives (scenario token_expires): buyflow gets one new token and resends the create,
// which the seller runs once, with one idempotency key. No function logs the client secret or
// a token.
func TestOAuthSellerTokenExpiresMidBuy(t *testing.T) {
	c := begin(t)
	var doc map[string]any
	if err := json.Unmarshal(body(t, "token_expires", "approved"), &doc); err != nil {
		t.Fatal(err)
	}
	doc["seller_id"] = oauthSellerID
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	id := place(t, c, "key-"+randomID(t), b)
	op := finished(t, c, id, "completed")

	rec := suite.oauth.recorded(t)
	i := slices.IndexFunc(rec.Creates, func(cr sellerCreate) bool { return cr.OperationID == id })
	if n := createsFor(rec, id); n != 1 || rec.Creates[i].MediaBuyID != op.MediaBuyID {
		t.Fatalf("the seller ran %d creates for %s (%+v), want 1 for media buy %s", n, id, rec.Creates, op.MediaBuyID)
	}
	created := rec.Creates[i]
	var expired []authRefusal
	for _, r := range rec.AuthRefusals {
		if r.Why == "expired" && r.IdempotencyKey == created.IdempotencyKey {
			expired = append(expired, r)
		}
	}
	if len(expired) != 1 || expired[0].Tool != "create_media_buy" {
		t.Fatalf("refusals of the create's key %s: %+v, want one expired create", created.IdempotencyKey, expired)
	}
	if !slices.ContainsFunc(rec.AuthRefusals, func(r authRefusal) bool { return r.Why == "no token" }) {
		t.Errorf("no token-less request was refused: buyflow did not discover the token endpoint from a 401 (%+v)", rec.AuthRefusals)
	}
	refreshes := 0
	for _, g := range rec.Grants {
		if g.ClientID != oauthClientID || g.Resource != suite.oauth.MCPURL() || g.Scope != "adcp:buy" {
			t.Errorf("grant %+v: want client %s, resource %s, scope adcp:buy", g, oauthClientID, suite.oauth.MCPURL())
		}
		if g.At >= expired[0].At && g.At <= created.At {
			refreshes++
		}
	}
	if refreshes != 1 {
		t.Errorf("%d tokens granted between the refusal and the create, want 1", refreshes)
	}

	if suite.LogPath == "" {
		t.Log("the functions log to stderr (BUYFLOW_E2E_VERBOSE=1): their logs are not searched for secrets")
		return
	}
	logs, err := os.ReadFile(suite.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{"the OAuth client secret": oauthClientSecret, "the bearer token": sellerToken}
	for i, g := range rec.Grants {
		secrets[fmt.Sprintf("token %d", i)] = g.Token
	}
	for what, s := range secrets {
		if s != "" && bytes.Contains(logs, []byte(s)) {
			t.Errorf("the functions' logs carry %s", what)
		}
	}
	if !bytes.Contains(logs, []byte(id)) {
		t.Errorf("the functions' logs (%d bytes) never name the operation: the search above searched the wrong file", len(logs))
	}
}
