package mediabuy

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/httpapi"
)

// MediaBuys is what the media-buy routes need from the use cases; *Service satisfies it.
type MediaBuys interface {
	Submit(ctx context.Context, c Caller, idempotencyKey string, body []byte) (Submitted, error)
	Get(ctx context.Context, tenant, id string) (View, error)
	List(ctx context.Context, tenant string, q ListQuery) (ListPage, error)
	Events(ctx context.Context, tenant, id, cursor string, limit int) (EventPage, error)
}

var opIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// MediaBuysHandler serves POST/GET /v1/media-buys, GET /v1/media-buys/{id} and
// GET /v1/media-buys/{id}/events. devHeader is the dev-only tenant header (see httpapi.Identify).
func HTTPHandler(svc MediaBuys, devHeader string, log *slog.Logger) httpapi.Handler {
	return func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		who, err := httpapi.Identify(req, devHeader)
		if err != nil {
			return httpapi.Error(http.StatusForbidden, "no_identity", "the request carries no caller identity; sign it with SigV4", ""), nil
		}
		caller := Caller{Tenant: who.Tenant, Principal: who.Principal}
		method, path := req.RequestContext.HTTP.Method, httpapi.Path(req)
		id := req.PathParameters["id"]
		rest, isItem := strings.CutPrefix(path, "/v1/media-buys/")
		if isItem && id == "" {
			id, _, _ = strings.Cut(rest, "/")
		}
		rid := req.RequestContext.RequestID

		switch {
		case method == http.MethodPost && path == "/v1/media-buys":
			key, body, refused := httpapi.Submission(req, "media buy")
			if refused != nil {
				return *refused, nil
			}
			out, err := svc.Submit(ctx, caller, key, body)
			if err != nil {
				return fromError(log, rid, err), nil
			}
			resp := httpapi.JSON(http.StatusAccepted, out)
			resp.Headers["Location"] = out.Links.Self
			return resp, nil

		case method == http.MethodGet && path == "/v1/media-buys":
			q := ListQuery{
				Status: req.QueryStringParameters["status"],
				Seller: req.QueryStringParameters["seller_id"],
				Cursor: req.QueryStringParameters["cursor"],
			}
			limit, perr := httpapi.Limit(req)
			if perr != nil {
				return *perr, nil
			}
			q.Limit = limit
			page, err := svc.List(ctx, caller.Tenant, q)
			if err != nil {
				return fromError(log, rid, err), nil
			}
			return httpapi.JSON(http.StatusOK, page), nil

		case method == http.MethodGet && isItem && opIDRE.MatchString(id) && (rest == id):
			v, err := svc.Get(ctx, caller.Tenant, id)
			if err != nil {
				return fromError(log, rid, err), nil
			}
			return httpapi.JSON(http.StatusOK, v), nil

		case method == http.MethodGet && isItem && opIDRE.MatchString(id) && rest == id+"/events":
			limit, perr := httpapi.Limit(req)
			if perr != nil {
				return *perr, nil
			}
			page, err := svc.Events(ctx, caller.Tenant, id, req.QueryStringParameters["cursor"], limit)
			if err != nil {
				return fromError(log, rid, err), nil
			}
			return httpapi.JSON(http.StatusOK, page), nil
		}
		if isItem && !opIDRE.MatchString(id) {
			return httpapi.Error(http.StatusNotFound, "not_found", "no media buy with that id", ""), nil
		}
		// A path buyflow serves, with another method.
		allow := ""
		switch {
		case path == "/v1/media-buys":
			allow = "GET, POST"
		case isItem && (rest == id || rest == id+"/events"):
			allow = "GET"
		}
		if allow != "" {
			resp := httpapi.Error(http.StatusMethodNotAllowed, "method_not_allowed", method+" is not served here; use "+allow, "")
			resp.Headers["Allow"] = allow
			return resp, nil
		}
		return httpapi.Error(http.StatusNotFound, "no_route", "no such route: "+method+" "+path, ""), nil
	}
}

// fromError maps an error to its response: the use cases' typed errors become 4xx with their
// code; anything else is logged (with the request id, never the error's text in the body)
// and answered 500.
func fromError(log *slog.Logger, requestID string, err error) events.APIGatewayV2HTTPResponse {
	var re *RequestError
	switch {
	case errors.As(err, &re):
		return httpapi.Error(re.Status, re.Code, re.Message, re.Field)
	case errors.Is(err, ErrNotFound):
		return httpapi.Error(404, "not_found", "no media buy with that id", "")
	}
	return httpapi.Unexpected(log, requestID, err)
}
