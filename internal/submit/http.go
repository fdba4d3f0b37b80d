package submit

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"regexp"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/buy"
	"github.com/buyflow/buyflow/internal/httpapi"
)

// MediaBuys is what the media-buy routes need from the use cases; *Service satisfies it.
type MediaBuys interface {
	Submit(ctx context.Context, c buy.Caller, idempotencyKey string, body []byte) (api.Submitted, error)
	Get(ctx context.Context, tenant, id string) (api.MediaBuy, error)
	List(ctx context.Context, tenant string, q ListQuery) (api.Page[api.MediaBuy], error)
	Events(ctx context.Context, tenant, id, cursor string, limit int) (api.Page[api.Event], error)
}

var opIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Routes are the media-buy routes by API Gateway route key: POST/GET /v1/media-buys,
// GET /v1/media-buys/{id} and GET /v1/media-buys/{id}/events (serve them with
// httpapi.ByRouteKey). devHeader is the dev-only tenant header (see httpapi.Identify).
func Routes(svc MediaBuys, devHeader string, log *slog.Logger) map[string]httpapi.Handler {
	r := routes{svc: svc, log: log}
	return map[string]httpapi.Handler{
		"POST /v1/media-buys":            httpapi.WithCaller(devHeader, r.submit),
		"GET /v1/media-buys":             httpapi.WithCaller(devHeader, r.list),
		"GET /v1/media-buys/{id}":        httpapi.WithCaller(devHeader, r.get),
		"GET /v1/media-buys/{id}/events": httpapi.WithCaller(devHeader, r.events),
	}
}

// routes are the media-buy routes' handlers.
type routes struct {
	svc MediaBuys
	log *slog.Logger
}

func (r routes) submit(ctx context.Context, req events.APIGatewayV2HTTPRequest, who httpapi.Caller) (events.APIGatewayV2HTTPResponse, error) {
	key, body, refused := httpapi.Submission(req, "media buy")
	if refused != nil {
		return *refused, nil
	}
	out, err := r.svc.Submit(ctx, buy.Caller(who), key, body)
	if err != nil {
		return fromError(r.log, req.RequestContext.RequestID, err), nil
	}
	resp := httpapi.JSON(http.StatusAccepted, out)
	resp.Headers["Location"] = out.Links.Self
	return resp, nil
}

func (r routes) list(ctx context.Context, req events.APIGatewayV2HTTPRequest, who httpapi.Caller) (events.APIGatewayV2HTTPResponse, error) {
	q := ListQuery{
		Status: req.QueryStringParameters["status"],
		Seller: req.QueryStringParameters["seller_id"],
		Cursor: req.QueryStringParameters["cursor"],
	}
	limit, refused := httpapi.Limit(req)
	if refused != nil {
		return *refused, nil
	}
	q.Limit = limit
	page, err := r.svc.List(ctx, who.Tenant, q)
	if err != nil {
		return fromError(r.log, req.RequestContext.RequestID, err), nil
	}
	return httpapi.JSON(http.StatusOK, page), nil
}

func (r routes) get(ctx context.Context, req events.APIGatewayV2HTTPRequest, who httpapi.Caller) (events.APIGatewayV2HTTPResponse, error) {
	id := req.PathParameters["id"]
	if !opIDRE.MatchString(id) {
		return notFound(), nil
	}
	v, err := r.svc.Get(ctx, who.Tenant, id)
	if err != nil {
		return fromError(r.log, req.RequestContext.RequestID, err), nil
	}
	return httpapi.JSON(http.StatusOK, v), nil
}

func (r routes) events(ctx context.Context, req events.APIGatewayV2HTTPRequest, who httpapi.Caller) (events.APIGatewayV2HTTPResponse, error) {
	id := req.PathParameters["id"]
	if !opIDRE.MatchString(id) {
		return notFound(), nil
	}
	limit, refused := httpapi.Limit(req)
	if refused != nil {
		return *refused, nil
	}
	page, err := r.svc.Events(ctx, who.Tenant, id, req.QueryStringParameters["cursor"], limit)
	if err != nil {
		return fromError(r.log, req.RequestContext.RequestID, err), nil
	}
	return httpapi.JSON(http.StatusOK, page), nil
}

func notFound() events.APIGatewayV2HTTPResponse {
	return httpapi.Error(http.StatusNotFound, "not_found", "no media buy with that id", "")
}

// fromError maps an error to its response: the use cases' typed errors become 4xx with their
// code; anything else is logged (with the request id, never the error's text in the body)
// and answered 500.
func fromError(log *slog.Logger, requestID string, err error) events.APIGatewayV2HTTPResponse {
	var re *buy.RequestError
	switch {
	case errors.As(err, &re):
		return httpapi.Error(re.Status, re.Code, re.Message, re.Field)
	case errors.Is(err, buy.ErrNotFound):
		return notFound()
	}
	return httpapi.Unexpected(log, requestID, err)
}
