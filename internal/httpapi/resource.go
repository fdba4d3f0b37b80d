package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/api"
)

// refusal is an error a request is answered with as a 4xx problem (buy.RequestError is one):
// its status and the problem's code, message and field.
type refusal interface {
	error
	Problem() (int, api.ProblemDetail)
}

// Query is what a listing reads from its request: the limit (Limit's, already checked), the
// cursor and the other query parameters (filters).
type Query struct {
	Limit  int
	Cursor string
	Params map[string]string
}

// Resource is a collection the caller submits to, lists, reads and follows (media buys,
// campaigns): POST and GET Path, GET Path/{id} and GET Path/{id}/events, each with the caller's
// verified identity. S is the answer of a submit (a 202 with a Location), L a page of the
// list, V one item, E its timeline.
type Resource[S, L, V, E any] struct {
	// Path is the collection's path ("/v1/media-buys"); Noun names one item in the refusals
	// ("media buy": "no media buy with that id").
	Path, Noun string
	// ID reports whether an id may exist: any other is answered 404 without a read.
	ID func(id string) bool
	// NotFound is the use cases' error for an id the caller's tenant does not have (404).
	NotFound error
	// Location is the path of what a submit accepted (the 202's Location header).
	Location func(S) string
	Submit   func(ctx context.Context, who Caller, key string, body []byte) (S, error)
	List     func(ctx context.Context, tenant string, q Query) (L, error)
	Get      func(ctx context.Context, tenant, id string) (V, error)
	Events   func(ctx context.Context, tenant, id string, q Query) (E, error)
	// PagedEvents reads the events route's limit (refusing one out of range) and cursor;
	// without it the timeline is one page and the query is not read.
	PagedEvents bool
}

// Routes are r's routes by API Gateway route key (serve them with ByRouteKey). devHeader is
// the dev-only tenant header (see Identify). A refusal (Refusal) is its 4xx, r.NotFound a 404
// not_found, anything else Unexpected's answer.
func (r Resource[S, L, V, E]) Routes(devHeader string, log *slog.Logger) map[string]Handler {
	s := resource[S, L, V, E]{Resource: r, log: log}
	return map[string]Handler{
		"POST " + r.Path:                 WithCaller(devHeader, s.submit),
		"GET " + r.Path:                  WithCaller(devHeader, s.list),
		"GET " + r.Path + "/{id}":        WithCaller(devHeader, s.get),
		"GET " + r.Path + "/{id}/events": WithCaller(devHeader, s.events),
	}
}

// resource is a Resource serving requests, with its logger.
type resource[S, L, V, E any] struct {
	Resource[S, L, V, E]
	log *slog.Logger
}

func (r resource[S, L, V, E]) submit(ctx context.Context, req events.APIGatewayV2HTTPRequest, who Caller) (events.APIGatewayV2HTTPResponse, error) {
	key, body, refused := Submission(req, r.Noun)
	if refused != nil {
		return *refused, nil
	}
	out, err := r.Submit(ctx, who, key, body)
	if err != nil {
		return r.fromError(req, err), nil
	}
	resp := JSON(http.StatusAccepted, out)
	resp.Headers["Location"] = r.Location(out)
	return resp, nil
}

func (r resource[S, L, V, E]) list(ctx context.Context, req events.APIGatewayV2HTTPRequest, who Caller) (events.APIGatewayV2HTTPResponse, error) {
	q, refused := query(req)
	if refused != nil {
		return *refused, nil
	}
	page, err := r.List(ctx, who.Tenant, q)
	if err != nil {
		return r.fromError(req, err), nil
	}
	return JSON(http.StatusOK, page), nil
}

func (r resource[S, L, V, E]) get(ctx context.Context, req events.APIGatewayV2HTTPRequest, who Caller) (events.APIGatewayV2HTTPResponse, error) {
	return r.read(req, false, func(id string, _ Query) (any, error) { return r.Get(ctx, who.Tenant, id) })
}

func (r resource[S, L, V, E]) events(ctx context.Context, req events.APIGatewayV2HTTPRequest, who Caller) (events.APIGatewayV2HTTPResponse, error) {
	return r.read(req, r.PagedEvents, func(id string, q Query) (any, error) { return r.Events(ctx, who.Tenant, id, q) })
}

// read answers a read of one item (itself or its timeline): an id that cannot exist is 404
// unread; paged reads the query (a limit out of range is refused) before read is called.
func (r resource[S, L, V, E]) read(req events.APIGatewayV2HTTPRequest, paged bool, read func(id string, q Query) (any, error)) (events.APIGatewayV2HTTPResponse, error) {
	id := req.PathParameters["id"]
	if !r.ID(id) {
		return r.notFound(), nil
	}
	var q Query
	if paged {
		var refused *events.APIGatewayV2HTTPResponse
		if q, refused = query(req); refused != nil {
			return *refused, nil
		}
	}
	v, err := read(id, q)
	if err != nil {
		return r.fromError(req, err), nil
	}
	return JSON(http.StatusOK, v), nil
}

// query reads a listing's query: its limit (a refusal is the response to send), cursor and
// parameters.
func query(req events.APIGatewayV2HTTPRequest) (Query, *events.APIGatewayV2HTTPResponse) {
	limit, refused := limit(req)
	if refused != nil {
		return Query{}, refused
	}
	return Query{Limit: limit, Cursor: req.QueryStringParameters["cursor"], Params: req.QueryStringParameters}, nil
}

func (r resource[S, L, V, E]) notFound() events.APIGatewayV2HTTPResponse {
	return Error(http.StatusNotFound, "not_found", "no "+r.Noun+" with that id", "")
}

// fromError maps the use cases' errors to responses: a refusal is its 4xx, an unknown id 404,
// anything else is logged (with the request id, never the error's text in the body) and
// answered by Unexpected.
func (r resource[S, L, V, E]) fromError(req events.APIGatewayV2HTTPRequest, err error) events.APIGatewayV2HTTPResponse {
	var refusal refusal
	switch {
	case errors.As(err, &refusal):
		status, p := refusal.Problem()
		return Error(status, p.Code, p.Message, p.Field)
	case errors.Is(err, r.NotFound):
		return r.notFound()
	}
	return Unexpected(r.log, req.RequestContext.RequestID, err)
}
