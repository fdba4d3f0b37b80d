// Package unsigned is the end-to-end check of a deployment without a request-signing key (the
// local stack with devstack.Options.NoSigningKey) facing a seller on the official @adcp/sdk
// server that requires create_media_buy signed (its own verifier): the buy is refused at
// submit, with the seller named, and nothing reaches the seller. It needs BUYFLOW_E2E=1 and
// BUYFLOW_NODE_TESTS=1, like e2e/sdkseller, and a stack of its own (no key).
package unsigned

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/e2e/e2etest"
	"github.com/buyflow/buyflow/internal/adcp/interop"
	"github.com/buyflow/buyflow/internal/agents"
	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/devstack"
)

const (
	sellerID    = "sdk-signing-seller"
	sellerToken = "tok-sdk-signing-seller-0123456789"
)

var (
	suite struct {
		*e2etest.PeerStack
		seller *interop.Seller
	}
	skip string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if skip = e2etest.PeerSkip("unsigned suite"); skip != "" {
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "unsigned:", err)
		return 1
	}
	seller, err := interop.Start(interop.Options{Token: sellerToken, Signing: true, Webhooks: true})
	if err != nil {
		return fail(err)
	}
	defer seller.Stop()
	suite.seller = seller
	peers := []e2etest.Peer{{ID: sellerID, MCPURL: seller.Base + "/mcp", Token: sellerToken, JWKSURL: seller.Base + "/.well-known/jwks.json"}}
	st, err := e2etest.StartPeerStack(ctx, "unsigned", peers, devstack.Options{NoSigningKey: true, PortWait: 8 * time.Minute, SweepEvery: -1})
	if err != nil {
		return fail(err)
	}
	suite.PeerStack = st
	if err := seller.SetSigning(st.APIURL+"/v1/jwks.json", nil); err != nil {
		st.Close(false)
		return fail(err)
	}
	code := m.Run()
	st.Close(code == 0)
	return code
}

// A deployment without a signing key and a seller whose capabilities require signed creates:
// the check says so, and a buy to it is refused at submit (422 seller_requires_signing, the
// seller named); the seller never sees a create.
func TestBuyToASellerRequiringSignaturesIsRefusedWithoutAKey(t *testing.T) {
	if skip != "" {
		t.Skip(skip)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	op := suite.Client(t)
	op.Principal = devstack.LocalOperator
	// The operator's check, now: the seed's own check may still be running.
	rec, err := op.ChangeAgent(ctx, http.MethodPost, agents.Prefix+"/"+sellerID+"/capabilities", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.RequiresSignedCreate() || rec.Capabilities.SigningKeyID != "" {
		t.Fatalf("the check recorded %+v, want create_media_buy required signed and no key", rec.Capabilities)
	}
	if s := agents.SigningSummary(rec); !strings.Contains(s, "buyflow has no request-signing key: buys to it are refused at submit") {
		t.Errorf("summary %q", s)
	}

	c := suite.Client(t)
	_, status, err := c.Submit(ctx, "key-"+e2etest.RandomID(t), submitBody(t))
	var se *apiclient.StatusError
	if !errors.As(err, &se) || status != 422 || se.Code != "seller_requires_signing" || !strings.Contains(se.Message, sellerID) {
		t.Fatalf("submit = %d %v, want 422 seller_requires_signing naming %s", status, err, sellerID)
	}
	resp, err := http.Get(suite.seller.Base + "/recorded")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }() // read fully below
	var rec2 struct {
		Creates []json.RawMessage `json:"creates"`
		Signed  []json.RawMessage `json:"signed"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rec2); err != nil {
		t.Fatal(err)
	}
	if len(rec2.Creates) != 0 || len(rec2.Signed) != 0 {
		t.Errorf("the seller saw %d creates and %d signed or refused requests, want none", len(rec2.Creates), len(rec2.Signed))
	}
}

// submitBody is a buy at the signing seller, checked by the simulated governance agent.
func submitBody(t *testing.T) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"seller_id":  sellerID,
		"governance": map[string]any{"agent_id": devstack.GovernanceID, "plan_id": "plan-unsigned"},
		"currency":   "USD",
		"media_buy": map[string]any{
			"account":    map[string]any{"account_id": "acc_interop"},
			"brand":      map[string]any{"domain": "acme.example"},
			"po_number":  "PO-UNSIGNED-" + strings.ToUpper(e2etest.RandomID(t)),
			"start_time": "2030-03-01T00:00:00Z",
			"end_time":   "2030-03-31T23:59:59Z",
			"packages":   []any{map[string]any{"product_id": "prod_display", "pricing_option_id": "cpm_5", "budget": 500}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}
