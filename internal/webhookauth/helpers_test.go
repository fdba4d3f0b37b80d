package webhookauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/clocktest"
)

// testNow is the fixed clock of the round-trip tests.
var testNow = time.Unix(1776520800, 0)

func newKey(t testing.TB, alg string) crypto.Signer {
	t.Helper()
	if alg == "es" {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// testSigner returns a signer with a fresh key of the given kind ("ed" or
// "es") and the fixed test clock.
func testSigner(t testing.TB, alg string) *RFC9421Signer {
	t.Helper()
	return &RFC9421Signer{KeyID: "test-" + alg, Key: newKey(t, alg), Now: clocktest.At(testNow).Now}
}

func hexString(b []byte) string { return hex.EncodeToString(b) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
