// Package awsjson sends one request to an AWS API that speaks the JSON protocol (AWS JSON 1.0
// or 1.1: a POST to the service's endpoint naming the operation in X-Amz-Target, a JSON object
// each way) and reads its answer or its refusal. buyflow's SQS client (internal/sqsjson) and
// KMS client (internal/signingkey) are built on it rather than on the SDK's clients, each of
// which would add about 0.3 MB to bootstraps kept under 12 MiB.
package awsjson

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Service is one JSON-protocol API at one endpoint.
type Service struct {
	// Name names the service in errors ("sqs", "kms").
	Name string
	// URL is the endpoint (https://kms.eu-west-1.amazonaws.com, an emulator's).
	URL string
	// TargetPrefix is X-Amz-Target's prefix ("AmazonSQS", "TrentService").
	TargetPrefix string
	// Version is the protocol version: "1.0" (SQS) or "1.1" (KMS).
	Version string
	// Sign signs a request with its body (internal/sigv4); nil sends it unsigned.
	Sign func(*http.Request, []byte) error
	// HTTP sends the request (its timeout bounds one try).
	HTTP *http.Client
}

// maxAnswerBytes bounds what is read of an answer: the largest buyflow asks for (a batch of
// ten queue messages) is well under it.
const maxAnswerBytes = 4 << 20

// ErrNoAnswer marks a request that got no answer, or only part of one (the connection failed,
// the try timed out): it may be sent again while the caller's context allows.
var ErrNoAnswer = errors.New("no answer")

// Error is the service's refusal of a call: the HTTP status and the error document's type
// (without its namespace: "ThrottlingException", not "com.amazonaws.sqs#ThrottlingException")
// and message.
type Error struct {
	Service, Action, Type, Message string
	Status                         int
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d %s: %s", e.Service, e.Action, e.Status, e.Type, e.Message)
}

// Call sends action with in as its JSON body and decodes the answer into out (nil: ignored).
// A refusal is an *Error; a failure to get the answer wraps ErrNoAnswer.
func (s Service) Call(ctx context.Context, action string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("%s %s: %w", s.Name, action, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(s.URL, "/")+"/", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s %s: %w", s.Name, action, err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-"+s.Version)
	req.Header.Set("X-Amz-Target", s.TargetPrefix+"."+action)
	if s.Sign != nil {
		if err := s.Sign(req, body); err != nil {
			return fmt.Errorf("%s %s: sign the request: %w", s.Name, action, err)
		}
	}
	resp, err := s.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w: %w", s.Name, action, ErrNoAnswer, err)
	}
	defer func() { _ = resp.Body.Close() }() // read below
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return fmt.Errorf("%s %s: %w: read the answer: %w", s.Name, action, ErrNoAnswer, err)
	}
	if resp.StatusCode != http.StatusOK {
		return refusal(s.Name, action, resp, raw)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: an answer that is not the service's JSON: %w", s.Name, action, err)
	}
	return nil
}

// refusal reads the error document of a non-200 answer; one that is not the service's (a
// proxy's page) leaves the type to the X-Amzn-ErrorType header and the message to the body.
func refusal(service, action string, resp *http.Response, raw []byte) *Error {
	var doc struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &doc) != nil || doc.Type == "" {
		doc.Type, doc.Message = resp.Header.Get("X-Amzn-ErrorType"), string(bytes.TrimSpace(raw))
	}
	if i := strings.LastIndexByte(doc.Type, '#'); i >= 0 {
		doc.Type = doc.Type[i+1:]
	}
	// The header form may carry ":<url>" after the type.
	doc.Type, _, _ = strings.Cut(doc.Type, ":")
	return &Error{Service: service, Action: action, Type: doc.Type, Message: clip(doc.Message, 300), Status: resp.StatusCode}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
