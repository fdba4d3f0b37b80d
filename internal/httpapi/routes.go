package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/charclass"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/topology"
)

// path is the request's path without a trailing slash or a named stage.
func path(req events.APIGatewayV2HTTPRequest) string {
	path := strings.TrimSuffix(req.RawPath, "/")
	if s := req.RequestContext.Stage; s != "" && s != "$default" {
		path = strings.TrimPrefix(path, "/"+s)
	}
	return path
}

// ByRouteKey serves each request with the handler its route key has in one of tables
// ("GET /v1/media-buys/{id}"): API Gateway matched the request's method and path to a route
// of app and filled PathParameters before invoking the function, so the handler is chosen by
// req.RouteKey, never by parsing the path again. A catch-all route (ANY) is answered 405 with
// Allow when app serves the path with other methods, else 404 no_route (as are the default
// route, which API Gateway sends every request no other route matches, and a route of app
// that no table serves).
func ByRouteKey(app topology.Application, tables ...map[string]Handler) Handler {
	handlers := map[string]Handler{}
	for _, t := range tables {
		maps.Copy(handlers, t)
	}
	return func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		if h, ok := handlers[req.RouteKey]; ok {
			return h(ctx, req)
		}
		method, path := req.RequestContext.HTTP.Method, path(req)
		if strings.HasPrefix(req.RouteKey, "ANY ") {
			// API Gateway prefers a method's route to an ANY route of the same path; kumo (the
			// local stack's emulator) ranks them alike and picks either. A catch-all is resolved
			// against the table as API Gateway would have.
			if r, params, ok := app.Match(method, path); ok && r.Method != "ANY" && !r.Default() {
				if h, ok := handlers[r.Key()]; ok {
					req.RouteKey, req.PathParameters = r.Key(), params
					return h(ctx, req)
				}
			}
		}
		if allow := app.Methods(path); len(allow) > 0 && !slices.Contains(allow, method) {
			list := strings.Join(allow, ", ")
			resp := Error(http.StatusMethodNotAllowed, "method_not_allowed", method+" is not served here; use "+list, "")
			resp.Headers["Allow"] = list
			return resp, nil
		}
		return Error(http.StatusNotFound, "no_route", "no such route: "+method+" "+path, ""), nil
	}
}

// WithCaller serves h with the request's verified caller (Identify), or answers 403
// no_identity.
func WithCaller(devHeader string, h func(context.Context, events.APIGatewayV2HTTPRequest, Caller) (events.APIGatewayV2HTTPResponse, error)) Handler {
	return func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		who, err := Identify(req, devHeader)
		if err != nil {
			return Error(http.StatusForbidden, "no_identity", "the request carries no caller identity; sign it with SigV4", ""), nil
		}
		return h(ctx, req, who)
	}
}

// idemKeyChars is the class of an Idempotency-Key (8–255 of them).
var idemKeyChars = charclass.Of("A-Za-z0-9_.:-")

// Submission reads what every submit route needs: the Idempotency-Key and the JSON body. what
// names the thing submitted in the refusals ("media buy", "campaign"); a refusal is the
// response to send.
func Submission(req events.APIGatewayV2HTTPRequest, what string) (string, []byte, *events.APIGatewayV2HTTPResponse) {
	key := Header(req, "Idempotency-Key")
	if !idemKeyChars.Span(key, 8, 255) {
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

// limit reads a listing's limit query parameter (default 25, at most 100); a refusal is the
// response to send.
func limit(req events.APIGatewayV2HTTPRequest) (int, *events.APIGatewayV2HTTPResponse) {
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

// CodeConcurrentWrite is the code of the 409 that answers a write the ledger could not make
// because other writes kept touching the same record at the same moment.
const CodeConcurrentWrite = "concurrent_write"

// Unexpected answers an error that is not a refusal: logged with the request id, never its
// text in the body. A write that kept losing races in the ledger (record.ErrContention: it
// applied nothing, and the ledger already sent it again) is a 409 the caller may retry at
// once; anything else a 500. Both say that a retry with the same key is safe.
func Unexpected(log *slog.Logger, requestID string, err error) events.APIGatewayV2HTTPResponse {
	if errors.Is(err, record.ErrContention) {
		log.Warn("request lost a write race", "requestId", requestID, "err", err)
		resp := Error(http.StatusConflict, CodeConcurrentWrite, "other requests were writing the same records at the same moment and this one was not applied; send it again with the same Idempotency-Key (request "+requestID+")", "")
		resp.Headers["Retry-After"] = "1"
		return resp
	}
	log.Error("request failed", "requestId", requestID, "err", err)
	return Error(500, "internal", "buyflow could not complete the request; it is safe to retry with the same Idempotency-Key (request "+requestID+")", "")
}
