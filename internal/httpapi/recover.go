package httpapi

import (
	"context"
	"mime"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/metrics"
)

// Handler is a Lambda handler for API Gateway HTTP API events.
type Handler func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// Recovering wraps an HTTP handler so that a panic in it is answered like any other failure:
// a 500 in the documented {"error":{…}} shape, logged with its stack and counted as
// metrics.HandlerPanics (metrics.Recovered). The process goes on serving.
func Recovering(rec *metrics.Recorder, h Handler) Handler {
	return func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (resp events.APIGatewayV2HTTPResponse, err error) {
		defer metrics.Recovered(ctx, rec, func(*metrics.PanicError) {
			resp, err = Error(http.StatusInternalServerError, "internal",
				"buyflow failed on this request; it is safe to retry (request "+req.RequestContext.RequestID+")", ""), nil
		})
		return h(ctx, req)
	}
}

// IsJSON reports whether a Content-Type names application/json exactly (parameters such as
// charset are allowed; application/jsonp or application/json-seq are not JSON).
func IsJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}
