package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/workflow"
)

type ping struct {
	Action workflow.Action `json:"action"`
	N      int             `json:"n"`
}

// table serves "ping" (echoes N, fails with a plain error when N is 13) and "nop"; calls
// records which handler ran.
func table(calls *[]string) Table {
	return Table{
		"ping": Of(func(_ context.Context, in ping) (int, error) {
			*calls = append(*calls, "ping")
			if in.N == 13 {
				return 0, errors.New("unlucky")
			}
			return in.N, nil
		}),
		"nop": Of(func(context.Context, workflow.StageInput) (struct{}, error) {
			*calls = append(*calls, "nop")
			return struct{}{}, nil
		}),
		"strict": StrictOf(func(_ context.Context, in ping) (int, error) {
			*calls = append(*calls, "strict")
			return in.N, nil
		}),
	}
}

func TestRoutesToTheActionsHandler(t *testing.T) {
	var calls []string
	tbl := table(&calls)
	out, err := tbl.Handle(context.Background(), json.RawMessage(`{"action":"ping","n":7}`))
	if err != nil || out != 7 {
		t.Fatalf("ping = %v, %v; want 7", out, err)
	}
	if _, err := tbl.Handle(context.Background(), json.RawMessage(`{"action":"nop","operation_id":"op-1","tenant":"t"}`)); err != nil {
		t.Fatalf("nop: %v", err)
	}
	// A field the input does not have (an execution started under an older definition) is
	// ignored unless the handler is strict.
	if out, err := tbl.Handle(context.Background(), json.RawMessage(`{"action":"ping","n":3,"extra":1}`)); err != nil || out != 3 {
		t.Fatalf("ping with an extra field = %v, %v; want 3", out, err)
	}
	if !reflect.DeepEqual(calls, []string{"ping", "nop", "ping"}) {
		t.Fatalf("calls = %v", calls)
	}
}

func TestRefusesWithInvalidInputError(t *testing.T) {
	for _, tc := range []struct{ name, raw, field, reason string }{
		{"not json", `{`, "payload", "not a JSON object: unexpected end of JSON input"},
		{"not an object", `[]`, "payload", "not a JSON object: json: cannot unmarshal array"},
		{"unknown action", `{"action":"dance"}`, "action", `"dance" is not one of nop, ping, strict`},
		{"no action", `{}`, "action", `"" is not one of nop, ping, strict`},
		{"null", `null`, "action", `"" is not one of nop, ping, strict`},
		{"wrong type", `{"action":"ping","n":"seven"}`, "payload", "json: cannot unmarshal string into Go struct field ping.n of type int"},
		{"unknown field, strict", `{"action":"strict","n":1,"extra":1}`, "payload", `json: unknown field "extra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var calls []string
			_, err := table(&calls).Handle(context.Background(), json.RawMessage(tc.raw))
			invalid, ok := err.(*workflow.InvalidInputError) //nolint:errorlint // the ASL matches the bare type: a wrapped error is the bug
			if !ok {
				t.Fatalf("err = %T %v, want a bare *workflow.InvalidInputError", err, err)
			}
			if invalid.Field != tc.field || !strings.HasPrefix(invalid.Reason, tc.reason) {
				t.Errorf("err = %q: %q, want %q: %q…", invalid.Field, invalid.Reason, tc.field, tc.reason)
			}
			if len(calls) != 0 {
				t.Errorf("a refused payload reached %v", calls)
			}
		})
	}
}

func TestErrorsComeBackBare(t *testing.T) {
	var calls []string
	_, err := table(&calls).Handle(context.Background(), json.RawMessage(`{"action":"ping","n":13}`))
	var transient *workflow.TransientError
	if !errors.As(err, &transient) || transient.Reason != "unlucky" {
		t.Fatalf("err = %T %v, want the plain error as a TransientError", err, err)
	}
}

// FuzzHandle feeds payloads to a table. It must never panic; a payload is either refused with
// a bare InvalidInputError before any handler runs, or runs the one handler its action names.
func FuzzHandle(f *testing.F) {
	for _, s := range []string{`{"action":"ping","n":7}`, `{"action":"nop","tenant":"t"}`, `{"action":"dance"}`, `[]`, `null`, `{"action":"ping","n":1,"x":2}`, `{"action":"ping"} {`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var calls []string
		_, err := table(&calls).Handle(context.Background(), raw)
		var head struct {
			Action string `json:"action"`
		}
		parsed := json.Unmarshal(raw, &head) == nil
		if _, invalid := err.(*workflow.InvalidInputError); invalid { //nolint:errorlint // the ASL matches the bare type: a wrapped error is the bug
			if len(calls) != 0 {
				t.Fatalf("refused %q after running %v", raw, calls)
			}
			return
		}
		if !parsed || len(calls) != 1 || calls[0] != head.Action {
			t.Fatalf("%q ran %v (err %v)", raw, calls, err)
		}
	})
}
