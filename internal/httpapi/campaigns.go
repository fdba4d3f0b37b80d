package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"regexp"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/campaign"
	"github.com/buyflow/buyflow/internal/mediabuy"
)

// Campaigns is what the campaign routes need from the use cases.
type Campaigns interface {
	Submit(ctx context.Context, c mediabuy.Caller, idempotencyKey string, body []byte) (campaign.Submitted, error)
	Get(ctx context.Context, tenant, id string) (campaign.View, error)
	List(ctx context.Context, tenant string, limit int, cursor string) (campaign.ListPage, error)
	Events(ctx context.Context, tenant, id string) (campaign.EventPage, error)
}

var campaignIDRE = regexp.MustCompile(`^cp-[a-z2-7]{26}$`)

// BuyerAPI serves the buyer's routes: /v1/campaigns* (CampaignsHandler) and /v1/media-buys*
// (MediaBuysHandler), both behind the submit function.
func BuyerAPI(buys MediaBuys, campaigns Campaigns, devHeader string, log *slog.Logger) Handler {
	mb := MediaBuysHandler(buys, devHeader, log)
	cp := CampaignsHandler(campaigns, devHeader, log)
	return func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		if p := routePath(req); p == "/v1/campaigns" || strings.HasPrefix(p, "/v1/campaigns/") {
			return cp(ctx, req)
		}
		return mb(ctx, req)
	}
}

// CampaignsHandler serves POST/GET /v1/campaigns, GET /v1/campaigns/{id} and
// GET /v1/campaigns/{id}/events. devHeader is the dev-only tenant header (see Identify).
func CampaignsHandler(svc Campaigns, devHeader string, log *slog.Logger) Handler {
	return func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		caller, err := Identify(req, devHeader)
		if err != nil {
			return Error(http.StatusForbidden, "no_identity", "the request carries no caller identity; sign it with SigV4", ""), nil
		}
		method, path := req.RequestContext.HTTP.Method, routePath(req)
		rest, isItem := strings.CutPrefix(path, "/v1/campaigns/")
		id, sub, _ := strings.Cut(rest, "/")
		rid := req.RequestContext.RequestID

		switch {
		case method == http.MethodPost && path == "/v1/campaigns":
			key, body, refused := submission(req, "campaign")
			if refused != nil {
				return *refused, nil
			}
			out, err := svc.Submit(ctx, caller, key, body)
			if err != nil {
				return FromError(log, rid, err), nil
			}
			resp := JSON(http.StatusAccepted, out)
			resp.Headers["Location"] = out.Links.Self
			return resp, nil

		case method == http.MethodGet && path == "/v1/campaigns":
			limit, perr := limitParam(req)
			if perr != nil {
				return *perr, nil
			}
			page, err := svc.List(ctx, caller.Tenant, limit, req.QueryStringParameters["cursor"])
			if err != nil {
				return FromError(log, rid, err), nil
			}
			return JSON(http.StatusOK, page), nil

		case isItem && !campaignIDRE.MatchString(id):
			return Error(http.StatusNotFound, "not_found", "no campaign with that id", ""), nil

		case method == http.MethodGet && isItem && rest == id:
			v, err := svc.Get(ctx, caller.Tenant, id)
			if err != nil {
				return FromError(log, rid, err), nil
			}
			return JSON(http.StatusOK, v), nil

		case method == http.MethodGet && isItem && sub == "events":
			page, err := svc.Events(ctx, caller.Tenant, id)
			if err != nil {
				return FromError(log, rid, err), nil
			}
			return JSON(http.StatusOK, page), nil
		}
		allow := ""
		switch {
		case path == "/v1/campaigns":
			allow = "GET, POST"
		case isItem && (rest == id || sub == "events"):
			allow = "GET"
		}
		if allow != "" {
			resp := Error(http.StatusMethodNotAllowed, "method_not_allowed", method+" is not served here; use "+allow, "")
			resp.Headers["Allow"] = allow
			return resp, nil
		}
		return Error(http.StatusNotFound, "no_route", "no such route: "+method+" "+path, ""), nil
	}
}
