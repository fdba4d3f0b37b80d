// Package sqsjson calls SQS over its JSON protocol (AWS JSON 1.0, X-Amz-Target AmazonSQS.<action>)
// with a request signer: what the CLI's smoke reads its events queue with and the reconcile
// function sends the sweep's shards with, without the SQS SDK client (about 330 KB of a
// bootstrap kept under 12 MB).
package sqsjson

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client calls SQS.
type Client struct {
	// Endpoint is where requests go (an emulator's, AWS_ENDPOINT_URL); empty: the queue URL's
	// scheme and host, which is SQS's regional endpoint.
	Endpoint string
	// Sign signs a request for service sqs in the queue's region (internal/sigv4); nil sends
	// it unsigned.
	Sign func(*http.Request, []byte) error
	// HTTP is the client (default: 30 s timeout).
	HTTP *http.Client
}

// Error is SQS's refusal of a call: the HTTP status and the error document's type and message.
type Error struct {
	Action, Type, Message string
	Status                int
}

func (e *Error) Error() string {
	return fmt.Sprintf("sqs %s: HTTP %d: %s: %s", e.Action, e.Status, e.Type, e.Message)
}

// Retryable reports whether SQS may take the same call later: throttling and its own errors.
func (e *Error) Retryable() bool {
	return e.Status >= 500 || strings.HasSuffix(e.Type, "RequestThrottled") || strings.HasSuffix(e.Type, "ThrottlingException")
}

// Call sends action with the JSON body in to the queue at queueURL and decodes the answer into
// out (nil: ignored). A refusal is an *Error.
func (c *Client) Call(ctx context.Context, queueURL, action string, in, out any) error {
	endpoint := c.Endpoint
	if endpoint == "" {
		u, err := url.Parse(queueURL)
		if err != nil || u.Host == "" {
			return fmt.Errorf("sqs %s: the queue URL %q is not a URL", action, queueURL)
		}
		endpoint = u.Scheme + "://" + u.Host
	}
	body, err := json.Marshal(in)
	if err != nil {
		return fmt.Errorf("sqs %s: %w", action, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(endpoint, "/")+"/", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("sqs %s: %w", action, err)
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "AmazonSQS."+action)
	if c.Sign != nil {
		if err := c.Sign(req, body); err != nil {
			return fmt.Errorf("sqs %s: %w", action, err)
		}
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("sqs %s: %w", action, err)
	}
	defer func() { _ = resp.Body.Close() }() // read below
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("sqs %s: %w", action, err)
	}
	if resp.StatusCode != http.StatusOK {
		// AWS's error document names the refusal (AccessDenied names the permission).
		var doc struct {
			Type    string `json:"__type"`
			Message string `json:"message"`
		}
		if json.Unmarshal(b, &doc) != nil || doc.Type == "" {
			doc.Type, doc.Message = resp.Header.Get("X-Amzn-Errortype"), string(bytes.TrimSpace(b))
		}
		return &Error{Action: action, Type: doc.Type, Message: doc.Message, Status: resp.StatusCode}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("sqs %s: %w", action, err)
	}
	return nil
}
