package devstack

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// A failed call reaches its caller as the service's error, through the AWS SDK, only for the
// calls at its point and only as many times as armed; a held call reaches the emulator only
// once released.
func TestInterceptFailsAndHoldsCallsAtTheirPoint(t *testing.T) {
	var upstream atomic.Int32
	emulator := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstream.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte(`{}`))
	}))
	defer emulator.Close()
	front, p, _ := proxyTo(t, emulator.URL)
	client := func(fn string) *dynamodb.Client {
		return dynamodb.New(dynamodb.Options{
			Region: region, BaseEndpoint: aws.String(front.URL), RetryMaxAttempts: 1,
			Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
				return aws.Credentials{AccessKeyID: creds.AccessKeyID + "-" + fn, SecretAccessKey: "local"}, nil
			}),
		})
	}
	get := func(fn, id string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := client(fn).GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("ledger"),
			Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "OP#" + id}}})
		return err
	}

	fired, disarm := p.calls.failAt(CallPoint{Function: "webhook", Target: "DynamoDB_20120810.GetItem", BodyContains: "op-1"}, "InternalServerError", 500, 2)
	defer disarm()
	if err := get("poll", "op-1"); err != nil {
		t.Errorf("another function's call failed: %v", err)
	}
	if err := get("webhook", "op-2"); err != nil {
		t.Errorf("a call about another operation failed: %v", err)
	}
	for i := range 2 {
		var ae smithy.APIError
		if err := get("webhook", "op-1"); !errors.As(err, &ae) || ae.ErrorCode() != "InternalServerError" {
			t.Errorf("call %d at the point: %v, want InternalServerError", i+1, err)
		}
	}
	select {
	case <-fired:
	default:
		t.Error("fired not closed after the armed calls")
	}
	if err := get("webhook", "op-1"); err != nil {
		t.Errorf("a third call failed after two armed: %v", err)
	}
	if n := upstream.Load(); n != 3 {
		t.Errorf("the emulator got %d calls, want the 3 not failed", n)
	}

	held, release := p.calls.holdAt(CallPoint{Function: "poll", Target: "DynamoDB_20120810.GetItem", BodyContains: "op-3"})
	done := make(chan error, 1)
	go func() { done <- get("poll", "op-3") }()
	<-held
	if err := get("poll", "op-4"); err != nil {
		t.Errorf("a call about another operation was held: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("the held call returned before its release: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	before := upstream.Load()
	release()
	release() // idempotent
	if err := <-done; err != nil {
		t.Errorf("the released call: %v", err)
	}
	if n := upstream.Load(); n != before+1 {
		t.Errorf("the emulator got %d calls after the release, want 1", n-before)
	}
	if err := get("poll", "op-3"); err != nil {
		t.Errorf("a call after the release: %v", err)
	}
}
