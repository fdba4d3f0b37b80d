package campaign

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/httpapi"
	"github.com/buyflow/buyflow/internal/mediabuy"
)

// Campaigns is what the campaign routes need from the use cases; *Service satisfies it.
type Campaigns interface {
	Submit(ctx context.Context, c mediabuy.Caller, idempotencyKey string, body []byte) (Submitted, error)
	Get(ctx context.Context, tenant, id string) (View, error)
	List(ctx context.Context, tenant string, limit int, cursor string) (ListPage, error)
	Events(ctx context.Context, tenant, id string) (EventPage, error)
}

var _ Campaigns = (*Service)(nil)

var idRE = regexp.MustCompile(`^cp-[a-z2-7]{26}$`)

// HTTPHandler serves POST/GET /v1/campaigns, GET /v1/campaigns/{id} and
// GET /v1/campaigns/{id}/events. devHeader is the dev-only tenant header (see httpapi.Identify).
func HTTPHandler(svc Campaigns, devHeader string, log *slog.Logger) httpapi.Handler {
	return func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		who, err := httpapi.Identify(req, devHeader)
		if err != nil {
			return httpapi.Error(http.StatusForbidden, "no_identity", "the request carries no caller identity; sign it with SigV4", ""), nil
		}
		caller := mediabuy.Caller{Tenant: who.Tenant, Principal: who.Principal}
		method, path := req.RequestContext.HTTP.Method, httpapi.Path(req)
		rest, isItem := strings.CutPrefix(path, "/v1/campaigns/")
		id, sub, _ := strings.Cut(rest, "/")
		rid := req.RequestContext.RequestID

		switch {
		case method == http.MethodPost && path == "/v1/campaigns":
			key, body, refused := httpapi.Submission(req, "campaign")
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

		case method == http.MethodGet && path == "/v1/campaigns":
			limit, refused := httpapi.Limit(req)
			if refused != nil {
				return *refused, nil
			}
			page, err := svc.List(ctx, caller.Tenant, limit, req.QueryStringParameters["cursor"])
			if err != nil {
				return fromError(log, rid, err), nil
			}
			return httpapi.JSON(http.StatusOK, page), nil

		case isItem && !idRE.MatchString(id):
			return httpapi.Error(http.StatusNotFound, "not_found", "no campaign with that id", ""), nil

		case method == http.MethodGet && isItem && rest == id:
			v, err := svc.Get(ctx, caller.Tenant, id)
			if err != nil {
				return fromError(log, rid, err), nil
			}
			return httpapi.JSON(http.StatusOK, v), nil

		case method == http.MethodGet && isItem && sub == "events":
			page, err := svc.Events(ctx, caller.Tenant, id)
			if err != nil {
				return fromError(log, rid, err), nil
			}
			return httpapi.JSON(http.StatusOK, page), nil
		}
		allow := ""
		switch {
		case path == "/v1/campaigns":
			allow = "GET, POST"
		case isItem && (rest == id || sub == "events"):
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

// fromError maps the campaign use cases' errors to responses: a refusal is its 4xx, an unknown
// campaign 404, anything else a 500 that reveals nothing.
func fromError(log *slog.Logger, requestID string, err error) events.APIGatewayV2HTTPResponse {
	var re *mediabuy.RequestError
	switch {
	case errors.As(err, &re):
		return httpapi.Error(re.Status, re.Code, re.Message, re.Field)
	case errors.Is(err, ErrNotFound):
		return httpapi.Error(404, "not_found", "no campaign with that id", "")
	}
	return httpapi.Unexpected(log, requestID, err)
}
