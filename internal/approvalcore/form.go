package approvalcore

import (
	"errors"
	"fmt"
	"mime"
	"net/url"
	"strings"
)

// MaxFormBytes is the largest decision form ParseDecisionForm accepts. A
// comment of MaxCommentRunes four-byte runes, percent-encoded, fits.
const MaxFormBytes = 16 << 10

// ErrBadForm means a posted decision form could not be read: wrong content
// type, too large, not form-encoded, or a field repeated.
var ErrBadForm = errors.New("approval form: bad request")

// ParseDecisionForm reads the confirm form's POST body. contentType is the
// request's Content-Type; it must be application/x-www-form-urlencoded (with
// charset utf-8 if a charset is given). body is the raw body: API Gateway
// may deliver it base64-encoded, and the caller decodes it first.
//
// It returns the decision and comment (ApprovalID and Approver are left for
// the caller to fill from the path and the verified claims) and every posted
// field, to pass to Signer.Verify. Errors wrap ErrBadForm. The decision value
// itself is checked by Decide, so a late click still learns the truth.
func ParseDecisionForm(body []byte, contentType string) (DecisionRequest, url.Values, error) {
	if len(body) > MaxFormBytes {
		return DecisionRequest{}, nil, fmt.Errorf("%w: body over %d bytes", ErrBadForm, MaxFormBytes)
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return DecisionRequest{}, nil, fmt.Errorf("%w: content type must be application/x-www-form-urlencoded", ErrBadForm)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return DecisionRequest{}, nil, fmt.Errorf("%w: charset must be utf-8", ErrBadForm)
	}
	vals, err := url.ParseQuery(string(body))
	if err != nil {
		return DecisionRequest{}, nil, fmt.Errorf("%w: body is not form-encoded", ErrBadForm)
	}
	for _, name := range []string{"decision", "comment"} {
		if len(vals[name]) > 1 {
			return DecisionRequest{}, nil, fmt.Errorf("%w: %s appears more than once", ErrBadForm, name)
		}
	}
	return DecisionRequest{
		Decision: Decision(vals.Get("decision")),
		Comment:  vals.Get("comment"),
	}, vals, nil
}
