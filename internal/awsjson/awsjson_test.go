package awsjson_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/buyflow/buyflow/internal/awsjson"
)

// answering is a Service whose every call gets status, header and body.
func answering(t testing.TB, status int, header, body string) awsjson.Service {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if header != "" {
			w.Header().Set("X-Amzn-ErrorType", header)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return awsjson.Service{Name: "kms", URL: srv.URL, TargetPrefix: "TrentService", Version: "1.1", HTTP: srv.Client()}
}

// A call is a signed POST with the protocol's headers and the JSON body; the answer decodes.
func TestCallSendsTheProtocolsRequest(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/" || r.Header.Get("X-Amz-Target") != "TrentService.Sign" ||
			r.Header.Get("Content-Type") != "application/x-amz-json-1.1" || r.Header.Get("X-Signed") != `{"KeyId":"k1"}` {
			t.Errorf("request %s %s %v %s", r.Method, r.URL.Path, r.Header, body)
		}
		_, _ = io.WriteString(w, `{"Signature":"c2ln"}`)
	}))
	defer srv.Close()
	svc := awsjson.Service{Name: "kms", URL: srv.URL + "/", TargetPrefix: "TrentService", Version: "1.1", HTTP: srv.Client(),
		Sign: func(r *http.Request, body []byte) error { r.Header.Set("X-Signed", string(body)); return nil }}
	var out struct{ Signature []byte }
	if err := svc.Call(context.Background(), "Sign", map[string]string{"KeyId": "k1"}, &out); err != nil || string(out.Signature) != "sig" {
		t.Fatalf("%q, %v", out.Signature, err)
	}
}

// A refusal is an *Error with the type without its namespace, from the body or, when the body
// is not the service's, from the header; an unreadable answer and no answer are told apart.
func TestCallReadsRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, header, body string
		status             int
		wantType, wantMsg  string
	}{
		{"namespaced", "", `{"__type":"com.amazonaws.sqs#RequestThrottled","message":"slow down"}`, 400, "RequestThrottled", "slow down"},
		{"plain", "", `{"__type":"NotFoundException","Message":"no such key"}`, 400, "NotFoundException", "no such key"},
		{"a proxy's page", "ServiceUnavailable:http://internal.amazon.com/", "<html>busy</html>", 503, "ServiceUnavailable", "<html>busy</html>"},
		{"nothing", "", "", 500, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := answering(t, tc.status, tc.header, tc.body).Call(context.Background(), "Sign", struct{}{}, nil)
			var e *awsjson.Error
			if !errors.As(err, &e) || e.Status != tc.status || e.Type != tc.wantType || e.Message != tc.wantMsg || e.Action != "Sign" {
				t.Fatalf("err = %#v", err)
			}
			if errors.Is(err, awsjson.ErrNoAnswer) {
				t.Error("a refusal is an answer")
			}
		})
	}
	var out struct{ N int }
	err := answering(t, 200, "", `{"N":"not a number"}`).Call(context.Background(), "Sign", struct{}{}, &out)
	var e *awsjson.Error
	if err == nil || errors.As(err, &e) || errors.Is(err, awsjson.ErrNoAnswer) {
		t.Errorf("an answer that does not decode: %v", err)
	}
	gone := answering(t, 200, "", "{}")
	gone.URL = "http://127.0.0.1:1"
	if err := gone.Call(context.Background(), "Sign", struct{}{}, nil); !errors.Is(err, awsjson.ErrNoAnswer) {
		t.Errorf("no answer: %v", err)
	}
	long := answering(t, 400, "", `{"__type":"X","message":"`+strings.Repeat("m", 1000)+`"}`)
	if err := long.Call(context.Background(), "Sign", struct{}{}, nil); !errors.As(err, &e) || len(e.Message) > 310 {
		t.Errorf("a long message is kept whole: %d bytes", len(e.Message))
	}
}

// FuzzCall: whatever a service (or whatever answers in its place) sends back, a call returns

// A refusal reads as the SDK's clients report one (a smithy.APIError, server fault for a
// 5xx); a throttled call is tried again, a denied one is not; an endpoint follows the
// partition unless the configuration names one.
func TestRefusalsRetriesAndEndpoints(t *testing.T) {
	var api smithy.APIError
	err := answering(t, 400, "", `{"__type":"com.amazonaws.kms#AccessDeniedException","message":"no"}`).Call(context.Background(), "Sign", nil, nil)
	if !errors.As(err, &api) || api.ErrorCode() != "AccessDeniedException" || api.ErrorMessage() != "no" || api.ErrorFault() != smithy.FaultClient {
		t.Errorf("refusal: %v", err)
	}
	if err := answering(t, 503, "", "busy").Call(context.Background(), "Sign", nil, nil); !errors.As(err, &api) || api.ErrorFault() != smithy.FaultServer {
		t.Errorf("5xx: %v", err)
	}
	for _, tc := range []struct {
		body        string
		again       bool
		wantTries   int
		wantSuccess bool
	}{
		{`{"__type":"ThrottlingException"}`, true, 2, true},
		{`{"__type":"ThrottlingException"}`, false, 1, false},
		{`{"__type":"AccessDeniedException"}`, true, 1, false},
	} {
		tries := 0
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tries++; tries == 1 || !tc.wantSuccess {
				w.WriteHeader(400)
				_, _ = io.WriteString(w, tc.body)
				return
			}
			_, _ = io.WriteString(w, `{}`)
		}))
		svc := awsjson.Service{Name: "sqs", URL: srv.URL, TargetPrefix: "AmazonSQS", Version: "1.0", HTTP: srv.Client()}
		retry := awsjson.Retry{Attempts: 3, Backoff: time.Millisecond}
		if tc.again {
			retry.Again = awsjson.Throttling
		}
		err := svc.CallRetrying(context.Background(), "SendMessage", nil, nil, retry)
		srv.Close()
		if tries != tc.wantTries || (err == nil) != tc.wantSuccess {
			t.Errorf("%s (again: %v): %d tries, %v", tc.body, tc.again, tries, err)
		}
	}
	for base, want := range map[[3]string]string{
		{"", "states", "eu-west-1"}:                      "https://states.eu-west-1.amazonaws.com",
		{"", "secretsmanager", "cn-north-1"}:             "https://secretsmanager.cn-north-1.amazonaws.com.cn",
		{"http://127.0.0.1:4566", "states", "us-east-1"}: "http://127.0.0.1:4566",
	} {
		if got := awsjson.Endpoint(base[0], base[1], base[2]); got != want {
			t.Errorf("Endpoint%q = %s, want %s", base, got, want)
		}
	}
}

// an answer or an error, never a panic.
func FuzzCall(f *testing.F) {
	f.Add(400, "", `{"__type":"com.amazonaws.sqs#RequestThrottled","message":"slow down"}`)
	f.Add(200, "", `{"Successful":[{"Id":"0"}],"Failed":[]}`)
	f.Add(503, "Throttling:x", "<html/>")
	f.Fuzz(func(t *testing.T, status int, header, body string) {
		if status < 200 || status > 599 {
			return
		}
		svc := awsjson.Service{Name: "sqs", URL: "http://sqs.invalid", TargetPrefix: "AmazonSQS", Version: "1.0",
			HTTP: &http.Client{Transport: roundTrip(func(r *http.Request) (*http.Response, error) {
				h := http.Header{}
				h.Set("X-Amzn-ErrorType", header)
				return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
			})}}
		var out map[string]any
		err := svc.Call(context.Background(), "SendMessageBatch", map[string]string{"QueueUrl": "q"}, &out)
		var e *awsjson.Error
		if status != 200 && !errors.As(err, &e) {
			t.Fatalf("HTTP %d answered %v, want an *Error", status, err)
		}
	})
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
