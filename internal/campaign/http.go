package campaign

import (
	"context"
	"log/slog"
	"strings"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/buy"
	"github.com/buyflow/buyflow/internal/charclass"
	"github.com/buyflow/buyflow/internal/httpapi"
)

// campaigns is what the campaign routes need from the use cases; *Service satisfies it.
type campaigns interface {
	Submit(ctx context.Context, c buy.Caller, idempotencyKey string, body []byte) (api.CampaignSubmitted, error)
	Get(ctx context.Context, tenant, id string) (api.Campaign, error)
	List(ctx context.Context, tenant string, limit int, cursor string) (api.Page[api.Campaign], error)
	Events(ctx context.Context, tenant, id string) (api.Page[api.CampaignEvent], error)
}

var _ campaigns = (*Service)(nil)

// validID accepts a campaign's id as the API hands it out: cp- and 26 of base32's [a-z2-7].
func validID(id string) bool {
	rest, ok := strings.CutPrefix(id, "cp-")
	return ok && idChars.Span(rest, 26, 26)
}

var idChars = charclass.Of("a-z2-7")

// Routes are the campaign routes by API Gateway route key: POST/GET /v1/campaigns,
// GET /v1/campaigns/{id} and GET /v1/campaigns/{id}/events (serve them with
// httpapi.ByRouteKey). devHeader is the dev-only tenant header (see httpapi.Identify). A
// campaign's timeline is one page: its events route reads no query.
func Routes(svc campaigns, devHeader string, log *slog.Logger) map[string]httpapi.Handler {
	return httpapi.Resource[api.CampaignSubmitted, api.Page[api.Campaign], api.Campaign, api.Page[api.CampaignEvent]]{
		Path: "/v1/campaigns", Noun: "campaign", ID: validID, NotFound: ErrNotFound,
		Location: func(s api.CampaignSubmitted) string { return s.Links.Self },
		Submit: func(ctx context.Context, who httpapi.Caller, key string, body []byte) (api.CampaignSubmitted, error) {
			return svc.Submit(ctx, buy.Caller(who), key, body)
		},
		List: func(ctx context.Context, tenant string, q httpapi.Query) (api.Page[api.Campaign], error) {
			return svc.List(ctx, tenant, q.Limit, q.Cursor)
		},
		Get: svc.Get,
		Events: func(ctx context.Context, tenant, id string, _ httpapi.Query) (api.Page[api.CampaignEvent], error) {
			return svc.Events(ctx, tenant, id)
		},
	}.Routes(devHeader, log)
}
