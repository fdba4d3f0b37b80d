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
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/buyflow/buyflow/internal/signingkey"
)

// kmsServer serves kmsHandler.
func kmsServer(t *testing.T, fk *fakeKMS) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(kmsHandler(fk))
	t.Cleanup(srv.Close)
	return srv
}

// kmsHandler answers KMS's JSON protocol as AWS does for GetPublicKey and Sign with fk's key,
// and refuses a request that is not SigV4-signed for kms in the configuration's region.
func kmsHandler(fk *fakeKMS) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	})
}

// signsAndVerifies signs a digest with key's signer (through KMS for a kms: key) and checks
// the ASN.1 signature with der, a DER SubjectPublicKeyInfo.
func signsAndVerifies(t *testing.T, key *signingkey.Key, der []byte) {
	t.Helper()
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256([]byte("signature base"))
	sig, err := key.Signer.Sign(rand.Reader, digest[:], crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	if ec, ok := pub.(*ecdsa.PublicKey); !ok || !ecdsa.VerifyASN1(ec, digest[:], sig) {
		t.Fatal("the signature does not verify over the digest with the public key")
	}
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
	der, _ := x509.MarshalPKIXPublicKey(key.Public)
	signsAndVerifies(t, key, der)
	if _, err := signingkey.Load(context.Background(), "kms:other", client); err == nil || !strings.Contains(err.Error(), "NotFoundException") {
		t.Errorf("an unknown key: err = %v", err)
	}
	unsigned := signingkey.NewKMS(aws.Config{Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL)})
	if _, err := unsigned.GetPublicKey(context.Background(), "k1"); err == nil {
		t.Error("a client without credentials read the key")
	}
}

// TestKMSClientRetriesThrottlingAndServerErrors: a throttled or failing KMS (400
// ThrottlingException, 5xx) is tried again, three tries in all; an error that another try
// cannot change (a denied call, an unknown key) is returned at once.
func TestKMSClientRetriesThrottlingAndServerErrors(t *testing.T) {
	fk := newFakeKMS(t)
	const throttled = `{"__type":"ThrottlingException","message":"Rate exceeded"}`
	for _, tc := range []struct {
		name      string
		status    int
		body      string
		failures  int
		wantTries int
		wantErr   string
	}{
		{"throttled twice", 400, throttled, 2, 3, ""},
		{"internal error once", 500, `{"__type":"KMSInternalException","message":"internal"}`, 1, 2, ""},
		{"unavailable, no KMS body", 503, `<html>busy</html>`, 1, 2, ""},
		{"throttled throughout", 400, throttled, 99, 3, "ThrottlingException: Rate exceeded (after 3 tries)"},
		{"denied", 400, `{"__type":"AccessDeniedException","message":"not authorized to perform: kms:Sign"}`, 99, 1, "AccessDeniedException"},
		{"unknown key", 400, `{"__type":"NotFoundException","message":"no such key"}`, 99, 1, "NotFoundException"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tries atomic.Int32
			inner := kmsHandler(fk)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if int(tries.Add(1)) <= tc.failures {
					w.WriteHeader(tc.status)
					_, _ = io.WriteString(w, tc.body)
					return
				}
				inner.ServeHTTP(w, r)
			}))
			defer srv.Close()
			client := signingkey.NewKMS(aws.Config{Region: "eu-west-1", BaseEndpoint: aws.String(srv.URL),
				Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")})
			digest := sha256.Sum256([]byte("signature base"))
			sig, err := client.Sign(context.Background(), "k1", digest[:])
			if got := int(tries.Load()); got != tc.wantTries {
				t.Errorf("%d tries, want %d", got, tc.wantTries)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to name %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !ecdsa.VerifyASN1(&fk.key.PublicKey, digest[:], sig) {
				t.Fatal("the signature after the retries does not verify")
			}
		})
	}
}
