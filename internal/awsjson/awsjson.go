// Package awsjson sends one request to an AWS API that speaks the JSON protocol (AWS JSON 1.0
// or 1.1: a POST to the service's endpoint naming the operation in X-Amz-Target, a JSON object
// each way) and reads its answer or its refusal, trying again where Retry allows. buyflow's
// SQS (internal/sqsjson), KMS (internal/signingkey), Secrets Manager (internal/secrets) and
// Step Functions (internal/sfn) clients are built on it rather than on the SDK's clients: each
// of those adds about 0.3 MB to bootstraps kept under 12 MiB, and 0.3–0.9 ms of package
// initialisation to every cold start that links it.
package awsjson

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/aws/smithy-go"
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

// ErrorCode, ErrorMessage and ErrorFault make an *Error a smithy.APIError, as the SDK's
// clients report a refusal: code that asks errors.As for one reads these the same way.
func (e *Error) ErrorCode() string    { return e.Type }
func (e *Error) ErrorMessage() string { return e.Message }
func (e *Error) ErrorFault() smithy.ErrorFault {
	if e.Status >= 500 {
		return smithy.FaultServer
	}
	return smithy.FaultClient
}

var _ smithy.APIError = (*Error)(nil)

// Endpoint is service's endpoint in region: base when set (AWS_ENDPOINT_URL, an emulator's),
// else the region's public endpoint in the AWS or AWS China partition
// (https://states.eu-west-1.amazonaws.com).
func Endpoint(base, service, region string) string {
	if base != "" {
		return base
	}
	suffix := "amazonaws.com"
	if strings.HasPrefix(region, "cn-") {
		suffix = "amazonaws.com.cn"
	}
	return "https://" + service + "." + region + "." + suffix
}

// Retry says how a call is tried again: at most Attempts tries, waiting a random time up to
// Backoff, then up to twice that (full jitter, as the AWS SDKs do, so a burst of cold starts
// spreads out). A try is repeated when it got no answer while the context allows another, when
// the service failed (5xx), or when Again says so of its refusal (throttling).
type Retry struct {
	Attempts int
	Backoff  time.Duration
	Again    func(*Error) bool
}

// Throttling reports whether a refusal is one of the throttling errors the AWS SDKs retry
// (ThrottlingException, TooManyRequestsException, RequestLimitExceeded and the like).
func Throttling(e *Error) bool {
	switch e.Type {
	case "Throttling", "ThrottlingException", "ThrottledException", "RequestThrottledException", "TooManyRequestsException",
		"ProvisionedThroughputExceededException", "TransactionInProgressException", "RequestLimitExceeded",
		"BandwidthLimitExceeded", "LimitExceededException", "RequestThrottled", "SlowDown", "PriorRequestNotComplete":
		return true
	}
	return false
}

// CallRetrying is Call, tried again as r allows. Only a call that changes nothing when it is
// sent twice may be retried: one whose first try was applied but not answered is sent again.
func (s Service) CallRetrying(ctx context.Context, action string, in, out any, r Retry) error {
	for attempt := 1; ; attempt++ {
		err := s.Call(ctx, action, in, out)
		var refused *Error
		again := errors.As(err, &refused) && (refused.Status >= 500 || r.Again != nil && r.Again(refused)) ||
			errors.Is(err, ErrNoAnswer) && ctx.Err() == nil
		if err == nil || !again || attempt >= r.Attempts {
			if err != nil && again {
				err = fmt.Errorf("%w (after %d tries)", err, attempt)
			}
			return err
		}
		wait := time.Duration(rand.Int64N(int64(r.Backoff) << (attempt - 1)))
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (then %w)", err, ctx.Err())
		case <-time.After(wait):
		}
	}
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
