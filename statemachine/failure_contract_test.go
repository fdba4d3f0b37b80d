package statemachine

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/campaign"
)

// The failure contract of both machines: every Task and Map, once its retries are spent, ends
// in a state that records the failure it caught, so that no execution fails with its buy or
// campaign still reading as in progress. A recorder is a Lambda task that is handed a failure
// (its Payload carries "failure.$"): RecordFailure and RecordChangeFailure of a buy, and of a
// campaign RecordCampaignFailure, CloseLegs and ReleaseRejectedLegs (each leg records the
// failure, then Settle the campaign's outcome). Only a recorder itself, or a state after one,
// may end in a Fail state whose name says the failure was not recorded.

// aslLevel is one level of states: a machine's top level or a Map's item processor.
type aslLevel struct {
	StartAt string                     `json:"StartAt"`
	States  map[string]json.RawMessage `json:"States"`
}

type aslState struct {
	Type          string         `json:"Type"`
	Resource      string         `json:"Resource"`
	Parameters    map[string]any `json:"Parameters"`
	Next          string         `json:"Next"`
	Default       string         `json:"Default"`
	End           bool           `json:"End"`
	Error         string         `json:"Error"`
	Choices       []choice       `json:"Choices"`
	Catch         []catcher      `json:"Catch"`
	ItemProcessor *aslLevel      `json:"ItemProcessor"`
}

// recorder reports whether s records a failure it is handed.
func (s aslState) recorder() bool {
	payload, _ := s.Parameters["Payload"].(map[string]any)
	_, ok := payload["failure.$"]
	return s.Type == "Task" && strings.HasPrefix(s.Resource, lambdaInvoke) && ok
}

// notRecorded reports whether s is the end of a failure whose recording failed too.
func (s aslState) notRecorded() bool {
	return s.Type == "Fail" && strings.HasSuffix(s.Error, "NotRecorded")
}

func (s aslState) ends() bool { return s.Type == "Succeed" || s.Type == "Fail" || s.End }

// eachLevel calls fn with every level of def, top first; where names it ("" for the top).
func eachLevel(t *testing.T, def string, fn func(where string, states map[string]aslState)) {
	t.Helper()
	var top aslLevel
	if err := json.Unmarshal([]byte(def), &top); err != nil {
		t.Fatal(err)
	}
	var visit func(string, aslLevel)
	visit = func(where string, level aslLevel) {
		states := map[string]aslState{}
		for name, raw := range level.States {
			var st aslState
			if err := json.Unmarshal(raw, &st); err != nil {
				t.Fatalf("%s%s: %v", where, name, err)
			}
			states[name] = st
		}
		fn(where, states)
		for name, st := range states {
			if st.ItemProcessor != nil {
				visit(where+name+"/", *st.ItemProcessor)
			}
		}
	}
	visit("", top)
}

// landings are the states a transition to start comes to rest in: Pass and Choice states are
// followed (every rule and the default), the first state of another type is a landing.
func landings(states map[string]aslState, start string) []string {
	var out []string
	seen := map[string]bool{}
	var walk func(string)
	walk = func(n string) {
		if seen[n] {
			return
		}
		seen[n] = true
		st := states[n]
		switch {
		case st.Type == "Pass" && !st.End:
			walk(st.Next)
		case st.Type == "Choice":
			for _, c := range st.Choices {
				walk(c.Next)
			}
			walk(st.Default)
		default:
			out = append(out, n)
		}
	}
	walk(start)
	return out
}

// successors are the states st may move to: Next, a Choice's branches and Default, its Catches.
func (st aslState) successors() []string {
	var out []string
	add := func(n string) {
		if n != "" {
			out = append(out, n)
		}
	}
	add(st.Next)
	add(st.Default)
	for _, c := range st.Choices {
		add(c.Next)
	}
	for _, c := range st.Catch {
		add(c.Next)
	}
	return out
}

// afterRecorders are the states reachable from a recorder (the recorders included).
func afterRecorders(states map[string]aslState) map[string]bool {
	out := map[string]bool{}
	var walk func(string)
	walk = func(n string) {
		st, ok := states[n]
		if !ok || out[n] {
			return
		}
		out[n] = true
		for _, x := range st.successors() {
			walk(x)
		}
	}
	for n, st := range states {
		if st.recorder() {
			walk(n)
		}
	}
	return out
}

func TestEveryTaskAndMapEndsInARecordedFailure(t *testing.T) {
	for _, m := range []struct{ name, def string }{{"mediabuy.asl.json", Definition}, {"campaign.asl.json", CampaignDefinition}} {
		t.Run(m.name, func(t *testing.T) {
			checked, maps := 0, 0
			eachLevel(t, m.def, func(where string, states map[string]aslState) {
				after := afterRecorders(states)
				for name, st := range states {
					if st.Type != "Task" && st.Type != "Map" {
						continue
					}
					checked++
					if st.Type == "Map" {
						maps++
					}
					if len(st.Catch) == 0 || !slices.Equal(st.Catch[len(st.Catch)-1].ErrorEquals, []string{statesAll}) {
						t.Errorf("%s%s: no Catch on States.ALL: once its retries are spent the execution fails and nothing records why", where, name)
						continue
					}
					for _, l := range landings(states, st.Catch[len(st.Catch)-1].Next) {
						ls := states[l]
						switch {
						case ls.recorder():
						case where != "" && ls.ends():
							// An item ends: the state after the Map reads its result (a leg's
							// check, run or cancel), or the Map's own Catch takes its failure.
						case ls.notRecorded() && after[name]:
							// Recording the failure failed too: the end says so.
						default:
							t.Errorf("%s%s: States.ALL leads to %s, which does not record the failure", where, name, l)
						}
					}
				}
			})
			if checked < 8 {
				t.Fatalf("checked %d Task and Map states", checked)
			}
			if m.def == CampaignDefinition && maps < 3 {
				t.Fatalf("checked %d Map states of the campaign, want its three", maps)
			}
		})
	}
}

// Every status Settle can answer ends the campaign where the outcome is recorded: a final one
// in the Succeed or Fail state of that name (Settle wrote it), running (a leg had not ended,
// so Settle wrote nothing) in RecordCampaignFailure.
func TestEverySettledStatusEndsRecorded(t *testing.T) {
	var top struct {
		States map[string]json.RawMessage `json:"States"`
	}
	if err := json.Unmarshal([]byte(CampaignDefinition), &top); err != nil {
		t.Fatal(err)
	}
	var outcome struct {
		Choices []struct {
			Variable     string `json:"Variable"`
			StringEquals string `json:"StringEquals"`
			Next         string `json:"Next"`
		} `json:"Choices"`
		Default string `json:"Default"`
	}
	if err := json.Unmarshal(top.States["CampaignOutcome"], &outcome); err != nil {
		t.Fatal(err)
	}
	states := map[string]aslState{}
	eachLevel(t, CampaignDefinition, func(where string, level map[string]aslState) {
		if where == "" {
			states = level
		}
	})
	route := func(status campaign.Status) string {
		for _, c := range outcome.Choices {
			if c.Variable == "$.settle.result.status" && c.StringEquals == string(status) {
				return c.Next
			}
		}
		return outcome.Default
	}
	want := map[campaign.Status]string{campaign.Completed: "CampaignCompleted", campaign.PartiallyCompleted: "CampaignPartiallyCompleted",
		campaign.Canceled: "CampaignCanceled", campaign.Failed: "CampaignFailed"}
	for status, end := range want {
		if got := route(status); got != end {
			t.Errorf("a campaign settled %s ends in %s, want %s", status, got, end)
		}
	}
	lands := landings(states, route(campaign.Running))
	if len(lands) != 1 || lands[0] != "RecordCampaignFailure" || !states[lands[0]].recorder() {
		t.Errorf("a campaign Settle found running lands in %v, want RecordCampaignFailure: nothing records its outcome", lands)
	}
}
