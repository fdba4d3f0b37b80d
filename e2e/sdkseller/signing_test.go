package sdkseller

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// withSeller is a submit body for the scenario at seller id.
func withSeller(t *testing.T, id, scenario string) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(body(t, scenario, "approved"), &doc); err != nil {
		t.Fatal(err)
	}
	doc["seller_id"] = id
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A seller that requires create_media_buy signed, verified by the official SDK's own verifier
// against the stack's JWKS route: buyflow signs the create (its capabilities list it) with the
// stack's key, the verifier accepts it, and the buy completes. The JWKS is public and
// cacheable, and publishes the kid the signature names.
func TestSignedCreateAtASellerThatRequiresIt(t *testing.T) {
	c := begin(t)
	resp, err := http.Get(suite.APIURL + "/v1/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close() // read fully
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Cache-Control"), "max-age=") ||
		!strings.Contains(string(jwks), `"kid":"`+suite.SigningKeyID+`"`) || !strings.Contains(string(jwks), `"adcp_use":"request-signing"`) {
		t.Fatalf("GET /v1/jwks.json = %d %v %s", resp.StatusCode, resp.Header, jwks)
	}

	id := place(t, c, "key-"+randomID(t), withSeller(t, signingSellerID, "sync"))
	op := finished(t, c, id, "completed")
	rec := suite.signing.recorded(t)
	if n := createsFor(rec, id); n != 1 {
		t.Fatalf("the seller ran %d creates for %s (media buy %s)", n, id, op.MediaBuyID)
	}
	ok := slices.IndexFunc(rec.Signed, func(v verified) bool {
		return v.Status == 200 && strings.Contains(v.SignatureInput, `keyid="`+suite.SigningKeyID+`"`) &&
			strings.Contains(v.SignatureInput, `tag="adcp/request-signing/v1"`) && strings.Contains(v.SignatureInput, `"content-digest"`)
	})
	if ok < 0 {
		t.Fatalf("the SDK verifier accepted no request signed with key %s: %+v", suite.SigningKeyID, rec.Signed)
	}
}

// A seller that rotates to refuse buyflow's key (the SDK verifier's revocation list) answers
// the signed create 401 request_signature_key_revoked: the buy fails once, terminally, with a
// reason that names signing, the seller's code and buyflow's key, not "credential rejected".
func TestSellerRevokingOurKeyFailsWithAClearReason(t *testing.T) {
	c := begin(t)
	if err := suite.revoking.SetSigning("", []string{suite.SigningKeyID}); err != nil {
		t.Fatal(err)
	}
	id := place(t, c, "key-"+randomID(t), withSeller(t, revokingSellerID, "sync"))
	op := finished(t, c, id, "failed")
	for _, want := range []string{"BUYFLOW_REQUEST_SIGNATURE_REJECTED", "request_signature_key_revoked", suite.SigningKeyID} {
		if !strings.Contains(op.Reason, want) {
			t.Errorf("reason %q lacks %q", op.Reason, want)
		}
	}
	if strings.Contains(op.Reason, "credential rejected") {
		t.Errorf("reason %q blames the credential", op.Reason)
	}
	rec := suite.revoking.recorded(t)
	if n := createsFor(rec, id); n != 0 {
		t.Errorf("the seller ran %d creates with a revoked key", n)
	}
	refused := 0
	for _, v := range rec.Signed {
		if v.Status == 401 && strings.Contains(v.Challenge, "request_signature_key_revoked") {
			refused++
		}
	}
	if refused != 1 {
		t.Errorf("the verifier refused %d signed creates as revoked, want 1 (a terminal refusal is not resent): %+v", refused, rec.Signed)
	}
}
