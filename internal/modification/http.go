package modification

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

// Changes is what the change routes need from the use cases; *Requests satisfies it.
type Changes interface {
	Submit(ctx context.Context, caller mediabuy.Caller, buyID, idempotencyKey string, c Change) (Accepted, error)
	Delivery(ctx context.Context, tenant, buyID string, limit int) (Delivery, error)
}

var _ Changes = (*Requests)(nil)

var (
	idemKeyRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]{8,255}$`)
	opIDRE    = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

// HTTPHandler serves the routes that change a placed buy and read what it delivered —
// PATCH /v1/media-buys/{id}, POST /v1/media-buys/{id}/cancel and GET /v1/media-buys/{id}/delivery
// — and hands every other request to next.
func HTTPHandler(svc Changes, next httpapi.Handler, devHeader string, log *slog.Logger) httpapi.Handler {
	return func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		method := req.RequestContext.HTTP.Method
		path := strings.TrimSuffix(req.RawPath, "/")
		if s := req.RequestContext.Stage; s != "" && s != "$default" {
			path = strings.TrimPrefix(path, "/"+s)
		}
		rest, isItem := strings.CutPrefix(path, "/v1/media-buys/")
		id, sub, _ := strings.Cut(rest, "/")
		route := ""
		switch {
		case !isItem || !opIDRE.MatchString(id):
		case method == http.MethodPatch && sub == "":
			route = "patch"
		case method == http.MethodPost && sub == "cancel":
			route = "cancel"
		case method == http.MethodGet && sub == "delivery":
			route = "delivery"
		case sub == "cancel" || sub == "delivery":
			allow := map[string]string{"cancel": "POST", "delivery": "GET"}[sub]
			resp := httpapi.Error(http.StatusMethodNotAllowed, "method_not_allowed", method+" is not served here; use "+allow, "")
			resp.Headers["Allow"] = allow
			return resp, nil
		}
		if route == "" {
			return next(ctx, req)
		}
		who, err := httpapi.Identify(req, devHeader)
		caller := mediabuy.Caller{Tenant: who.Tenant, Principal: who.Principal}
		if err != nil {
			return httpapi.Error(http.StatusForbidden, "no_identity", "the request carries no caller identity; sign it with SigV4", ""), nil
		}
		rid := req.RequestContext.RequestID
		if route == "delivery" {
			d, err := svc.Delivery(ctx, caller.Tenant, id, deliveryLimit)
			if err != nil {
				return fail(log, rid, err), nil
			}
			return httpapi.JSON(http.StatusOK, d), nil
		}
		key := httpapi.Header(req, "Idempotency-Key")
		if !idemKeyRE.MatchString(key) {
			return httpapi.Error(http.StatusBadRequest, "missing_idempotency_key",
				"send an Idempotency-Key header (8-255 of A-Z a-z 0-9 _ . : -), the same on every retry of this change", "Idempotency-Key"), nil
		}
		if ct := httpapi.Header(req, "Content-Type"); ct != "" && !httpapi.IsJSON(ct) {
			return httpapi.Error(http.StatusUnsupportedMediaType, "unsupported_media_type", "send the change as application/json", "Content-Type"), nil
		}
		body, err := httpapi.Body(req)
		if err != nil {
			return httpapi.Error(http.StatusBadRequest, "malformed_body", "the body could not be decoded", ""), nil
		}
		parse := ParsePatch
		if route == "cancel" {
			parse = ParseCancel
		}
		c, err := parse(body)
		if err != nil {
			return fail(log, rid, err), nil
		}
		out, err := svc.Submit(ctx, caller, id, key, c)
		if err != nil {
			return fail(log, rid, err), nil
		}
		resp := httpapi.JSON(http.StatusAccepted, out)
		resp.Headers["Location"] = out.Links.Change
		return resp, nil
	}
}

// deliveryLimit is how many snapshots GET /v1/media-buys/{id}/delivery returns, newest first.
const deliveryLimit = 50

// fail maps a use case's error to its response: a refused change is its 4xx (409 for a buy
// that cannot take it now), a missing buy 404; anything else is logged with the request id and
// answered 500 without the error's text.
func fail(log *slog.Logger, requestID string, err error) events.APIGatewayV2HTTPResponse {
	var conflict *ConflictError
	var re *RequestError
	switch {
	case errors.As(err, &conflict):
		return httpapi.Error(http.StatusConflict, conflict.Code, conflict.Message, "")
	case errors.As(err, &re):
		return httpapi.Error(re.Status, re.Code, re.Message, re.Field)
	case errors.Is(err, mediabuy.ErrNotFound):
		return httpapi.Error(http.StatusNotFound, "not_found", "no media buy with that id", "")
	}
	log.Error("request failed", "requestId", requestID, "err", err)
	return httpapi.Error(http.StatusInternalServerError, "internal", "buyflow could not complete the request; it is safe to retry with the same Idempotency-Key (request "+requestID+")", "")
}
