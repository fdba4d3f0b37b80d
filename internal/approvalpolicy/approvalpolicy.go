// Package approvalpolicy is the approval policy: who approves a buy, above what amount, for
// how long, and which IAM principal is which approver. It is pure: Parse reads the policy
// document (BUYFLOW_APPROVAL_POLICY, the buyflow:approvalPolicy context value) and reports every
// problem together; the policy's methods compare amounts and map principals without I/O.
//
// It imports only the standard library, internal/money, internal/iamarn and internal/charclass, so internal/config (which parses the
// policy once per cold start for the functions that read it) and infra (which validates the
// context value at synth) link no approval kernel, ledger or AWS SDK to parse it.
package approvalpolicy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"

	"github.com/buyflow/buyflow/internal/charclass"
	"github.com/buyflow/buyflow/internal/iamarn"
	"github.com/buyflow/buyflow/internal/money"
)

// onTimeout says what happens when an approval's SLA passes with no decision.
type onTimeout string

// The timeout behaviours.
const (
	// TimeoutEscalate sends the approval once to the escalation approvers, then rejects.
	TimeoutEscalate onTimeout = "escalate"
	// timeoutReject fails the buy as expired at once.
	timeoutReject onTimeout = "reject"
)

// Policy is the approval policy, parsed from BUYFLOW_APPROVAL_POLICY. It is immutable after
// Parse.
type Policy struct {
	// Threshold is the budget at or above which a buy needs a person ("10000.00"); empty means
	// the amount never requires approval by itself.
	Threshold string
	// Currency is the ISO 4217 code of Threshold and of the change thresholds.
	Currency string
	// ChangeIncreaseThreshold is the largest budget increase a change to a placed buy makes
	// without a person (Threshold when not configured); ChangeAnyThreshold, when set, is the
	// budget from which every change to a buy needs a person.
	ChangeIncreaseThreshold string
	ChangeAnyThreshold      string
	// Approvers decide first; EscalationApprovers decide after one timeout when OnTimeout is
	// TimeoutEscalate.
	Approvers           []string
	EscalationApprovers []string
	OnTimeout           onTimeout
	// EscalationTimeoutSeconds, when positive and shorter than the state's timeout, shortens
	// the escalated approval's expiry in the ledger.
	EscalationTimeoutSeconds int
	// LinkTTLSeconds, when positive, caps how long a link stays valid (never past the
	// approval's own expiry).
	LinkTTLSeconds int
	// Identities maps the IAM principal an approver calls the API with (an IAM user ARN, or a
	// role ARN standing for every session of that role) to their approver id, so that the
	// IAM-authorized approver routes know who is asking. A session ARN is refused: whoever
	// assumes a role names the session.
	Identities map[string]string

	threshold *big.Rat
}

// isDecimal reports whether s is a non-negative decimal of 1–18 digits, then optionally '.' and
// 1–6 digits ("10000.00").
func isDecimal(s string) bool {
	whole, frac, hasFrac := strings.Cut(s, ".")
	return decimalDigits.Span(whole, 1, 18) && (!hasFrac || decimalDigits.Span(frac, 1, 6))
}

var decimalDigits = charclass.Of("0-9")

// Parse parses the policy JSON:
//
//	{"threshold":"10000.00","currency":"USD","approvers":["U01","U02"],
//	 "escalation_approvers":["U09"],"on_timeout":"escalate",
//	 "escalation_timeout_seconds":3600,"link_ttl_seconds":86400,
//	 "change_increase_threshold":"5000.00","change_any_threshold":"250000.00"}
//
// It reports every problem it finds together. on_timeout defaults to "reject".
func Parse(raw []byte) (Policy, error) {
	var in struct {
		Threshold                string            `json:"threshold"`
		Currency                 string            `json:"currency"`
		Approvers                []string          `json:"approvers"`
		EscalationApprovers      []string          `json:"escalation_approvers"`
		OnTimeout                string            `json:"on_timeout"`
		EscalationTimeoutSeconds int               `json:"escalation_timeout_seconds"`
		LinkTTLSeconds           int               `json:"link_ttl_seconds"`
		Identities               map[string]string `json:"identities"`
		ChangeIncreaseThreshold  string            `json:"change_increase_threshold"`
		ChangeAnyThreshold       string            `json:"change_any_threshold"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return Policy{}, fmt.Errorf("approvalpolicy: not a JSON object with threshold, currency, approvers, escalation_approvers, on_timeout, escalation_timeout_seconds, link_ttl_seconds, identities, change_increase_threshold, change_any_threshold: %w", err)
	}
	if dec.More() {
		return Policy{}, errors.New("approvalpolicy: trailing data after the JSON object")
	}
	p := Policy{
		Threshold: strings.TrimSpace(in.Threshold), Currency: strings.ToUpper(strings.TrimSpace(in.Currency)),
		Approvers: in.Approvers, EscalationApprovers: in.EscalationApprovers, OnTimeout: onTimeout(in.OnTimeout),
		EscalationTimeoutSeconds: in.EscalationTimeoutSeconds, LinkTTLSeconds: in.LinkTTLSeconds,
		Identities:              in.Identities,
		ChangeIncreaseThreshold: strings.TrimSpace(in.ChangeIncreaseThreshold), ChangeAnyThreshold: strings.TrimSpace(in.ChangeAnyThreshold),
	}
	if p.ChangeIncreaseThreshold == "" {
		p.ChangeIncreaseThreshold = p.Threshold
	}
	if p.OnTimeout == "" {
		p.OnTimeout = timeoutReject
	}
	var errs []error
	if p.Threshold != "" {
		if !isDecimal(p.Threshold) {
			errs = append(errs, fmt.Errorf("threshold %q must be a non-negative decimal string such as \"10000.00\"", p.Threshold))
		} else {
			p.threshold, _ = new(big.Rat).SetString(p.Threshold) // isDecimal guarantees it parses
		}
		if _, ok := money.MinorUnits(p.Currency); !ok {
			errs = append(errs, fmt.Errorf("currency %q must be an ISO 4217 code such as USD", in.Currency))
		}
	}
	for _, f := range [][2]string{{"change_increase_threshold", p.ChangeIncreaseThreshold}, {"change_any_threshold", p.ChangeAnyThreshold}} {
		name, v := f[0], f[1]
		if v == "" {
			continue
		}
		if v != p.Threshold && !isDecimal(v) {
			errs = append(errs, fmt.Errorf("%s %q must be a non-negative decimal string such as \"5000.00\"", name, v))
			continue
		}
		if _, ok := money.MinorUnits(p.Currency); !ok {
			if v != p.Threshold { // the threshold's own check already named the currency
				errs = append(errs, fmt.Errorf("%s needs currency, an ISO 4217 code such as USD", name))
			}
			continue
		}
		// A change's approval compares exact amounts in the currency's minor units (modify reads
		// the threshold with money.ParseDecimal), so a finer threshold is refused here, where an
		// operator sees it, not at the modify function's cold start. A change threshold taken
		// from threshold is checked too, and named so.
		if _, err := money.ParseDecimal(v, p.Currency); err != nil {
			from := ""
			if v == p.Threshold {
				from = " (taken from threshold)"
			}
			errs = append(errs, fmt.Errorf("%s %q%s has more decimals than %s has minor units", name, v, from, p.Currency))
		}
	}
	if len(p.Approvers) == 0 {
		errs = append(errs, errors.New("approvers must list at least one approver id"))
	}
	errs = append(errs, checkIDs("approvers", p.Approvers)...)
	errs = append(errs, checkIDs("escalation_approvers", p.EscalationApprovers)...)
	switch p.OnTimeout {
	case timeoutReject:
	case TimeoutEscalate:
		if len(p.EscalationApprovers) == 0 {
			errs = append(errs, errors.New(`on_timeout "escalate" needs escalation_approvers`))
		}
	default:
		errs = append(errs, fmt.Errorf(`on_timeout %q must be "escalate" or "reject"`, in.OnTimeout))
	}
	if p.EscalationTimeoutSeconds < 0 {
		errs = append(errs, errors.New("escalation_timeout_seconds must not be negative"))
	}
	if p.LinkTTLSeconds < 0 {
		errs = append(errs, errors.New("link_ttl_seconds must not be negative"))
	}
	for principal, id := range p.Identities {
		if !iamarn.IsUserOrRole(principal) && !iamarn.IsDevPrincipal(principal) {
			errs = append(errs, fmt.Errorf("identities: %q must be an IAM user or role ARN such as arn:aws:iam::111122223333:role/ApproverAlice (or a dev: principal on the local stack)", principal))
		}
		if !slices.Contains(p.Approvers, id) && !slices.Contains(p.EscalationApprovers, id) {
			errs = append(errs, fmt.Errorf("identities: %q maps to %q, which is neither an approver nor an escalation approver", principal, id))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Policy{}, fmt.Errorf("approvalpolicy: %w", err)
	}
	return p, nil
}

// ApproverFor returns the approver id of the IAM principal API Gateway verified for a request:
// the identity configured for that exact user ARN, or, for an assumed-role session, the one
// configured for the role (every session of the role is that approver, so each approver
// needs a role of their own).
func (p Policy) ApproverFor(principal string) (string, bool) {
	if id, ok := p.Identities[principal]; ok && principal != "" {
		return id, true
	}
	if role, ok := iamarn.RoleOfSession(principal); ok {
		id, ok := p.Identities[role]
		return id, ok
	}
	return "", false
}

func checkIDs(field string, ids []string) []error {
	var errs []error
	for i, id := range ids {
		if id == "" || len(id) > 256 || strings.ContainsAny(id, " \t\r\n#") {
			errs = append(errs, fmt.Errorf("%s[%d] must be a non-empty id without spaces or '#'", field, i))
		}
		if slices.Index(ids, id) != i {
			errs = append(errs, fmt.Errorf("%s[%d] repeats %q", field, i, id))
		}
	}
	return errs
}

// Needs reports whether a buy's budget alone requires a human approval (budget ≥ threshold)
// and why, in a sentence a person can read. budget is the buy's total as the request states it,
// a decimal string ("12500.00"), in the ISO 4217 currency. A budget it cannot compare (missing,
// malformed or in another currency than the threshold) needs approval: the gate fails closed.
// A policy without a threshold never requires approval by amount.
func (p Policy) Needs(budget, currency string) (bool, string) {
	return p.needs("the budget", budget, currency)
}

// NeedsCampaign reports whether a campaign's total (the sum of the amounts of the legs it
// would buy) requires the campaign's one approval, exactly as a single buy of that amount
// would: legs each under the threshold do not add up to a way around it. It fails closed as
// Needs does: a total in another currency than the threshold needs a person.
func (p Policy) NeedsCampaign(total money.Amount) (bool, string) {
	return p.needs("the campaign's total", total.Decimal(), total.Currency)
}

// needs compares amount (a decimal string in currency) with the threshold; what names the
// amount in the sentence.
func (p Policy) needs(what, amount, currency string) (bool, string) {
	if p.threshold == nil {
		return false, ""
	}
	amount = strings.TrimSpace(amount)
	cur := strings.ToUpper(strings.TrimSpace(currency))
	if !isDecimal(amount) {
		return true, fmt.Sprintf("%s %q cannot be compared with the approval threshold %s %s", what, amount, p.Threshold, p.Currency)
	}
	if cur != p.Currency {
		return true, fmt.Sprintf("%s is in %s but the approval threshold is in %s", what, cur, p.Currency)
	}
	b, _ := new(big.Rat).SetString(amount) // isDecimal guarantees it parses
	if b.Cmp(p.threshold) >= 0 {
		return true, fmt.Sprintf("%s %s %s is at or over the approval threshold %s %s", what, amount, cur, p.Threshold, p.Currency)
	}
	return false, ""
}
