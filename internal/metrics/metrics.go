// Package metrics writes CloudWatch metrics in the embedded metric format (EMF): one JSON line
// per dimension set on the function's stdout, which CloudWatch Logs turns into metrics without
// an API call (no PutMetricData, no extra IAM, no latency on the request path).
//
// A Recorder collects counts and durations during one invocation and writes them with Flush.
// Each line has the shape the EMF specification requires:
//
//	{"_aws":{"Timestamp":1700000000000,"CloudWatchMetrics":[{"Namespace":"Buyflow",
//	  "Dimensions":[["Kind"]],"Metrics":[{"Name":"ReconcileFindings","Unit":"Count"}]}]},
//	 "Kind":"orphan","ReconcileFindings":2}
//
// Counts with the same name and dimensions are summed; durations are kept as a value array
// (at most MaxValues per line, so percentiles stay exact). Dimension values are the only
// free text on a line: never put an identifier of unbounded cardinality (operation id, task
// id) in a dimension, and never a secret anywhere.
package metrics

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// Namespace is buyflow's CloudWatch namespace.
const Namespace = "Buyflow"

// Metric names. Dimensions are noted per name; alarms and the dashboard (infra/) read them.
const (
	// PendingOperations counts operations in a pending status, by Stage (the status); the
	// reconcile function emits it on every sweep.
	PendingOperations = "PendingOperations"
	// ApprovalLatency is the time from the approval request to the decision, by Outcome.
	ApprovalLatency = "ApprovalLatency"
	// ApprovalDecided counts the decisions a person made, by Outcome (approved or rejected); the
	// rejection rate is ApprovalDecided{Outcome=rejected} over the sum of both outcomes (or
	// ApprovalRejected over that sum). Expiries are Timeouts with Kind=approval, not decisions.
	ApprovalDecided = "ApprovalDecided"
	// ApprovalRejected counts rejected approvals (rejection rate = this / approval decisions).
	ApprovalRejected = "ApprovalRejected"
	// GovernanceDenied counts governance denials.
	GovernanceDenied = "GovernanceDenied"
	// SellerTaskDuration is the time from the seller's task creation to its terminal status, by
	// Status.
	SellerTaskDuration = "SellerTaskDuration"
	// Timeouts counts operations that passed their deadline or an SLA, by Kind.
	Timeouts = "Timeouts"
	// AdcpErrors counts failed AdCP calls, by Code (the AdCP error code, or the error kind).
	AdcpErrors = "AdcpErrors"
	// WebhookSignatureFailures counts webhooks refused with 401.
	WebhookSignatureFailures = "WebhookSignatureFailures"
	// WebhookRejected counts webhooks refused with a 4xx (signature, payload, token, task or
	// operation mismatch), by Code, by Seller when the operation is known, and with no
	// dimension.
	WebhookRejected = "WebhookRejected"
	// WebhookAccepted counts authenticated webhooks answered 2xx (duplicates included), by
	// Seller: next to WebhookRejected by Seller it shows a seller whose webhooks are all refused.
	WebhookAccepted = "WebhookAccepted"
	// WebhookSecretInvalid counts webhooks answered 503 webhook_secret_invalid: the seller's
	// HMAC or bearer secret in Secrets Manager is one webhookauth refuses, an operator's fix that
	// no retry by the seller makes. By Seller and with no dimension (the alarm's series).
	WebhookSecretInvalid = "WebhookSecretInvalid"
	// WebhookDuplicates counts webhook deliveries answered as duplicates.
	WebhookDuplicates = "WebhookDuplicates"
	// ReconcileFindings counts what a reconciliation sweep found, by Kind.
	ReconcileFindings = "ReconcileFindings"
	// LostSellerTasks counts operations failed because their seller no longer knows their
	// task (REFERENCE_NOT_FOUND past the grace), whichever path saw it (the poll stage or the
	// sweep), by Seller and with no dimension: each may have left an order at the seller that
	// a person must look for (reconcile RUNBOOK, "Lost task").
	LostSellerTasks = "LostSellerTasks"
	// handlerPanics counts panics recovered at a handler's boundary (a bug: the request got a
	// 500 or the task an error instead of the process ending), by Function.
	handlerPanics = "HandlerPanics"
	// AgentUnavailable counts AdCP calls not sent because the agent's circuit breaker is open
	// (internal/breaker), by Agent and with no dimension: an alarm per open breaker reads it.
	AgentUnavailable = "AgentUnavailable"
	// BreakerOpened counts the times an agent's circuit breaker opened, by Agent.
	BreakerOpened = "BreakerOpened"
	// SpendOverBudget counts delivery reads whose reported spend is above the buy's approved
	// budget (dimension Seller); an alarm pages on the first.
	SpendOverBudget = "SpendOverBudget"
)

// The Kind dimension of Timeouts.
const (
	// TimeoutApproval: an approval request expired without a decision.
	TimeoutApproval = "approval"
	// TimeoutGovernanceReview: an async governance review passed its deadline.
	TimeoutGovernanceReview = "governance_review"
	// TimeoutOperationDeadline: the sweep found an operation still pending after its deadline.
	TimeoutOperationDeadline = "operation_deadline"
)

// Units (the EMF / CloudWatch spellings).
const (
	UnitCount        = "Count"
	UnitMilliseconds = "Milliseconds"
)

// MaxValues bounds the values of one metric on one line (an EMF limit).
const MaxValues = 100

// maxDimensions bounds the dimensions of one dimension set (an EMF limit).
const maxDimensions = 30

// Dims are metric dimensions: name → value. Nil means none.
type Dims map[string]string

// Recorder collects metrics for one invocation. It is safe for concurrent use.
type Recorder struct {
	w         io.Writer
	namespace string
	now       func() time.Time

	mu     sync.Mutex
	groups map[string]*group
	order  []string
}

type group struct {
	dims    Dims
	names   []string
	units   map[string]string
	counts  map[string]float64
	samples map[string][]float64
}

// New returns a Recorder writing EMF lines to w (the function's stdout) in namespace
// (Namespace for buyflow), time-stamped with now (time.Now when nil).
func New(w io.Writer, namespace string, now func() time.Time) *Recorder {
	if now == nil {
		now = time.Now
	}
	return &Recorder{w: w, namespace: namespace, now: now, groups: map[string]*group{}}
}

// Count adds n to the counter name with dims.
func (r *Recorder) Count(name string, dims Dims, n int) {
	r.record(name, dims, UnitCount, func(g *group) { g.counts[name] += float64(n) })
}

// Duration records one duration sample of name with dims, in milliseconds.
func (r *Recorder) Duration(name string, dims Dims, d time.Duration) {
	r.record(name, dims, UnitMilliseconds, func(g *group) {
		g.samples[name] = append(g.samples[name], float64(d.Microseconds())/1000)
	})
}

// record declares the metric name of unit in the group of dims and lets add add its value,
// under the lock; a nil Recorder records nothing.
func (r *Recorder) record(name string, dims Dims, unit string, add func(g *group)) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.group(dims)
	g.add(name, unit)
	add(g)
}

// Flush writes every collected metric, one line per dimension set (more when a duration has
// more than MaxValues samples), and starts over. Call it once per invocation, also on error
// paths. A write error is returned after trying every line.
func (r *Recorder) Flush() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	groups, order := r.groups, r.order
	r.groups, r.order = map[string]*group{}, nil
	r.mu.Unlock()

	ts := r.now().UnixMilli()
	var firstErr error
	for _, k := range order {
		for _, line := range groups[k].lines(r.namespace, ts) {
			b, err := json.Marshal(line)
			if err == nil {
				_, err = r.w.Write(append(b, '\n'))
			}
			if err != nil && firstErr == nil {
				firstErr = fmt.Errorf("metrics: write EMF line: %w", err)
			}
		}
	}
	return firstErr
}

func (r *Recorder) group(dims Dims) *group {
	names := make([]string, 0, len(dims))
	for k := range dims {
		names = append(names, k)
	}
	slices.Sort(names)
	if len(names) > maxDimensions {
		names = names[:maxDimensions]
	}
	var sb strings.Builder
	for _, k := range names {
		fmt.Fprintf(&sb, "%q=%q;", k, dims[k])
	}
	key := sb.String()
	g, ok := r.groups[key]
	if !ok {
		d := make(Dims, len(names))
		for _, k := range names {
			d[k] = dims[k]
		}
		g = &group{dims: d, units: map[string]string{}, counts: map[string]float64{}, samples: map[string][]float64{}}
		r.groups[key] = g
		r.order = append(r.order, key)
	}
	return g
}

func (g *group) add(name, unit string) {
	if _, ok := g.units[name]; !ok {
		g.names = append(g.names, name)
		g.units[name] = unit
	}
}

// directive is one entry of _aws.CloudWatchMetrics.
type directive struct {
	Namespace  string       `json:"Namespace"`
	Dimensions [][]string   `json:"Dimensions"`
	Metrics    []metricDecl `json:"Metrics"`
}

type metricDecl struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

// lines renders the group as EMF root objects; a duration with more samples than MaxValues
// spills onto further lines.
func (g *group) lines(namespace string, ts int64) []map[string]any {
	dimNames := make([]string, 0, len(g.dims))
	for k := range g.dims {
		dimNames = append(dimNames, k)
	}
	slices.Sort(dimNames)
	var out []map[string]any
	for chunk := 0; ; chunk++ {
		root := map[string]any{}
		var decls []metricDecl
		for _, name := range g.names {
			var v any
			if g.units[name] == UnitCount {
				if chunk > 0 {
					continue
				}
				v = g.counts[name]
			} else {
				s := g.samples[name]
				lo := chunk * MaxValues
				if lo >= len(s) {
					continue
				}
				vals := s[lo:min(lo+MaxValues, len(s))]
				if len(vals) == 1 {
					v = vals[0]
				} else {
					v = vals
				}
			}
			root[name] = v
			decls = append(decls, metricDecl{Name: name, Unit: g.units[name]})
		}
		if len(decls) == 0 {
			return out
		}
		for k, v := range g.dims {
			root[k] = v
		}
		root["_aws"] = map[string]any{
			"Timestamp": ts,
			"CloudWatchMetrics": []directive{{
				Namespace: namespace, Dimensions: [][]string{dimNames}, Metrics: decls,
			}},
		}
		out = append(out, root)
	}
}
