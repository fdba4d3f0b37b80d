package keywire_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/buyflow/buyflow/functions/internal/agentclient"
	"github.com/buyflow/buyflow/functions/internal/keywire"
	"github.com/buyflow/buyflow/functions/internal/wire"
	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcp/interop"
	"github.com/buyflow/buyflow/internal/config"
	"github.com/buyflow/buyflow/internal/signingkey"
)

// sdkSeller is the one agent of the test: the seller on the official SDK.
type sdkSeller struct{ url string }

func (s sdkSeller) Agent(_ context.Context, id string) (adcp.Agent, error) {
	if id != "sdk" {
		return adcp.Agent{}, adcp.ErrUnknownAgent
	}
	return adcp.Agent{ID: "sdk", Role: adcp.RoleSeller, MCPURL: s.url, CredentialRef: "buyflow/agents/sdk"}, nil
}

// TestRotationAgainstTheSDKVerifier runs the rotation's deploys against a seller nobody here
// wrote: @adcp/sdk's own request verifier (internal/adcp/interop/seller.mjs, signed
// create_media_buy required), reading the JWKS the webhook function would serve at each step.
// The switch to the published next key is verified from the JWKS the seller fetched before the
// switch (no new fetch), and once the old key is retired (and the seller's cache expired), a
// create signed with it is refused as a signature problem, not a credential one.
func TestRotationAgainstTheSDKVerifier(t *testing.T) {
	const token = "tok-keywire-rotation-0123456789"
	seller := interop.StartForTest(t, interop.Options{Token: token, Signing: true})
	// The JWKS route as the webhook function serves it, one deployment at a time.
	var jwks atomic.Pointer[[]byte]
	var fetches atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetches.Add(1)
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.Header().Set("Cache-Control", "public, max-age="+strconv.Itoa(signingkey.CacheSeconds))
		_, _ = w.Write(*jwks.Load())
	}))
	t.Cleanup(srv.Close)
	if err := seller.SetSigning(srv.URL+signingkey.JWKSPath, nil); err != nil {
		t.Fatal(err)
	}

	ctx := context.Background()
	current, next := pemKey(t, "current"), pemKey(t, "next")
	// publish deploys the JWKS the webhook function serves with these keys.
	publish := func(signing, published string) {
		t.Helper()
		keys, err := keywire.PublishedKeys(ctx, &wire.Cold{Env: config.Env{SigningKey: signing, SigningKeysPublished: published}})
		if err != nil {
			t.Fatal(err)
		}
		set, err := signingkey.JWKS(keys)
		if err != nil {
			t.Fatal(err)
		}
		jwks.Store(&set)
	}
	// buy places a create at the seller from a function whose signing key is signing.
	buy := func(step, signing string) error {
		t.Helper()
		signer, err := keywire.RequestSigner(ctx, &wire.Cold{Env: config.Env{SigningKey: signing}})
		if err != nil {
			t.Fatal(err)
		}
		client, err := agentclient.Client(sdkSeller{seller.MCPURL()}, adcp.CredentialsFunc(func(context.Context, string) (string, error) { return token, nil }), nil, signer)
		if err != nil {
			t.Fatal(err)
		}
		req := adcp.CreateMediaBuyRequest{Account: adcp.AccountRef{AccountID: "acc_interop"}, Brand: adcp.BrandRef{Domain: "acme.example"},
			StartTime: "asap", EndTime: "2030-01-31T23:59:59Z",
			Packages: []adcp.PackageRequest{{ProductID: "prod_display", PricingOptionID: "cpm_5", Budget: json.Number("500")}},
			Context:  json.RawMessage(`{"path":"sync"}`)}
		in, err := adcp.NewIntent(adcp.ToolCreateMediaBuy, req, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		cctx, cancel := context.WithTimeout(ctx, 90*time.Second) // the SDK compiles its schemas on the first create
		defer cancel()
		r, err := client.CreateMediaBuy(cctx, "sdk", in)
		if err == nil && r.MediaBuyID == "" {
			t.Fatalf("%s: a create without a media buy: %+v", step, r)
		}
		return err
	}

	// 1. The next key is published; the current one signs.
	publish(current, next)
	if err := buy("step 1", current); err != nil {
		t.Fatalf("step 1, the current key signs: %v", err)
	}
	before := fetches.Load()
	if before == 0 {
		t.Fatal("the SDK verifier never fetched the JWKS: the test proves nothing")
	}
	// 2. The switch: the next key signs, the current one stays published. The verifier takes it
	// on the JWKS it fetched before the switch.
	publish(next, current)
	if err := buy("step 2", next); err != nil {
		t.Fatalf("step 2, the next key signs: %v", err)
	}
	if got := fetches.Load() - before; got != 0 {
		t.Errorf("the verifier fetched the JWKS %d more times to verify the next key: it was not published before it signed", got)
	}
	// 3. The old key is retired. Once the seller's cached JWKS has expired (a fresh resolver
	// here), a function still signing with it (a deploy done out of order) is refused by the
	// verifier: a signature rejection naming the key, not a credential problem.
	publish(next, "")
	if err := seller.SetSigning(srv.URL+signingkey.JWKSPath, nil); err != nil {
		t.Fatal(err)
	}
	if err := buy("step 3, the new key", next); err != nil {
		t.Fatalf("step 3, the new key signs: %v", err)
	}
	err := buy("step 3, the retired key", current)
	var ae *adcp.Error
	if !errors.As(err, &ae) || ae.Code != adcp.CodeSignatureRejected || !strings.Contains(ae.Message, "request_signature_key_unknown") {
		t.Fatalf("a create signed with the retired key: %v, want %s (request_signature_key_unknown)", err, adcp.CodeSignatureRejected)
	}
}
