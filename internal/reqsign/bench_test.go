package reqsign_test

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"net/http"
	"testing"

	"github.com/buyflow/buyflow/internal/reqsign"
)

// BenchmarkSign measures one request signature over a create_media_buy-sized body (4 KB):
// canonicalisation, Content-Digest, the signature base and the signature with a local key.
// With a KMS key the signature itself is a KMS Sign round trip instead (docs/cloud-team.md).
func BenchmarkSign(b *testing.B) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	body := append([]byte(`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"create_media_buy","arguments":{"x":"`),
		append(bytes.Repeat([]byte("a"), 4000), []byte(`"}},"id":1}`)...)...)
	for _, k := range []struct {
		name string
		key  crypto.Signer
	}{{"es256", ec}, {"ed25519", ed}} {
		b.Run(k.name, func(b *testing.B) {
			s := &reqsign.Signer{KeyID: "bench", Key: k.key}
			req, _ := http.NewRequest(http.MethodPost, "https://seller.example.com/mcp", nil)
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Sign(req, body, reqsign.Profile31, "required"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
