package campaign

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

// Campaigns is what the campaign routes need from the use cases; *Service satisfies it.
type Campaigns interface {
	Submit(ctx context.Context, c buy.Caller, idempotencyKey string, body []byte) (api.CampaignSubmitted, error)
	Get(ctx context.Context, tenant, id string) (api.Campaign, error)
	List(ctx context.Context, tenant string, limit int, cursor string) (api.Page[api.Campaign], error)
	Events(ctx context.Context, tenant, id string) (api.Page[api.CampaignEvent], error)
}

var _ Campaigns = (*Service)(nil)

var idRE = regexp.MustCompile(`^cp-[a-z2-7]{26}$`)

// Routes are the campaign routes by API Gateway route key: POST/GET /v1/campaigns,
// GET /v1/campaigns/{id} and GET /v1/campaigns/{id}/events (serve them with
// httpapi.ByRouteKey). devHeader is the dev-only tenant header (see httpapi.Identify).
func Routes(svc Campaigns, devHeader string, log *slog.Logger) map[string]httpapi.Handler {
	r := routes{svc: svc, log: log}
	return map[string]httpapi.Handler{
		"POST /v1/campaigns":            httpapi.WithCaller(devHeader, r.submit),
		"GET /v1/campaigns":             httpapi.WithCaller(devHeader, r.list),
		"GET /v1/campaigns/{id}":        httpapi.WithCaller(devHeader, r.get),
		"GET /v1/campaigns/{id}/events": httpapi.WithCaller(devHeader, r.events),
	}
}

// routes are the campaign routes' handlers.
type routes struct {
	svc Campaigns
	log *slog.Logger
}

func (r routes) submit(ctx context.Context, req events.APIGatewayV2HTTPRequest, who httpapi.Caller) (events.APIGatewayV2HTTPResponse, error) {
	key, body, refused := httpapi.Submission(req, "campaign")
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
	limit, refused := httpapi.Limit(req)
	if refused != nil {
		return *refused, nil
	}
	page, err := r.svc.List(ctx, who.Tenant, limit, req.QueryStringParameters["cursor"])
	if err != nil {
		return fromError(r.log, req.RequestContext.RequestID, err), nil
	}
	return httpapi.JSON(http.StatusOK, page), nil
}

func (r routes) get(ctx context.Context, req events.APIGatewayV2HTTPRequest, who httpapi.Caller) (events.APIGatewayV2HTTPResponse, error) {
	id := req.PathParameters["id"]
	if !idRE.MatchString(id) {
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
	if !idRE.MatchString(id) {
		return notFound(), nil
	}
	page, err := r.svc.Events(ctx, who.Tenant, id)
	if err != nil {
		return fromError(r.log, req.RequestContext.RequestID, err), nil
	}
	return httpapi.JSON(http.StatusOK, page), nil
}

func notFound() events.APIGatewayV2HTTPResponse {
	return httpapi.Error(http.StatusNotFound, "not_found", "no campaign with that id", "")
}

// fromError maps the campaign use cases' errors to responses: a refusal is its 4xx, an unknown
// campaign 404, anything else a 500 that reveals nothing.
func fromError(log *slog.Logger, requestID string, err error) events.APIGatewayV2HTTPResponse {
	var re *buy.RequestError
	switch {
	case errors.As(err, &re):
		return httpapi.Error(re.Status, re.Code, re.Message, re.Field)
	case errors.Is(err, ErrNotFound):
		return notFound()
	}
	return httpapi.Unexpected(log, requestID, err)
}
