package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/mediabuy"
	"github.com/buyflow/buyflow/internal/modification"
)

// Changes is what the change routes need from the use cases.
type Changes interface {
	Submit(ctx context.Context, caller mediabuy.Caller, buyID, idempotencyKey string, c modification.Change) (modification.Accepted, error)
	Delivery(ctx context.Context, tenant, buyID string, limit int) (modification.Delivery, error)
}

// ChangesHandler serves the routes that change a placed buy and read what it delivered —
// PATCH /v1/media-buys/{id}, POST /v1/media-buys/{id}/cancel and GET /v1/media-buys/{id}/delivery
// — and hands every other request to next.
func ChangesHandler(svc Changes, next Handler, devHeader string, log *slog.Logger) Handler {
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
			resp := Error(http.StatusMethodNotAllowed, "method_not_allowed", method+" is not served here; use "+allow, "")
			resp.Headers["Allow"] = allow
			return resp, nil
		}
		if route == "" {
			return next(ctx, req)
		}
		caller, err := Identify(req, devHeader)
		if err != nil {
			return Error(http.StatusForbidden, "no_identity", "the request carries no caller identity; sign it with SigV4", ""), nil
		}
		rid := req.RequestContext.RequestID
		if route == "delivery" {
			limit, perr := limitParam(req)
			if perr != nil {
				return *perr, nil
			}
			d, err := svc.Delivery(ctx, caller.Tenant, id, limit)
			if err != nil {
				return FromError(log, rid, err), nil
			}
			return JSON(http.StatusOK, d), nil
		}
		key := Header(req, "Idempotency-Key")
		if !idemKeyRE.MatchString(key) {
			return Error(http.StatusBadRequest, "missing_idempotency_key",
				"send an Idempotency-Key header (8-255 of A-Z a-z 0-9 _ . : -), the same on every retry of this change", "Idempotency-Key"), nil
		}
		if ct := Header(req, "Content-Type"); ct != "" && !IsJSON(ct) {
			return Error(http.StatusUnsupportedMediaType, "unsupported_media_type", "send the change as application/json", "Content-Type"), nil
		}
		body, err := Body(req)
		if err != nil {
			return Error(http.StatusBadRequest, "malformed_body", "the body could not be decoded", ""), nil
		}
		parse := modification.ParsePatch
		if route == "cancel" {
			parse = modification.ParseCancel
		}
		c, err := parse(body)
		if err != nil {
			return FromError(log, rid, err), nil
		}
		out, err := svc.Submit(ctx, caller, id, key, c)
		var conflict *modification.ConflictError
		switch {
		case errors.As(err, &conflict):
			return Error(http.StatusConflict, conflict.Code, conflict.Message, ""), nil
		case err != nil:
			return FromError(log, rid, err), nil
		}
		resp := JSON(http.StatusAccepted, out)
		resp.Headers["Location"] = out.Links.Change
		return resp, nil
	}
}
