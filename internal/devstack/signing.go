package devstack

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"

	"github.com/buyflow/buyflow/internal/signingkey"
)

// signingKey returns the request-signing key reference the functions get and sets
// st.SigningKeyID: o.SigningKey, else a fresh P-256 key (the algorithm of the KMS key on AWS)
// written to a temp folder the stack removes; "" with o.NoSigningKey.
func (st *Stack) signingKey(o Options) (string, error) {
	if o.NoSigningKey {
		return "", nil
	}
	ref := o.SigningKey
	if ref == "" {
		dir, err := os.MkdirTemp("", "buyflow-local-signing-")
		if err != nil {
			return "", fmt.Errorf("devstack: %w", err)
		}
		st.closers = append(st.closers, func() { _ = os.RemoveAll(dir) }) // a temp folder
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return "", fmt.Errorf("devstack: signing key: %w", err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return "", fmt.Errorf("devstack: signing key: %w", err)
		}
		path := filepath.Join(dir, "request-signing.pem")
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
			return "", fmt.Errorf("devstack: signing key: %w", err)
		}
		ref = "file:" + path
	}
	k, err := signingkey.Load(context.Background(), ref, nil)
	if err != nil {
		return "", fmt.Errorf("devstack: %w", err)
	}
	st.SigningKeyID = k.KeyID
	return ref, nil
}
