package modify

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/buy"
	"github.com/buyflow/buyflow/internal/httpapi"
)

// changes is what the change routes need from the use cases; *Requests satisfies it.
type changes interface {
	Submit(ctx context.Context, caller buy.Caller, buyID, idempotencyKey string, c Change) (api.ChangeAccepted, error)
	Delivery(ctx context.Context, tenant, buyID string, limit int) (api.Delivery, error)
}

var _ changes = (*Requests)(nil)

// Routes are the routes that change a placed buy and read what it delivered, by API Gateway
// route key: PATCH /v1/media-buys/{id}, POST /v1/media-buys/{id}/cancel and
// GET /v1/media-buys/{id}/delivery (serve them with httpapi.ByRouteKey).
func Routes(svc changes, devHeader string, log *slog.Logger) map[string]httpapi.Handler {
	r := routes{svc: svc, log: log}
	return map[string]httpapi.Handler{
		"PATCH /v1/media-buys/{id}":        httpapi.WithCaller(devHeader, r.change(ParsePatch)),
		"POST /v1/media-buys/{id}/cancel":  httpapi.WithCaller(devHeader, r.change(ParseCancel)),
		"GET /v1/media-buys/{id}/delivery": httpapi.WithCaller(devHeader, r.delivery),
	}
}

// routes are the change routes' handlers.
type routes struct {
	svc changes
	log *slog.Logger
}

func (r routes) delivery(ctx context.Context, req events.APIGatewayV2HTTPRequest, who httpapi.Caller) (events.APIGatewayV2HTTPResponse, error) {
	id := req.PathParameters["id"]
	if !buy.ValidOperationID(id) {
		return notFound(), nil
	}
	d, err := r.svc.Delivery(ctx, who.Tenant, id, deliveryLimit)
	if err != nil {
		return fail(r.log, req.RequestContext.RequestID, err), nil
	}
	return httpapi.JSON(http.StatusOK, d), nil
}

// change accepts a change of the buy, the body read by parse.
func (r routes) change(parse func([]byte) (Change, error)) func(context.Context, events.APIGatewayV2HTTPRequest, httpapi.Caller) (events.APIGatewayV2HTTPResponse, error) {
	return func(ctx context.Context, req events.APIGatewayV2HTTPRequest, who httpapi.Caller) (events.APIGatewayV2HTTPResponse, error) {
		id := req.PathParameters["id"]
		if !buy.ValidOperationID(id) {
			return notFound(), nil
		}
		key, body, refused := httpapi.Submission(req, "change")
		if refused != nil {
			return *refused, nil
		}
		rid := req.RequestContext.RequestID
		c, err := parse(body)
		if err != nil {
			return fail(r.log, rid, err), nil
		}
		out, err := r.svc.Submit(ctx, buy.Caller(who), id, key, c)
		if err != nil {
			return fail(r.log, rid, err), nil
		}
		resp := httpapi.JSON(http.StatusAccepted, out)
		resp.Headers["Location"] = out.Links.Change
		return resp, nil
	}
}

func notFound() events.APIGatewayV2HTTPResponse {
	return httpapi.Error(http.StatusNotFound, "not_found", "no media buy with that id", "")
}

// deliveryLimit is how many snapshots GET /v1/media-buys/{id}/delivery returns, newest first.
const deliveryLimit = 50

// fail maps a use case's error to its response: a refused change is its 4xx (409 for a buy
// that cannot take it now), a missing buy 404; anything else is httpapi.Unexpected's (a 409
// for a write that kept losing races, else a 500, logged with the request id).
func fail(log *slog.Logger, requestID string, err error) events.APIGatewayV2HTTPResponse {
	var conflict *ConflictError
	var re *RequestError
	switch {
	case errors.As(err, &conflict):
		return httpapi.Error(http.StatusConflict, conflict.Code, conflict.Message, "")
	case errors.As(err, &re):
		return httpapi.Error(re.Status, re.Code, re.Message, re.Field)
	case errors.Is(err, buy.ErrNotFound):
		return notFound()
	}
	return httpapi.Unexpected(log, requestID, err)
}
