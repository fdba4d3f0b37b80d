// Command echo is a stand-in bootstrap for the local stack's own tests: API Gateway events are
// answered 200 with the event as the body; stage payloads with action "fail" fail; anything
// else is echoed.
package main

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	lambda.Start(func(_ context.Context, payload json.RawMessage) (any, error) {
		var head struct {
			Action         string          `json:"action"`
			RequestContext json.RawMessage `json:"requestContext"`
		}
		if err := json.Unmarshal(payload, &head); err != nil {
			return nil, err
		}
		switch {
		case head.RequestContext != nil:
			return events.APIGatewayV2HTTPResponse{StatusCode: 200, Headers: map[string]string{"Content-Type": "application/json"}, Body: string(payload)}, nil
		case head.Action == "fail":
			return nil, errors.New("asked to fail")
		}
		return payload, nil
	})
}
