package statemachine

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/campaign"
	"github.com/buyflow/buyflow/internal/workflow"
)

// The contract tests of campaign.asl.json: the same rules as the MediaBuy definition's where
// they apply (every transition resolves, every state is reachable and can end, every Lambda
// task retries the Lambda service errors and TransientError with full jitter), and the
// campaign's own: each leg runs as a child execution named after its operation, and every
// payload is one its function decodes.

// campaignStates is one level of states (the top level or a Map's item processor).
type campaignStates struct {
	StartAt string                     `json:"StartAt"`
	States  map[string]json.RawMessage `json:"States"`
}

type campaignState struct {
	state
	Comment       string          `json:"Comment"`
	ItemsPath     string          `json:"ItemsPath"`
	ItemProcessor *campaignStates `json:"ItemProcessor"`
}

// eachCampaignLevel calls fn for the top level and every item processor.
func eachCampaignLevel(t *testing.T, fn func(where string, level campaignStates, states map[string]campaignState)) {
	t.Helper()
	var top campaignStates
	if err := json.Unmarshal([]byte(CampaignDefinition), &top); err != nil {
		t.Fatalf("campaign.asl.json does not parse: %v", err)
	}
	var visit func(where string, level campaignStates)
	visit = func(where string, level campaignStates) {
		states := map[string]campaignState{}
		for name, raw := range level.States {
			var st campaignState
			if err := json.Unmarshal(raw, &st); err != nil {
				t.Fatalf("%s%s: %v", where, name, err)
			}
			states[name] = st
		}
		fn(where, level, states)
		for name, st := range states {
			if st.Type == "Map" && st.ItemProcessor != nil {
				visit(where+name+"/", *st.ItemProcessor)
			}
		}
	}
	visit("", top)
}

func TestCampaignTransitionsResolveAndEveryStateIsReachable(t *testing.T) {
	eachCampaignLevel(t, func(where string, level campaignStates, states map[string]campaignState) {
		reached := map[string]bool{}
		var walk func(string)
		walk = func(name string) {
			st, ok := states[name]
			if !ok {
				t.Errorf("%s: transition to unknown state %q", where, name)
				return
			}
			if reached[name] {
				return
			}
			reached[name] = true
			for _, n := range st.successors() {
				walk(n)
			}
			ends := st.End || st.Type == "Succeed" || st.Type == "Fail"
			if !ends && st.Next == "" && st.Type != "Choice" {
				t.Errorf("%s%s: neither Next nor an end", where, name)
			}
		}
		walk(level.StartAt)
		for name := range states {
			if !reached[name] {
				t.Errorf("%s%s is unreachable", where, name)
			}
		}
	})
}

func TestCampaignTasks(t *testing.T) {
	if used := Used(CampaignDefinition); !slices.Equal(used, CampaignPlaceholders) {
		t.Errorf("campaign.asl.json uses %v, CampaignPlaceholders says %v", used, CampaignPlaceholders)
	}
	actions := map[string][]string{
		"${" + CampaignFunctionARN + "}":   {campaign.ActionLeg, campaign.ActionSettle, campaign.ActionSyncPlans, campaign.ActionClose, campaign.ActionRelease, campaign.ActionFail},
		"${" + CreateFunctionARN + "}":     {string(workflow.ActionCancel)},
		"${" + GovernanceFunctionARN + "}": {string(workflow.ActionCheck), string(workflow.ActionFail)},
		"${" + NotifyFunctionARN + "}":     {string(workflow.ActionExpire)},
	}
	approvals := 0
	children := 0
	eachCampaignLevel(t, func(where string, _ campaignStates, states map[string]campaignState) {
		for name, st := range states {
			if st.Type != "Task" {
				continue
			}
			if st.Comment == "" {
				t.Errorf("%s%s: a Task without a Comment", where, name)
			}
			for i, r := range st.Retry {
				if r.JitterStrategy != jitterFull || r.MaxDelaySeconds == nil || r.MaxAttempts == nil || *r.MaxAttempts > maxRetryAttempt {
					t.Errorf("%s%s Retry[%d]: want FULL jitter, a MaxDelaySeconds and at most %d attempts", where, name, i, maxRetryAttempt)
				}
			}
			switch st.Resource {
			case lambdaInvoke:
				for _, want := range append(slices.Clone(lambdaServiceErrors), transientError) {
					if !retries(st.state, want) {
						t.Errorf("%s%s: does not retry %s", where, name, want)
					}
				}
				fn, _ := st.Parameters["FunctionName"].(string)
				payload, _ := st.Parameters["Payload"].(map[string]any)
				if a, _ := payload["action"].(string); !slices.Contains(actions[fn], a) {
					t.Errorf("%s%s: action %q is not one %s serves %v", where, name, a, fn, actions[fn])
				}
				if payload["tenant.$"] != "$.tenant" {
					t.Errorf("%s%s: the payload must carry the tenant", where, name)
				}
				if rs := st.ResultSelector; len(rs) != 1 || rs["result.$"] != "$.Payload" {
					t.Errorf("%s%s: ResultSelector must be {\"result.$\": \"$.Payload\"}", where, name)
				}
			case lambdaInvoke + ".waitForTaskToken":
				// The campaign's one approval: notify's request, with the campaign as its subject.
				approvals++
				payload, _ := st.Parameters["Payload"].(map[string]any)
				if st.Parameters["FunctionName"] != "${"+NotifyFunctionARN+"}" || payload["action"] != string(workflow.ActionRequest) ||
					payload["campaign_id.$"] != "$.campaign_id" || payload["task_token.$"] != "$$.Task.Token" || payload["operation_id.$"] != nil {
					t.Errorf("%s%s: the campaign's approval must be notify's request about the campaign: %v", where, name, st.Parameters)
				}
				if st.TimeoutSecondsPath != "$.config.approval_timeout_seconds" {
					t.Errorf("%s%s: an approval waits at most the approval SLA, got %q", where, name, st.TimeoutSecondsPath)
				}
			case startExecution + ".sync:2":
				children++
				if st.Parameters["Name.$"] != "$.leg.execution_name" || st.Parameters["Input.$"] != "$.leg.input" {
					t.Errorf("%s%s: a leg's child execution must be named and fed as its submit built it: %v", where, name, st.Parameters)
				}
				if len(st.Catch) == 0 || !slices.Equal(st.Catch[len(st.Catch)-1].ErrorEquals, []string{statesAll}) {
					t.Errorf("%s%s: a failed leg is the leg's outcome: the last Catch must be States.ALL", where, name)
				}
				for _, r := range st.Retry {
					if slices.Contains(r.ErrorEquals, "States.TaskFailed") || slices.Contains(r.ErrorEquals, statesAll) {
						t.Errorf("%s%s: retrying a failed child would run the leg's buy again", where, name)
					}
				}
			default:
				t.Errorf("%s%s: unexpected resource %q", where, name, st.Resource)
			}
		}
	})
	if approvals != 1 {
		t.Errorf("%d approval tasks, want 1 (the campaign's one approval)", approvals)
	}
	if children != 1 {
		t.Errorf("%d child-execution tasks, want 1 (the legs' Map)", children)
	}
}

// The Map over the legs reads the campaign input as campaign.ExecutionInput writes it.
func TestCampaignInputMatchesTheGoType(t *testing.T) {
	in, err := json.Marshal(campaign.ExecutionInput{Legs: []campaign.LegInput{{}}})
	if err != nil {
		t.Fatal(err)
	}
	var fields map[string]any
	_ = json.Unmarshal(in, &fields)
	leg := fields["legs"].([]any)[0].(map[string]any)
	for _, path := range []string{"$.legs", "$.tenant", "$.media_buy_state_machine_arn", "$.campaign_id", "$.config", "$.sync_plan"} {
		if !strings.Contains(CampaignDefinition, `"`+path+`"`) {
			t.Errorf("the definition never reads %s", path)
		}
		if _, ok := fields[strings.TrimPrefix(path, "$.")]; !ok {
			t.Errorf("campaign.ExecutionInput has no %s", path)
		}
	}
	for _, f := range []string{"execution_name", "input", "operation_id"} {
		if _, ok := leg[f]; !ok {
			t.Errorf("campaign.LegInput has no %s", f)
		}
		if !strings.Contains(CampaignDefinition, `"$.leg.`+f+`"`) {
			t.Errorf("the definition never reads $.leg.%s", f)
		}
	}
}
