// Package smoke (internal/smoke) runs one media buy through every stage of a buyflow
// deployment, at the sandbox's simulated agents, and reports each stage with its time by the
// ledger's clock; when a stage is not reached it names the stage, the function that runs it,
// the call it makes and, for an AWS refusal, the permission that is missing. `buyflow smoke`
// prints it; the local stack and a deployed stack with the sandbox (infra's buyflow:sandbox)
// run the same buy.
package smoke

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/statusevent"
	"github.com/buyflow/buyflow/internal/topology"
)

// The sandbox agents' registry ids, as infra registers them with buyflow:sandbox.
const (
	SandboxSellerID     = topology.SandboxSellerAgent
	SandboxGovernanceID = topology.SandboxGovernanceAgent
)

// Events reads the status events the bus delivered for one operation (the local stack's sink,
// or a deployed sandbox's rule target).
type Events interface {
	Of(ctx context.Context, operationID string) ([]statusevent.Event, error)
}

// Options is one smoke run.
type Options struct {
	Client *apiclient.Client
	// SellerID and GovernanceID name the agents the buy goes to (default the sandbox's).
	SellerID, GovernanceID string
	// Sim asks the simulated agents for a scripted outcome (context.sim), e.g. "rejected" to
	// see how a failure is diagnosed; "" for the plain path.
	Sim string
	// Events reads the status events; nil reports that stage as not checked.
	Events Events
	// Timeout bounds the whole buy (default 3 minutes); Interval is the poll period (default
	// 500 ms).
	Timeout, Interval time.Duration
	// Now is the clock of the PO number (default time.Now).
	Now func() time.Time
}

// Stage is one stage of the buy as the smoke saw it.
type Stage struct {
	Name string
	// At is when the stage happened, since the buy was created (ledger clock).
	At time.Duration
	// Note says what happened ("verdict approved", "task task_1", "skipped").
	Note string
}

// Diagnosis says why the buy did not go through every stage.
type Diagnosis struct {
	// Stage is the first stage not reached; Function runs it and Call is what it calls.
	Stage, Function, Call string
	// Status is the buy's last status and Reason what the ledger says about it.
	Status, Reason string
	// Permission and Resource are what AWS refused (AccessDenied), when the reason says so.
	Permission, Resource string
	// Hint is where to look next.
	Hint string
}

// Report is a smoke run's result: the stages reached, in order, and the diagnosis when one
// was not.
type Report struct {
	OperationID string
	Stages      []Stage
	Failure     *Diagnosis
}

// stage is one expected stage: its name, who runs it and what it calls, and how the timeline
// shows it.
type stage struct {
	name, function, call, hint string
	// seen finds the stage in the timeline: its event and a note.
	seen func(evs []api.Event) (api.Event, string, bool)
}

// stages are the stages of a buy at the sandbox agents, in order. The status event is checked
// apart (it is not in the ledger's timeline).
var stages = []stage{
	{name: "governance checked", function: "governance", call: "check_governance at the governance agent",
		hint: "the governance function's log; the agent's URL and credential secret in the registry (buyflow agents show)",
		seen: func(evs []api.Event) (api.Event, string, bool) {
			return find(evs, func(e api.Event) bool { return e.Type == record.EventGovernanceCheck && detail(e, "decision") != "" },
				func(e api.Event) string {
					return "verdict " + detail(e, "verdict") + ", decision " + detail(e, "decision")
				})
		}},
	{name: "approval", function: "notify", call: "the approval policy (no call when the amount is under its threshold)",
		hint: "a person must approve from Slack; the smoke's buy is small to stay under the policy's threshold",
		seen: func(evs []api.Event) (api.Event, string, bool) {
			if e, _, ok := find(evs, func(e api.Event) bool { return e.Type == record.EventApprovalRequested }, nil); ok {
				return e, "needed: a person was asked", true
			}
			e, _, ok := find(evs, func(e api.Event) bool { return e.To == "creating" }, nil)
			return e, "skipped (under the approval threshold)", ok
		}},
	{name: "create sent", function: "create", call: "create_media_buy at the seller",
		hint: "the create function's log; the seller agent's URL and credential secret",
		seen: func(evs []api.Event) (api.Event, string, bool) {
			return find(evs, func(e api.Event) bool { return e.Type == record.EventSellerCall && detail(e, "error_code") == "" },
				func(e api.Event) string { return "answered " + detail(e, "status") })
		}},
	{name: "seller task submitted", function: "create", call: "create_media_buy at the seller (an asynchronous task)",
		hint: "the sandbox seller works asynchronously; a seller that answers at once never sends the webhook",
		seen: func(evs []api.Event) (api.Event, string, bool) {
			return find(evs, func(e api.Event) bool { return e.Type == record.EventSellerCall && e.To == "submitted" },
				func(e api.Event) string { return "task " + detail(e, "task_id") })
		}},
	{name: "webhook received", function: "webhook", call: "POST /v1/webhooks/adcp/{operation_id} from the seller, through API Gateway",
		hint: "the webhook function's log (a 401 is a signature the registry's JWKS does not verify); the seller needs the API's public URL",
		seen: func(evs []api.Event) (api.Event, string, bool) {
			return find(evs, func(e api.Event) bool { return e.Type == record.EventWebhook },
				func(e api.Event) string { return "signed, seller status " + detail(e, "seller_status") })
		}},
	{name: "completed", function: "webhook", call: "states:SendTaskSuccess to wake the workflow (or the poll function's get_task_status)",
		hint: "the webhook and poll functions' logs; the execution's history in the Step Functions console",
		seen: func(evs []api.Event) (api.Event, string, bool) {
			return find(evs, func(e api.Event) bool { return e.To == "completed" },
				func(e api.Event) string { return "by " + e.Type })
		}},
	{name: "outcome reported", function: "governance", call: "report_plan_outcome at the governance agent",
		hint: "the governance function's log",
		seen: func(evs []api.Event) (api.Event, string, bool) {
			return find(evs, func(e api.Event) bool { return e.Type == record.EventOutcomeReport },
				func(e api.Event) string { return detail(e, "outcome") + ", " + detail(e, "outcome_state") })
		}},
}

// statusEventStage is the last stage: the buy's status event on the bus.
var statusEventStage = stage{name: "status event seen", function: "publish", call: "events:PutEvents on the status event bus, from the ledger's stream",
	hint: "the publish function's log and the stream's failure queue; the bus's rules"}

func find(evs []api.Event, match func(api.Event) bool, note func(api.Event) string) (api.Event, string, bool) {
	for _, e := range evs {
		if match(e) {
			n := ""
			if note != nil {
				n = note(e)
			}
			return e, n, true
		}
	}
	return api.Event{}, "", false
}

// detail reads a string (or number) field of an event's detail.
func detail(e api.Event, key string) string {
	var m map[string]any
	if json.Unmarshal(e.Detail, &m) != nil {
		return ""
	}
	switch v := m[key].(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

// Body is the smoke's buy: one small package at the seller (under any sensible approval
// threshold), a PO number of its own, the simulation tokens in its context.
func Body(o Options) ([]byte, error) {
	now := o.now()
	start := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, 1, 0)
	ctx := map[string]any{"smoke": true}
	if o.Sim != "" {
		ctx["sim"] = o.Sim
	}
	req := map[string]any{
		"seller_id":  o.sellerID(),
		"governance": map[string]any{"agent_id": o.governanceID(), "plan_id": "buyflow-smoke"},
		"currency":   "USD",
		"media_buy": map[string]any{
			"account":    map[string]any{"account_id": "acct-buyflow-smoke"},
			"brand":      map[string]any{"domain": "smoke.example"},
			"po_number":  fmt.Sprintf("SMOKE-%d", now.UnixNano()),
			"start_time": start.Format(time.RFC3339),
			"end_time":   start.AddDate(0, 1, 0).Add(-time.Second).Format(time.RFC3339),
			"packages":   []any{map[string]any{"product_id": "ctv-premium-us", "pricing_option_id": "cpm-fixed-usd", "budget": 100}},
			"context":    ctx,
		},
	}
	return json.Marshal(req)
}

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now().UTC()
	}
	return time.Now().UTC()
}

func (o Options) sellerID() string { return orDefault(o.SellerID, SandboxSellerID) }

func (o Options) governanceID() string { return orDefault(o.GovernanceID, SandboxGovernanceID) }

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// Run submits the smoke's buy and follows it until every stage is seen, the buy ends without
// one, or the timeout passes; progress gets each stage as it is seen. The error is for a run
// that could not follow the buy at all (the API refused the submit, the network); a stage
// not reached is the report's Failure.
func Run(ctx context.Context, o Options, progress func(Stage)) (Report, error) {
	timeout, interval := o.Timeout, o.Interval
	if timeout <= 0 {
		timeout = 3 * time.Minute
	}
	if interval <= 0 {
		interval = 500 * time.Millisecond
	}
	body, err := Body(o)
	if err != nil {
		return Report{}, err
	}
	sub, _, err := o.Client.Submit(ctx, fmt.Sprintf("smoke-%d", o.now().UnixNano()), body)
	if err != nil {
		return Report{}, fmt.Errorf("submit the smoke buy: %w", err)
	}
	rep := Report{OperationID: sub.OperationID}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var op api.MediaBuy
	var evs []api.Event
	for {
		if op, err = o.Client.Get(ctx, sub.OperationID); err != nil {
			break
		}
		if evs, err = o.Client.Events(ctx, sub.OperationID); err != nil {
			break
		}
		rep.Stages = reached(evs, rep.Stages, progress)
		// A terminal buy's events are all in once its lock is released (the last thing the
		// workflow writes).
		if apiclient.Terminal(op.Status) && slices.ContainsFunc(evs, func(e api.Event) bool { return e.Type == record.EventLockReleased }) {
			break
		}
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-time.After(interval):
		}
		if err != nil {
			break
		}
	}
	if len(rep.Stages) < len(stages) {
		rep.Failure = diagnose(stages[len(rep.Stages)], op, evs, err)
		return rep, nil
	}
	if o.Events == nil {
		rep.Failure = &Diagnosis{Stage: statusEventStage.name, Function: statusEventStage.function, Call: statusEventStage.call,
			Status: op.Status, Reason: "not checked: no source of the bus's events was given", Hint: "pass --events"}
		return rep, nil
	}
	created := createdAt(evs)
	for {
		got, rerr := o.Events.Of(ctx, sub.OperationID)
		if rerr == nil {
			if i := slices.IndexFunc(got, func(ev statusevent.Event) bool { return ev.Detail.To == "completed" }); i >= 0 {
				s := Stage{Name: statusEventStage.name, At: got[i].Time.Sub(created),
					Note: fmt.Sprintf("%s %s → %s (%d events)", got[i].DetailType, got[i].Detail.From, got[i].Detail.To, len(got))}
				rep.Stages = append(rep.Stages, s)
				if progress != nil {
					progress(s)
				}
				return rep, nil
			}
		}
		select {
		case <-ctx.Done():
			why := "no event into completed arrived in time"
			if rerr != nil {
				why = "the events could not be read: " + rerr.Error()
			}
			rep.Failure = &Diagnosis{Stage: statusEventStage.name, Function: statusEventStage.function, Call: statusEventStage.call,
				Status: op.Status, Reason: why, Hint: statusEventStage.hint}
			return rep, nil
		case <-time.After(interval):
		}
	}
}

// reached adds the stages newly seen in evs, in order (a stage is reached only after the ones
// before it), and tells progress of each.
func reached(evs []api.Event, have []Stage, progress func(Stage)) []Stage {
	created := createdAt(evs)
	for len(have) < len(stages) {
		e, note, ok := stages[len(have)].seen(evs)
		if !ok {
			break
		}
		at, _ := time.Parse(time.RFC3339Nano, e.At)
		s := Stage{Name: stages[len(have)].name, At: at.Sub(created), Note: note}
		have = append(have, s)
		if progress != nil {
			progress(s)
		}
	}
	return have
}

func createdAt(evs []api.Event) time.Time {
	for _, e := range evs {
		if e.Type == record.EventCreated {
			t, _ := time.Parse(time.RFC3339Nano, e.At)
			return t
		}
	}
	return time.Time{}
}

// diagnose explains the stage s not reached: the buy's status and reason, the failing call's
// own words and, for an AWS refusal, the permission.
func diagnose(s stage, op api.MediaBuy, evs []api.Event, err error) *Diagnosis {
	d := &Diagnosis{Stage: s.name, Function: s.function, Call: s.call, Status: op.Status, Reason: op.Reason, Hint: s.hint}
	// The call's own event says more than the buy's reason (which the failure stage wrote).
	for _, e := range evs {
		if e.Reason != "" && e.Type != record.EventFailure && !strings.HasPrefix(e.Type, "delivery") {
			d.Reason = e.Reason
		}
	}
	switch {
	case d.Status == "" && err != nil:
		d.Reason = "the buy could not be read: " + err.Error()
	case !apiclient.Terminal(op.Status) && err != nil:
		d.Reason = fmt.Sprintf("the buy is still %s: %v", op.Status, err)
	case d.Reason == "" && apiclient.Terminal(op.Status):
		d.Reason = "the buy ended " + op.Status + " without this stage"
	}
	text := d.Reason + " " + op.Reason
	if m := accessDenied.FindStringSubmatch(text); m != nil {
		d.Permission, d.Resource = m[1], strings.TrimRight(m[2], ".,;)")
		if fn := roleFunction.FindStringSubmatch(text); fn != nil {
			d.Function = s.function + " (role " + fn[1] + ")"
		}
		if c := awsCall.FindStringSubmatch(text); c != nil {
			d.Call = c[1] + " " + c[2]
		}
		d.Hint = "the function's role lacks " + d.Permission + ": redeploy the stack (cdk deploy) or compare the role with docs/iam-grants.md"
	}
	return d
}

var (
	// AWS's AccessDenied message: "... is not authorized to perform: dynamodb:PutItem on
	// resource: arn:aws:dynamodb:... because ...".
	accessDenied = regexp.MustCompile(`not authorized to perform: ([A-Za-z0-9-]+:[A-Za-z0-9*]+)(?: on resource: (\S+))?`)
	roleFunction = regexp.MustCompile(`assumed-role/([^/\s]+)/`)
	// The AWS SDK's error prefix: "operation error DynamoDB: PutItem, ...".
	awsCall = regexp.MustCompile(`operation error ([A-Za-z0-9 ]+): ([A-Za-z0-9]+)`)
)

// SinkEvents reads status events from an event sink over HTTP: GET <URL>?operation_id=<id>
// answers the operation's events as a JSON array (the local stack's sink does).
type SinkEvents struct {
	URL    string
	Client *http.Client
}

// Of implements Events.
func (s SinkEvents) Of(ctx context.Context, id string) ([]statusevent.Event, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"?operation_id="+url.QueryEscape(id), nil)
	if err != nil {
		return nil, err
	}
	hc := s.Client
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("read the status events at %s: %w", s.URL, err)
	}
	defer func() { _ = resp.Body.Close() }() // read-only
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("read the status events at %s: HTTP %d", s.URL, resp.StatusCode)
	}
	var evs []statusevent.Event
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&evs); err != nil {
		return nil, fmt.Errorf("read the status events at %s: %w", s.URL, err)
	}
	return evs, nil
}
