package modify

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/buyflow/buyflow/internal/buy"
)

// Kind names what a change does to a buy; it also names the change's workflow run.
type Kind string

// The kinds of change.
const (
	KindBudget  Kind = "budget"
	KindEndTime Kind = "end_time"
	KindPause   Kind = "pause"
	KindResume  Kind = "resume"
	KindCancel  Kind = "cancel"
)

// MaxBodyBytes bounds a change request's body.
const MaxBodyBytes = 64 << 10

// MaxReasonChars bounds a reason: update_media_buy's cancellation_reason allows 500.
const MaxReasonChars = 500

// maxPackages bounds the package budgets one change may set.
const maxPackages = 100

// Change is one change a buyer asked for, parsed and checked for shape. Amounts stay JSON
// number literals until Plan reads them in the buy's currency.
type Change struct {
	Kind Kind `json:"kind"`
	// Total is the buy's new total budget (KindBudget, one-package buys).
	Total json.Number `json:"total,omitempty"`
	// Packages are the new package budgets (KindBudget).
	Packages []packageBudget `json:"packages,omitempty"`
	// EndTime is the new end of the flight (KindEndTime), RFC 3339.
	EndTime string `json:"end_time,omitempty"`
	// Reason is why the buyer changes the buy: required for a cancellation, optional otherwise.
	Reason string `json:"reason,omitempty"`
	// Context is the buyer's own correlation data, echoed to the seller in update_media_buy's
	// context beside buyflow's operation and change ids.
	Context json.RawMessage `json:"context,omitempty"`
}

// maxContextBytes bounds the buyer's context.
const maxContextBytes = 4 << 10

// packageBudget is a new budget for one of the seller's packages.
type packageBudget struct {
	PackageID string      `json:"package_id"`
	Budget    json.Number `json:"budget"`
}

// patchBody is the body of PATCH /v1/media-buys/{id}: exactly one change.
type patchBody struct {
	Budget *struct {
		Total    json.Number     `json:"total"`
		Packages []packageBudget `json:"packages"`
	} `json:"budget"`
	EndTime *string         `json:"end_time"`
	Paused  *bool           `json:"paused"`
	Reason  *string         `json:"reason"`
	Context json.RawMessage `json:"context"`
}

// cancelBody is the body of POST /v1/media-buys/{id}/cancel.
type cancelBody struct {
	Reason  *string         `json:"reason"`
	Context json.RawMessage `json:"context"`
}

func badRequest(code, field, format string, args ...any) *buy.RequestError {
	return &buy.RequestError{Status: 400, Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

func unprocessable(code, field, format string, args ...any) *buy.RequestError {
	return &buy.RequestError{Status: 422, Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// ParsePatch reads the body of PATCH /v1/media-buys/{id}. It carries exactly one of budget
// ({"total": n} or {"packages": [{"package_id", "budget"}]}), end_time or paused, and an
// optional reason. Anything else (unknown fields, two changes at once, a second JSON value)
// is refused with a *buy.RequestError.
func ParsePatch(body []byte) (Change, error) {
	var b patchBody
	if err := decodeStrict(body, &b); err != nil {
		return Change{}, err
	}
	var c Change
	var err error
	n := 0
	if b.Budget != nil {
		n++
		c.Kind = KindBudget
		switch {
		case b.Budget.Total != "" && b.Budget.Packages != nil:
			return Change{}, unprocessable("ambiguous_budget", "/budget", "send either budget.total or budget.packages, not both")
		case b.Budget.Total != "":
			c.Total = b.Budget.Total
		case len(b.Budget.Packages) > 0:
			if len(b.Budget.Packages) > maxPackages {
				return Change{}, unprocessable("too_many_packages", "/budget/packages", "at most %d package budgets per change", maxPackages)
			}
			seen := map[string]bool{}
			for i, p := range b.Budget.Packages {
				field := fmt.Sprintf("/budget/packages/%d", i)
				if strings.TrimSpace(p.PackageID) == "" || len(p.PackageID) > 255 {
					return Change{}, unprocessable("invalid_package_id", field+"/package_id", "package_id must name one of the seller's packages (1 to 255 characters)")
				}
				if seen[p.PackageID] {
					return Change{}, unprocessable("duplicate_package", field+"/package_id", "package %q appears twice", p.PackageID)
				}
				seen[p.PackageID] = true
				if p.Budget == "" {
					return Change{}, unprocessable("invalid_budget", field+"/budget", "budget is required: a JSON number")
				}
			}
			c.Packages = b.Budget.Packages
		default:
			return Change{}, unprocessable("empty_budget", "/budget", "budget needs total or a non-empty packages list")
		}
	}
	if b.EndTime != nil {
		n++
		c.Kind = KindEndTime
		t, err := time.Parse(time.RFC3339, *b.EndTime)
		if err != nil {
			return Change{}, unprocessable("invalid_end_time", "/end_time", "end_time must be an RFC 3339 date-time such as 2027-01-31T23:59:59Z")
		}
		c.EndTime = t.UTC().Format(time.RFC3339)
	}
	if b.Paused != nil {
		n++
		c.Kind = KindResume
		if *b.Paused {
			c.Kind = KindPause
		}
	}
	switch n {
	case 0:
		return Change{}, unprocessable("no_change", "", "the request changes nothing: send one of budget, end_time or paused")
	case 1:
	default:
		return Change{}, unprocessable("several_changes", "", "send one change per request (budget, end_time or paused): each is its own governance check and workflow run")
	}
	if b.Reason != nil {
		if c.Reason, err = reason(*b.Reason, "/reason"); err != nil {
			return Change{}, err
		}
	}
	if c.Context, err = buyerContext(b.Context); err != nil {
		return Change{}, err
	}
	return c, nil
}

// ParseCancel reads the body of POST /v1/media-buys/{id}/cancel: {"reason": "..."}, required.
func ParseCancel(body []byte) (Change, error) {
	var b cancelBody
	if err := decodeStrict(body, &b); err != nil {
		return Change{}, err
	}
	if b.Reason == nil {
		return Change{}, unprocessable("reason_required", "/reason", "a cancellation needs a reason: the seller and governance both receive it")
	}
	r, err := reason(*b.Reason, "/reason")
	if err != nil {
		return Change{}, err
	}
	if r == "" {
		return Change{}, unprocessable("reason_required", "/reason", "a cancellation needs a reason: the seller and governance both receive it")
	}
	ctx, err := buyerContext(b.Context)
	if err != nil {
		return Change{}, err
	}
	return Change{Kind: KindCancel, Reason: r, Context: ctx}, nil
}

// buyerContext checks the buyer's context: a JSON object of at most MaxContextBytes whose keys
// do not take buyflow's own (operation_id, change_id).
func buyerContext(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if len(raw) > maxContextBytes {
		return nil, unprocessable("invalid_context", "/context", "context is over %d bytes", maxContextBytes)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, unprocessable("invalid_context", "/context", "context must be a JSON object")
	}
	for _, k := range []string{"operation_id", "change_id"} {
		if _, ok := m[k]; ok {
			return nil, unprocessable("invalid_context", "/context/"+k, "context.%s is buyflow's own key", k)
		}
	}
	var out bytes.Buffer
	if err := json.Compact(&out, raw); err != nil {
		return nil, unprocessable("invalid_context", "/context", "context must be a JSON object")
	}
	return out.Bytes(), nil
}

func reason(s, field string) (string, error) {
	s = strings.TrimSpace(s)
	if !utf8.ValidString(s) {
		return "", unprocessable("invalid_reason", field, "reason must be UTF-8 text")
	}
	if n := utf8.RuneCountInString(s); n > MaxReasonChars {
		return "", unprocessable("invalid_reason", field, "reason has %d characters; at most %d", n, MaxReasonChars)
	}
	return s, nil
}

// decodeStrict decodes one JSON object into v: no unknown fields, no trailing data, numbers
// kept as literals.
func decodeStrict(body []byte, v any) error {
	if len(body) > MaxBodyBytes {
		return &buy.RequestError{Status: 413, Code: "body_too_large", Message: fmt.Sprintf("the body is over %d bytes", MaxBodyBytes)}
	}
	if !utf8.Valid(body) {
		return badRequest("invalid_json", "", "the body is not UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &typ):
			return badRequest("invalid_type", "/"+strings.ReplaceAll(typ.Field, ".", "/"), "%s must be a JSON %s", typ.Field, typ.Type.Kind())
		case errors.As(err, &syn), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return badRequest("invalid_json", "", "the body is not a JSON object")
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return badRequest("unknown_field", "/"+name, "unknown field %q", name)
		}
		return badRequest("invalid_json", "", "the body is not a valid request: %v", err)
	}
	if dec.More() {
		return badRequest("invalid_json", "", "the body holds more than one JSON value")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("invalid_json", "", "the body holds more than one JSON value")
	}
	return nil
}
