package signingkey_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/buyflow/buyflow/internal/signingkey"
)

// kmsServer answers KMS's JSON protocol as AWS does for GetPublicKey and Sign with fk's key,
// and refuses a request that is not SigV4-signed for kms in the configuration's region.
func kmsServer(t *testing.T, fk *fakeKMS) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDTEST/") || !strings.Contains(auth, "/eu-west-1/kms/aws4_request") ||
			r.Header.Get("X-Amz-Content-Sha256") == "" && r.Header.Get("X-Amz-Date") == "" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"__type":"com.amazon.coral.service#IncompleteSignatureException","message":"not signed"}`)
			return
		}
		if r.Header.Get("Content-Type") != "application/x-amz-json-1.1" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var in struct {
			KeyId, MessageType, SigningAlgorithm string
			Message                              []byte
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.KeyId != "k1" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"__type":"NotFoundException","message":"Key 'arn:aws:kms:eu-west-1:111122223333:key/x' does not exist"}`)
			return
		}
		switch r.Header.Get("X-Amz-Target") {
		case "TrentService.GetPublicKey":
			pub, _ := fk.GetPublicKey(r.Context(), in.KeyId)
			_ = json.NewEncoder(w).Encode(map[string]any{"KeyId": in.KeyId, "PublicKey": pub.DER, "KeySpec": pub.KeySpec, "KeyUsage": pub.KeyUsage})
		case "TrentService.Sign":
			if in.MessageType != "DIGEST" || in.SigningAlgorithm != "ECDSA_SHA_256" || len(in.Message) != sha256.Size {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"__type":"ValidationException","message":"bad sign request"}`)
				return
			}
			sig, _ := fk.Sign(r.Context(), in.KeyId, in.Message)
			_ = json.NewEncoder(w).Encode(map[string]any{"KeyId": in.KeyId, "Signature": sig, "SigningAlgorithm": in.SigningAlgorithm})
		default:
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestKMSClientSpeaksKMSsProtocol: the client signs its requests with SigV4 for kms, reads the
// public key and gets a signature that verifies with it, and reports KMS's own error.
func TestKMSClientSpeaksKMSsProtocol(t *testing.T) {
	fk := newFakeKMS(t)
	srv := kmsServer(t, fk)
	cfg := aws.Config{Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")}
	client := signingkey.NewKMS(cfg)
	key, err := signingkey.Load(context.Background(), "kms:k1", client)
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256([]byte("signature base"))
	sig, err := key.Signer.Sign(rand.Reader, digest[:], crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(key.Public)
	pub, _ := x509.ParsePKIXPublicKey(der)
	if !ecdsa.VerifyASN1(pub.(*ecdsa.PublicKey), digest[:], sig) {
		t.Fatal("the signature does not verify with the key's public half")
	}
	if _, err := signingkey.Load(context.Background(), "kms:other", client); err == nil || !strings.Contains(err.Error(), "NotFoundException") {
		t.Errorf("an unknown key: err = %v", err)
	}
	unsigned := signingkey.NewKMS(aws.Config{Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL)})
	if _, err := unsigned.GetPublicKey(context.Background(), "k1"); err == nil {
		t.Error("a client without credentials read the key")
	}
}
