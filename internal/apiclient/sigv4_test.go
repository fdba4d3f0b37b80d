package apiclient_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/buyflow/buyflow/internal/apiclient"
)

func TestSignV4(t *testing.T) {
	sign := apiclient.SignV4(credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""), "execute-api", "eu-west-1")
	body := []byte(`{"a":1}`)
	r, _ := http.NewRequest(http.MethodPost, "https://api.example.com/v1/media-buys", nil)
	if err := sign(r, body); err != nil {
		t.Fatal(err)
	}
	auth := r.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") || !strings.Contains(auth, "/eu-west-1/execute-api/aws4_request") ||
		!strings.Contains(auth, "Signature=") || r.Header.Get("X-Amz-Date") == "" {
		t.Errorf("Authorization %q, X-Amz-Date %q", auth, r.Header.Get("X-Amz-Date"))
	}
	// Another body is another signature: the payload hash is signed.
	r2, _ := http.NewRequest(http.MethodPost, "https://api.example.com/v1/media-buys", nil)
	if err := sign(r2, []byte(`{"a":2}`)); err != nil {
		t.Fatal(err)
	}
	if sig := func(a string) string { return a[strings.Index(a, "Signature="):] }; sig(r2.Header.Get("Authorization")) == sig(auth) {
		t.Error("two bodies signed alike")
	}
	// Credentials that cannot be read sign nothing.
	failing := aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return aws.Credentials{}, errors.New("no profile") })
	r3, _ := http.NewRequest(http.MethodGet, "https://api.example.com/v1/media-buys", nil)
	if err := apiclient.SignV4(failing, "execute-api", "eu-west-1")(r3, nil); err == nil || r3.Header.Get("Authorization") != "" {
		t.Errorf("sign with failing credentials = %v, Authorization %q", err, r3.Header.Get("Authorization"))
	}
}
