package submit

import (
	"context"
	"log/slog"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/buy"
	"github.com/buyflow/buyflow/internal/httpapi"
)

// mediaBuys is what the media-buy routes need from the use cases; *Service satisfies it.
type mediaBuys interface {
	Submit(ctx context.Context, c buy.Caller, idempotencyKey string, body []byte) (api.Submitted, error)
	Get(ctx context.Context, tenant, id string) (api.MediaBuy, error)
	List(ctx context.Context, tenant string, q ListQuery) (api.Page[api.MediaBuy], error)
	Events(ctx context.Context, tenant, id, cursor string, limit int) (api.Page[api.Event], error)
}

// Routes are the media-buy routes by API Gateway route key: POST/GET /v1/media-buys,
// GET /v1/media-buys/{id} and GET /v1/media-buys/{id}/events (serve them with
// httpapi.ByRouteKey). devHeader is the dev-only tenant header (see httpapi.Identify).
func Routes(svc mediaBuys, devHeader string, log *slog.Logger) map[string]httpapi.Handler {
	return httpapi.Resource[api.Submitted, api.Page[api.MediaBuy], api.MediaBuy, api.Page[api.Event]]{
		Path: "/v1/media-buys", Noun: "media buy", ID: buy.ValidOperationID, NotFound: buy.ErrNotFound,
		Location: func(s api.Submitted) string { return s.Links.Self },
		Submit: func(ctx context.Context, who httpapi.Caller, key string, body []byte) (api.Submitted, error) {
			return svc.Submit(ctx, buy.Caller(who), key, body)
		},
		List: func(ctx context.Context, tenant string, q httpapi.Query) (api.Page[api.MediaBuy], error) {
			return svc.List(ctx, tenant, ListQuery{Status: q.Params["status"], Seller: q.Params["seller_id"], Limit: q.Limit, Cursor: q.Cursor})
		},
		Get: svc.Get,
		Events: func(ctx context.Context, tenant, id string, q httpapi.Query) (api.Page[api.Event], error) {
			return svc.Events(ctx, tenant, id, q.Cursor, q.Limit)
		},
		PagedEvents: true,
	}.Routes(devHeader, log)
}
