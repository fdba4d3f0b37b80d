package adcptest

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"sync"

	"github.com/buyflow/buyflow/internal/adcpschemas"
)

// Scenario is one fixture-publisher scenario of the AdCP buyer storyboards
// (universal/buyer-fixture-publisher.yaml): a call of Tool whose context.correlation_id
// contains Match is answered as the scenario says. The storyboards select scenarios by
// correlation id ("<storyboard>--<step>"), which a buyer echoes in the context it was handed,
// so one seller serves every step of a storyboard.
//
// An Error or HTTPStatus answers at most Times calls per idempotency key (default 1): AdCP
// never caches an error, so the buyer's retry with the same key gets past it, and a retry
// with another key would be answered again (a buyer that mints a new key per attempt is
// seen in the calls). Tokens apply to every matching call.
type Scenario struct {
	// Match is a substring of context.correlation_id.
	Match string
	// Tool is the tool it answers ("" = create_media_buy).
	Tool string
	// Error answers the call with this AdCP error (a tool result with isError, as MCP carries
	// AdCP errors) instead of running it. Recovery defaults from the code's class.
	Error *AdcpError
	// HTTPStatus answers at the HTTP layer instead, before MCP sees the request: 401 (with
	// Challenge as WWW-Authenticate and a JSON-RPC error naming Error's code or AUTH_INVALID,
	// as an agent refusing an expired token does) or a 5xx (the agent is down).
	HTTPStatus int
	// Challenge is the WWW-Authenticate value of a 401 (default `Bearer realm="adcp"`).
	Challenge string
	// Tokens are simulation tokens the call runs with (doc.go), e.g. "async_complete".
	Tokens string
	// Times bounds the answers per idempotency key (0 = once).
	Times int
}

func (s Scenario) tool() string {
	if s.Tool == "" {
		return "create_media_buy"
	}
	return s.Tool
}

// correlationID is a call's context.correlation_id, "" when it has none.
func correlationID(args map[string]any) string {
	ctx, _ := args["context"].(map[string]any)
	id, _ := ctx["correlation_id"].(string)
	return id
}

// scenarioFor returns the first scenario matching a call of tool with args, nil when none.
func (a *agent) scenarioFor(tool string, args map[string]any) *Scenario {
	id := correlationID(args)
	if id == "" {
		return nil
	}
	for i := range a.scenarios {
		if sc := &a.scenarios[i]; sc.tool() == tool && sc.Match != "" && strings.Contains(id, sc.Match) {
			return sc
		}
	}
	return nil
}

// scenarioFires counts one answer of sc for key and reports whether it is still due.
func (a *agent) scenarioFires(sc *Scenario, key string) bool {
	times := max(sc.Times, 1)
	fk := "scenario|" + sc.Match + "|" + sc.tool() + "|" + key
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.faultCounts[fk] >= times {
		return false
	}
	a.faultCounts[fk]++
	return true
}

// scenarioError is the tool-level error a matching scenario answers, nil when none is due.
func (a *agent) scenarioError(c *call) *AdcpError {
	sc := a.scenarioFor(c.tool, c.args)
	if sc == nil || sc.Error == nil || sc.HTTPStatus != 0 || !a.scenarioFires(sc, c.str("idempotency_key")) {
		return nil
	}
	e := *sc.Error
	if e.Message == "" {
		e.Message = "fixture scenario " + sc.Match
	}
	if e.Recovery == "" {
		e.Recovery = defaultRecovery(e.Code)
	}
	return &e
}

// defaultRecovery is the recovery class a fixture error without one carries: AdCP 3.2
// requires recovery of producers, and the storyboards declare only codes. It is the one the
// error-code enum's enumMetadata assigns (the embedded 3.1.19 schemas), correctable for a code
// outside the enum.
func defaultRecovery(code string) string {
	if r := enumRecovery()[code]; r != "" {
		return r
	}
	return "correctable"
}

// enumRecovery reads enums/error-code.json's enumMetadata once: code → recovery.
var enumRecovery = sync.OnceValue(func() map[string]string {
	out := map[string]string{}
	fsys, err := adcpschemas.Open(adcpschemas.Release31)
	if err != nil {
		return out
	}
	raw, err := fs.ReadFile(fsys, "enums/error-code.json")
	if err != nil {
		return out
	}
	var enum struct {
		Meta map[string]json.RawMessage `json:"enumMetadata"`
	}
	_ = json.Unmarshal(raw, &enum)
	for code, m := range enum.Meta {
		var e struct {
			Recovery string `json:"recovery"`
		}
		if json.Unmarshal(m, &e) == nil && e.Recovery != "" {
			out[code] = e.Recovery
		}
	}
	return out
})

// scenarioHTTP answers a matching scenario's HTTP status and reports whether it did.
func (a *agent) scenarioHTTP(w http.ResponseWriter, id json.RawMessage, tool string, rawArgs json.RawMessage, args map[string]any, authOK bool) bool {
	sc := a.scenarioFor(tool, args)
	if sc == nil || sc.HTTPStatus == 0 {
		return false
	}
	key, _ := args["idempotency_key"].(string)
	if !a.scenarioFires(sc, key) {
		return false
	}
	code := "SERVICE_UNAVAILABLE"
	if sc.HTTPStatus == http.StatusUnauthorized {
		code = "AUTH_INVALID"
	}
	if sc.Error != nil && sc.Error.Code != "" {
		code = sc.Error.Code
	}
	a.record(Call{Tool: tool, Arguments: append(json.RawMessage(nil), rawArgs...), Time: a.now(), AuthOK: authOK,
		Fault: fmt.Sprintf("http_%d", sc.HTTPStatus), IsError: true, ErrorCode: code})
	text := "fixture scenario " + sc.Match
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{
		"code": -32028, "message": text,
		"data": map[string]any{"adcp_error": AdcpError{Code: code, Message: text, Recovery: defaultRecovery(code)}},
	}})
	if sc.HTTPStatus == http.StatusUnauthorized {
		ch := sc.Challenge
		if ch == "" {
			ch = `Bearer realm="adcp"`
		}
		w.Header().Set("WWW-Authenticate", ch)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(sc.HTTPStatus)
	_, _ = w.Write(body)
	return true
}
