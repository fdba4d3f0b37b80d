// Package sqsjson calls SQS over its JSON protocol (AWS JSON 1.0, X-Amz-Target AmazonSQS.<action>)
// with a request signer: what the CLI's smoke reads its events queue with and the reconcile
// function sends the sweep's shards with, without the SQS SDK client (about 330 KB of a
// bootstrap kept under 12 MB).
package sqsjson

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/buyflow/buyflow/internal/awsjson"
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

// Retryable reports whether SQS may take the same call later: throttling and its own errors
// (an *awsjson.Error). Anything else, a request that may have been taken included, is not.
func Retryable(err error) bool {
	var e *awsjson.Error
	return errors.As(err, &e) && (e.Status >= 500 || strings.HasSuffix(e.Type, "RequestThrottled") || strings.HasSuffix(e.Type, "ThrottlingException"))
}

// Call sends action with the JSON body in to the queue at queueURL and decodes the answer into
// out (nil: ignored). A refusal is an *awsjson.Error.
func (c *Client) Call(ctx context.Context, queueURL, action string, in, out any) error {
	endpoint := c.Endpoint
	if endpoint == "" {
		u, err := url.Parse(queueURL)
		if err != nil || u.Host == "" {
			return fmt.Errorf("sqs %s: the queue URL %q is not a URL", action, queueURL)
		}
		endpoint = u.Scheme + "://" + u.Host
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return awsjson.Service{Name: "sqs", URL: endpoint, TargetPrefix: "AmazonSQS", Version: "1.0", Sign: c.Sign, HTTP: hc}.Call(ctx, action, in, out)
}
