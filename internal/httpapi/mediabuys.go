package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/mediabuy"
)

// MediaBuys is what the media-buy routes need from the use cases.
type MediaBuys interface {
	Submit(ctx context.Context, c mediabuy.Caller, idempotencyKey string, body []byte) (mediabuy.Submitted, error)
	Get(ctx context.Context, tenant, id string) (mediabuy.View, error)
	List(ctx context.Context, tenant string, q mediabuy.ListQuery) (mediabuy.ListPage, error)
	Events(ctx context.Context, tenant, id, cursor string, limit int) (mediabuy.EventPage, error)
}

// Handler is a Lambda handler for API Gateway HTTP API events.
type Handler func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

var (
	idemKeyRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]{8,255}$`)
	opIDRE    = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

// MediaBuysHandler serves POST/GET /v1/media-buys, GET /v1/media-buys/{id} and
// GET /v1/media-buys/{id}/events. devHeader is the dev-only tenant header (see Identify).
func MediaBuysHandler(svc MediaBuys, devHeader string, log *slog.Logger) Handler {
	return func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		caller, err := Identify(req, devHeader)
		if err != nil {
			return Error(http.StatusForbidden, "no_identity", "the request carries no caller identity; sign it with SigV4", ""), nil
		}
		method, path := req.RequestContext.HTTP.Method, routePath(req)
		id := req.PathParameters["id"]
		rest, isItem := strings.CutPrefix(path, "/v1/media-buys/")
		if isItem && id == "" {
			id, _, _ = strings.Cut(rest, "/")
		}
		rid := req.RequestContext.RequestID

		switch {
		case method == http.MethodPost && path == "/v1/media-buys":
			key, body, refused := submission(req, "media buy")
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

		case method == http.MethodGet && path == "/v1/media-buys":
			q := mediabuy.ListQuery{
				Status: req.QueryStringParameters["status"],
				Seller: req.QueryStringParameters["seller_id"],
				Cursor: req.QueryStringParameters["cursor"],
			}
			limit, perr := limitParam(req)
			if perr != nil {
				return *perr, nil
			}
			q.Limit = limit
			page, err := svc.List(ctx, caller.Tenant, q)
			if err != nil {
				return FromError(log, rid, err), nil
			}
			return JSON(http.StatusOK, page), nil

		case method == http.MethodGet && isItem && opIDRE.MatchString(id) && (rest == id):
			v, err := svc.Get(ctx, caller.Tenant, id)
			if err != nil {
				return FromError(log, rid, err), nil
			}
			return JSON(http.StatusOK, v), nil

		case method == http.MethodGet && isItem && opIDRE.MatchString(id) && rest == id+"/events":
			limit, perr := limitParam(req)
			if perr != nil {
				return *perr, nil
			}
			page, err := svc.Events(ctx, caller.Tenant, id, req.QueryStringParameters["cursor"], limit)
			if err != nil {
				return FromError(log, rid, err), nil
			}
			return JSON(http.StatusOK, page), nil
		}
		if isItem && !opIDRE.MatchString(id) {
			return Error(http.StatusNotFound, "not_found", "no media buy with that id", ""), nil
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
			resp := Error(http.StatusMethodNotAllowed, "method_not_allowed", method+" is not served here; use "+allow, "")
			resp.Headers["Allow"] = allow
			return resp, nil
		}
		return Error(http.StatusNotFound, "no_route", "no such route: "+method+" "+path, ""), nil
	}
}

// routePath is the request's path without a trailing slash or a named stage.
func routePath(req events.APIGatewayV2HTTPRequest) string {
	path := strings.TrimSuffix(req.RawPath, "/")
	if s := req.RequestContext.Stage; s != "" && s != "$default" {
		path = strings.TrimPrefix(path, "/"+s)
	}
	return path
}

// submission reads what every submit route needs: the Idempotency-Key and a JSON body. what
// names the thing submitted in the refusals ("media buy", "campaign").
func submission(req events.APIGatewayV2HTTPRequest, what string) (string, []byte, *events.APIGatewayV2HTTPResponse) {
	key := Header(req, "Idempotency-Key")
	if !idemKeyRE.MatchString(key) {
		resp := Error(http.StatusBadRequest, "missing_idempotency_key",
			"send an Idempotency-Key header (8-255 of A-Z a-z 0-9 _ . : -), the same on every retry of this "+what, "Idempotency-Key")
		return "", nil, &resp
	}
	if ct := Header(req, "Content-Type"); ct != "" && !IsJSON(ct) {
		resp := Error(http.StatusUnsupportedMediaType, "unsupported_media_type", "send the "+what+" as application/json", "Content-Type")
		return "", nil, &resp
	}
	body, err := Body(req)
	if err != nil {
		resp := Error(http.StatusBadRequest, "malformed_body", "the body could not be decoded", "")
		return "", nil, &resp
	}
	return key, body, nil
}

func limitParam(req events.APIGatewayV2HTTPRequest) (int, *events.APIGatewayV2HTTPResponse) {
	s := req.QueryStringParameters["limit"]
	if s == "" {
		return 25, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 100 {
		resp := Error(http.StatusBadRequest, "invalid_limit", "limit must be an integer from 1 to 100", "limit")
		return 0, &resp
	}
	return n, nil
}
