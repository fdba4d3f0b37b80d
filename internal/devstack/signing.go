package devstack

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/buyflow/buyflow/internal/motoserver"
	"github.com/buyflow/buyflow/internal/signingkey"
)

// signingKey returns the request-signing key reference the functions get and sets
// st.SigningKeyID: with o.KMS a key created in moto's KMS, else o.SigningKey, else a fresh
// P-256 key (the algorithm of the KMS key on AWS) written to a temp folder the stack removes;
// "" with o.NoSigningKey.
func (st *Stack) signingKey(ctx context.Context, o Options) (string, error) {
	if o.NoSigningKey {
		return "", nil
	}
	ref := o.SigningKey
	var kms signingkey.KMS
	switch {
	case o.KMS:
		var err error
		if ref, kms, err = st.startKMS(ctx); err != nil {
			return "", err
		}
	case ref == "":
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
	k, err := signingkey.Load(ctx, ref, kms)
	if err != nil {
		return "", fmt.Errorf("devstack: %w", err)
	}
	st.SigningKeyID = k.KeyID
	return ref, nil
}

// startKMS runs moto_server as the stack's KMS, creates the request-signing key in it as the
// CDK stack creates RequestSigningKey, and sends the functions' KMS calls there (through the
// proxy, so the IAM gate checks them). It returns the key's reference, kms:<ARN> as the CDK
// stack sets it, and a client of that KMS for the stack's own reads.
func (st *Stack) startKMS(ctx context.Context) (string, signingkey.KMS, error) {
	srv, err := motoserver.Start(motoserver.Options{})
	if err != nil {
		if errors.Is(err, motoserver.ErrMissing) {
			return "", nil, fmt.Errorf("devstack: Options.KMS: %w", err)
		}
		return "", nil, fmt.Errorf("devstack: %w", err)
	}
	st.closers = append(st.closers, srv.Stop)
	u, err := url.Parse(srv.URL)
	if err != nil {
		return "", nil, fmt.Errorf("devstack: kms url: %w", err)
	}
	arn, err := motoserver.CreateSigningKey(ctx, srv.URL, region)
	if err != nil {
		return "", nil, fmt.Errorf("devstack: %w", err)
	}
	st.proxy.kms.Store(httputil.NewSingleHostReverseProxy(u))
	st.KMSURL = srv.URL
	return "kms:" + arn, signingkey.NewKMS(aws.Config{Region: region, BaseEndpoint: aws.String(srv.URL),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return creds, nil })}), nil
}
