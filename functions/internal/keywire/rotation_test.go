package keywire_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/buyflow/buyflow/functions/internal/keywire"
	"github.com/buyflow/buyflow/functions/internal/wire"
	"github.com/buyflow/buyflow/internal/config"
	"github.com/buyflow/buyflow/internal/reqsign"
	"github.com/buyflow/buyflow/internal/signingkey"
)

// pemKey writes a fresh P-256 key (the KMS key's algorithm) and returns its file: reference.
func pemKey(t *testing.T, name string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name+".pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return "file:" + path
}

// deployment is what one deploy of a rotation gives the functions: the signer of those that
// call agents and the JWKS the webhook function serves.
type deployment struct {
	signer *reqsign.Signer
	jwks   map[string]map[string]string // kid -> the JWK's members
}

func deploy(t *testing.T, signing, published string) deployment {
	t.Helper()
	ctx := context.Background()
	c := &wire.Cold{Env: config.Env{SigningKey: signing, SigningKeysPublished: published}}
	signer, err := keywire.RequestSigner(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := keywire.PublishedKeys(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := signingkey.JWKS(keys)
	if err != nil {
		t.Fatal(err)
	}
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(raw, &set); err != nil {
		t.Fatal(err)
	}
	d := deployment{signer: signer, jwks: map[string]map[string]string{}}
	for _, k := range set.Keys {
		m := map[string]string{}
		for name, v := range k {
			if s, ok := v.(string); ok {
				m[name] = s
			}
		}
		d.jwks[m["kid"]] = m
	}
	return d
}

// verifies reports whether the JWKS d publishes verifies signer's signatures: it has the
// signer's kid, for request signing, with the signer's public key.
func (d deployment) verifies(t *testing.T, signer *reqsign.Signer) bool {
	t.Helper()
	jwk, ok := d.jwks[signer.KeyID]
	if !ok || jwk["adcp_use"] != reqsign.AdCPUse || jwk["use"] != "sig" {
		return false
	}
	pub, err := signer.Key.Public().(*ecdsa.PublicKey).Bytes() // 0x04 ‖ x ‖ y
	if err != nil {
		t.Fatal(err)
	}
	x, errX := base64.RawURLEncoding.DecodeString(jwk["x"])
	y, errY := base64.RawURLEncoding.DecodeString(jwk["y"])
	if errX != nil || errY != nil {
		t.Fatalf("JWK coordinates %q, %q", jwk["x"], jwk["y"])
	}
	return bytes.Equal(pub, append(append([]byte{4}, x...), y...))
}

// TestRotationPublishesTheNextKeyBeforeItSigns walks the rotation of docs/cloud-team.md
// through the functions' own configuration (BUYFLOW_SIGNING_KEY, BUYFLOW_SIGNING_KEYS_PUBLISHED,
// which the CDK stack fills from buyflow:signingKeys and buyflow:signingKey):
//  1. the next key is published while the current one signs;
//  2. the switch: the next key signs, and the JWKS a verifier cached at step 1 (up to its
//     max-age, or longer) already verifies it; the old key stays published, so the signatures
//     it made in the last window still verify against the JWKS served now;
//  3. the old key is retired: the JWKS no longer verifies it.
func TestRotationPublishesTheNextKeyBeforeItSigns(t *testing.T) {
	current, next := pemKey(t, "current"), pemKey(t, "next")

	before := deploy(t, current, "")
	publish := deploy(t, current, next)
	switched := deploy(t, next, current)
	retired := deploy(t, next, "")

	oldSigner, newSigner := before.signer, switched.signer
	if oldSigner.KeyID == newSigner.KeyID {
		t.Fatal("the two keys have one kid")
	}
	if publish.signer.KeyID != oldSigner.KeyID {
		t.Errorf("step 1 signs with %s, want the current key %s: a published key signs nothing", publish.signer.KeyID, oldSigner.KeyID)
	}
	if !publish.verifies(t, newSigner) || !publish.verifies(t, oldSigner) || len(publish.jwks) != 2 {
		t.Errorf("step 1 JWKS %v: want the current and the next key", slices.Collect(maps.Keys(publish.jwks)))
	}
	if !switched.verifies(t, newSigner) || !switched.verifies(t, oldSigner) || len(switched.jwks) != 2 {
		t.Errorf("step 2 JWKS %v: want the new signing key and the old one, still verifiable", slices.Collect(maps.Keys(switched.jwks)))
	}
	if retired.verifies(t, oldSigner) || !retired.verifies(t, newSigner) || len(retired.jwks) != 1 {
		t.Errorf("step 3 JWKS %v: want the new key alone", slices.Collect(maps.Keys(retired.jwks)))
	}
	// Had the switch come without step 1, a verifier holding the JWKS of before the rotation
	// could not verify the new key's first signatures: that is what step 1 is for.
	if before.verifies(t, newSigner) {
		t.Error("the JWKS of before the rotation verifies the next key: the test proves nothing")
	}
	// Publishing the signing key again changes nothing.
	if again := deploy(t, current, current+","+next); len(again.jwks) != 2 {
		t.Errorf("the signing key listed twice: %d JWKs", len(again.jwks))
	}
}
