// Package sdkseller is the system-level interop suite against a seller nobody here wrote: the
// local stack (kumo, the real bootstraps, the same state machine and HTTP API) with a seller
// on the official @adcp/sdk 6.11.0 server framework (internal/adcp/interop/seller.mjs, AdCP
// 3.0.6) next to the simulated governance agent, driven through HTTP only. The seller signs
// its own webhooks (RFC 9421) and records what it saw and did (GET /recorded), so the tests
// assert on the seller's side as well as on buyflow's.
//
// The functions sign through moto_server's KMS when it is on PATH (required with CI=true), so
// the SDK's verifier checks signatures made by kms:Sign, as on AWS.
//
// It needs BUYFLOW_E2E=1 and BUYFLOW_NODE_TESTS=1 (make test sets both), Node and
// node_modules/@adcp/sdk; BUYFLOW_E2E_BIN names prebuilt host bootstraps (make build-host).
package sdkseller

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/buyflow/buyflow/e2e/e2etest"
	"github.com/buyflow/buyflow/internal/adcp/interop"
	"github.com/buyflow/buyflow/internal/devstack"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/motoserver"
	"github.com/buyflow/buyflow/internal/workflow"
)

// sellerID and governanceID are the agents' ids in the stack's registry.
const (
	sellerID     = "sdk-seller"
	governanceID = devstack.GovernanceID
	sellerToken  = "tok-sdk-seller-0123456789abcdef"
	// oauthSellerID is the same seller requiring OAuth 2.0 client credentials (oauth_test.go).
	oauthSellerID     = "sdk-oauth-seller"
	oauthClientID     = "buyflow-e2e"
	oauthClientSecret = "cs-sdk-oauth-seller-0123456789abcdef"
	// signingSellerID requires signed create_media_buy (the SDK's verifier, signing_test.go);
	// revokingSellerID too, and refuses buyflow's key as revoked when a test says so.
	signingSellerID  = "sdk-signing-seller"
	revokingSellerID = "sdk-revoking-seller"
	// oauthSigningSellerID requires both: OAuth client credentials and signed create_media_buy
	// (oauth_test.go); its client secret is its own, so the log search tells them apart.
	oauthSigningSellerID     = "sdk-oauth-signing-seller"
	oauthSigningClientSecret = "cs-sdk-oauth-signing-seller-0123456789abcdef"
	// sellerDelay is how long an async task stays submitted at the seller.
	sellerDelay = 1500 * time.Millisecond
)

// runConfig: the first poll 3 s after the create, so a webhook (the seller finishes after
// sellerDelay) wins the race when it arrives; polls at most every 3 s.
// sweepEvery is the reconciliation sweep's cadence here: production's minute, not the local
// stack's 10 s. No test of this suite needs the sweep, and several assert which path (the
// seller's webhook, the buy's own poll) finished a buy; a 10 s sweep on a loaded machine can
// read the finished task first.
const sweepEvery = time.Minute

var runConfig = workflow.RunConfig{
	ApprovalTimeoutSeconds: 30,
	PollInitialSeconds:     3,
	PollMaxSeconds:         3,
	DeadlineSeconds:        180,
	LoopBudget:             100,
}

var (
	suite struct {
		*e2etest.PeerStack
		seller   *sdkSeller
		oauth    *sdkSeller
		signing  *sdkSeller
		revoking *sdkSeller
		// oauthSigning requires OAuth client credentials and signed creates.
		oauthSigning *sdkSeller
	}
	skip string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if skip = e2etest.PeerSkip("SDK seller suite"); skip != "" {
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "sdkseller:", err)
		return 1
	}
	seller, err := startSeller()
	if err != nil {
		return fail(err)
	}
	defer seller.Stop()
	suite.seller = seller
	oauthSeller, err := interop.Start(interop.Options{OAuth: &interop.OAuthClient{ID: oauthClientID, Secret: oauthClientSecret},
		Delay: sellerDelay, Webhooks: true})
	if err != nil {
		return fail(err)
	}
	defer oauthSeller.Stop()
	suite.oauth = &sdkSeller{oauthSeller}
	var signers []*interop.Seller
	for range 2 {
		s, err := interop.Start(interop.Options{Token: sellerToken, Delay: sellerDelay, Signing: true, Webhooks: true})
		if err != nil {
			return fail(err)
		}
		defer s.Stop()
		signers = append(signers, s)
	}
	suite.signing, suite.revoking = &sdkSeller{signers[0]}, &sdkSeller{signers[1]}
	both, err := interop.Start(interop.Options{OAuth: &interop.OAuthClient{ID: oauthClientID, Secret: oauthSigningClientSecret},
		Signing: true, Delay: sellerDelay, Webhooks: true})
	if err != nil {
		return fail(err)
	}
	defer both.Stop()
	suite.oauthSigning = &sdkSeller{both}

	peers := []e2etest.Peer{
		{ID: sellerID, MCPURL: seller.Base + "/mcp", Token: sellerToken, JWKSURL: seller.Base + "/.well-known/jwks.json"},
		// No token_url: buyflow discovers it from the seller's 401.
		{ID: oauthSellerID, MCPURL: oauthSeller.MCPURL(), Token: oauthClientSecret, JWKSURL: oauthSeller.Base + "/.well-known/jwks.json",
			Auth: map[string]any{"mode": "oauth2_client_credentials", "client_id": oauthClientID}},
		{ID: signingSellerID, MCPURL: suite.signing.Base + "/mcp", Token: sellerToken, JWKSURL: suite.signing.Base + "/.well-known/jwks.json"},
		{ID: revokingSellerID, MCPURL: suite.revoking.Base + "/mcp", Token: sellerToken, JWKSURL: suite.revoking.Base + "/.well-known/jwks.json"},
		{ID: oauthSigningSellerID, MCPURL: both.MCPURL(), Token: oauthSigningClientSecret, JWKSURL: both.Base + "/.well-known/jwks.json",
			Auth: map[string]any{"mode": "oauth2_client_credentials", "client_id": oauthClientID}},
	}
	// The functions sign through KMS, as on AWS, when moto_server is here to be the KMS (CI
	// has it), so the SDK's verifier checks signatures made by kms:Sign; else with a file key.
	kms := true
	if err := motoserver.Available(); err != nil {
		if dynamotest.MotoRequired() {
			return fail(fmt.Errorf("%w; CI requires it (the functions sign through its KMS)", err))
		}
		fmt.Fprintf(os.Stderr, "sdkseller: the functions sign with a file key, not through KMS: %v\n", err)
		kms = false
	}
	st, err := e2etest.StartPeerStack(ctx, "sdkseller", peers, devstack.Options{Run: runConfig, Instances: 3, PortWait: 8 * time.Minute,
		SweepEvery: sweepEvery, KMS: kms})
	if err != nil {
		return fail(err)
	}
	if kms {
		fmt.Fprintf(os.Stderr, "sdkseller: the functions sign through moto_server's KMS at %s (key id %s)\n", st.KMSURL, st.SigningKeyID)
	}
	suite.PeerStack = st
	// The signing sellers verify with the stack's JWKS, which exists only now.
	for _, s := range []*sdkSeller{suite.signing, suite.revoking, suite.oauthSigning} {
		if err := s.SetSigning(st.APIURL+"/v1/jwks.json", nil); err != nil {
			st.Close(false)
			return fail(err)
		}
	}
	code := m.Run()
	if code == 0 {
		if err := logsHoldNoSecret(); err != nil {
			fmt.Fprintln(os.Stderr, "sdkseller:", err)
			code = 1
		}
	}
	st.Close(code == 0)
	if code != 0 {
		fmt.Fprintf(os.Stderr, "sdkseller: seller stderr:\n%s\n", seller.Stderr())
		fmt.Fprintf(os.Stderr, "sdkseller: OAuth seller stderr:\n%s\n", oauthSeller.Stderr())
		fmt.Fprintf(os.Stderr, "sdkseller: OAuth and signing seller stderr:\n%s\n", both.Stderr())
	}
	return code
}

// logsHoldNoSecret searches every function's log of the whole run (after every test, so that
// it covers what each of them made the functions log) for the secrets the functions held: the
// bearer token, both OAuth client secrets, and every access token the sellers' authorization
// servers granted. It fails too when the log never names a buy, so that a log that is not the
// functions' cannot pass.
func logsHoldNoSecret() error {
	if suite.LogPath == "" {
		fmt.Fprintln(os.Stderr, "sdkseller: the functions log to stderr (BUYFLOW_E2E_VERBOSE=1): their logs are not searched for secrets")
		return nil
	}
	logs, err := os.ReadFile(suite.LogPath)
	if err != nil {
		return err
	}
	secrets := map[string]string{"the bearer token": sellerToken, "the OAuth client secret": oauthClientSecret,
		"the OAuth and signing seller's client secret": oauthSigningClientSecret}
	grants := 0
	for name, s := range map[string]*sdkSeller{"OAuth": suite.oauth, "OAuth and signing": suite.oauthSigning} {
		r, err := s.fetchRecorded()
		if err != nil {
			return err
		}
		for i, g := range r.Grants {
			secrets[fmt.Sprintf("the %s seller's token %d", name, i)] = g.Token
			grants++
		}
	}
	var leaked []string
	for what, s := range secrets {
		if s != "" && bytes.Contains(logs, []byte(s)) {
			leaked = append(leaked, what)
		}
	}
	if len(leaked) > 0 {
		return fmt.Errorf("the functions' logs (%s) carry %v", suite.LogPath, leaked)
	}
	if !bytes.Contains(logs, []byte("operationId")) {
		return fmt.Errorf("the functions' logs (%d bytes) never name an operation: the search above searched the wrong file", len(logs))
	}
	fmt.Fprintf(os.Stderr, "sdkseller: %d bytes of the functions' logs hold none of %d secrets (%d tokens granted)\n", len(logs), len(secrets), grants)
	return nil
}

// sdkSeller is the Node seller process.
type sdkSeller struct{ *interop.Seller }

// startSeller runs internal/adcp/interop/seller.mjs with signed webhooks on loopback.
func startSeller() (*sdkSeller, error) {
	s, err := interop.Start(interop.Options{Token: sellerToken, Delay: sellerDelay, Webhooks: true})
	if err != nil {
		return nil, err
	}
	return &sdkSeller{s}, nil
}

// recorded is the seller's own record (GET /recorded).
type recorded struct {
	Creates  []sellerCreate `json:"creates"`
	Updates  []sellerUpdate `json:"updates"`
	Webhooks []sentWebhook  `json:"webhooks"`
	// With OAuth: every token granted and every request refused.
	Grants       []grant       `json:"grants"`
	AuthRefusals []authRefusal `json:"auth_refusals"`
	// With signing: every request the SDK's verifier saw signed or refused.
	Signed []verified `json:"signed"`
}

// verified is one request the signing seller's verifier answered.
type verified struct {
	At             int64  `json:"at"`
	Status         int    `json:"status"`
	SignatureInput string `json:"signature_input"`
	Challenge      string `json:"challenge"`
}

// grant is one token the OAuth seller's authorization server issued.
type grant struct {
	At       int64  `json:"at"`
	ClientID string `json:"client_id"`
	Resource string `json:"resource"`
	Scope    string `json:"scope"`
	Token    string `json:"token"`
}

// authRefusal is one request the OAuth seller answered 401.
type authRefusal struct {
	At             int64  `json:"at"`
	Why            string `json:"why"`
	Tool           string `json:"tool"`
	IdempotencyKey string `json:"idempotency_key"`
}

// sellerCreate is one create_media_buy the seller ran (replays excluded). Times are Unix ms.
type sellerCreate struct {
	At             int64  `json:"at"`
	Scenario       string `json:"scenario"`
	IdempotencyKey string `json:"idempotency_key"`
	OperationID    string `json:"operation_id"`
	PushURL        string `json:"push_url"`
	MediaBuyID     string `json:"media_buy_id"`
	FinishedAt     int64  `json:"finished_at"` // when an async task finished
}

// sellerUpdate is one update_media_buy the seller ran.
type sellerUpdate struct {
	MediaBuyID string `json:"media_buy_id"`
	Canceled   bool   `json:"canceled"`
}

// sentWebhook is one webhook attempt as the seller recorded it.
type sentWebhook struct {
	At      int64             `json:"at"`
	URL     string            `json:"url"`
	TaskID  string            `json:"task_id"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
	Status  int               `json:"status"`
	Answer  string            `json:"answer"`
	Dropped bool              `json:"dropped"`
}

func (s *sdkSeller) recorded(t testing.TB) recorded {
	t.Helper()
	r, err := s.fetchRecorded()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (s *sdkSeller) fetchRecorded() (recorded, error) {
	resp, err := http.Get(s.Base + "/recorded")
	if err != nil {
		return recorded{}, err
	}
	defer func() { _ = resp.Body.Close() }() // read fully below
	var r recorded
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return recorded{}, fmt.Errorf("the seller's record: %w", err)
	}
	return r, nil
}
