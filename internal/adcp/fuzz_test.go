package adcp

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/buyflow/buyflow/internal/jsonnum"
)

// answerSeeds are agent answers the decoders below are fuzzed from: the spec's extraction
// vectors' payloads, one answer of each kind, and the numbers that crashed the schema library.
func answerSeeds(f *testing.F) [][]byte {
	seeds := [][]byte{
		[]byte(`{"status":"completed","media_buy_id":"mb1","media_buy_status":"active","confirmed_at":"2030-01-01T00:00:00Z","revision":1,"packages":[{"package_id":"p1","product_id":"x","budget":15000}]}`),
		[]byte(`{"status":"submitted","task_id":"t1","message":"queued"}`),
		[]byte(`{"errors":[{"code":"BUDGET_EXCEEDED","message":"no","recovery":"correctable"}]}`),
		[]byte(`{"check_id":"c1","status":"approved","governance_context":"g","expires_at":"2030-01-01T00:00:00Z","conditions":[{"field":"packages[0].budget","required_value":10000}]}`),
		[]byte(`{"outcome_id":"o1","outcome_state":"accepted","committed_budget":20000.5,"findings":[{"category_id":"x","severity":"critical","explanation":"e"}]}`),
		[]byte(`{"adcp":{"major_versions":[3],"idempotency":{"replay_ttl_seconds":86400}},"supported_protocols":["media_buy"]}`),
		[]byte(`{"packages":[{"package_id":"p1","budget":1e10000000}]}`),
		[]byte(`{"committed_budget":-1e-10000000}`),
		[]byte(`{"conditions":[{"required_value":2E9999999}]}`),
	}
	if b, err := os.ReadFile("testdata/mcp-response-extraction.json"); err == nil {
		var vf struct {
			Vectors []struct {
				Expected json.RawMessage `json:"expected_data"`
			} `json:"vectors"`
		}
		if json.Unmarshal(b, &vf) == nil {
			for _, v := range vf.Vectors {
				seeds = append(seeds, v.Expected)
			}
		}
	}
	return seeds
}

// fuzzDecoder checks one decoder of an agent's answer: it never panics; it refuses with an
// *Error; and what it accepts holds no number over jsonnum's bounds (the seller's numbers
// reach nothing unbounded).
func fuzzDecoder[T any](f *testing.F, decode func(json.RawMessage) (*T, error)) {
	for _, s := range answerSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		v, err := decode(body)
		checkAnswer(t, v != nil, err, body)
	})
}

// checkAnswer checks one decoded answer: a refusal is an *Error; otherwise there is a result,
// and the body it was read from holds no number over jsonnum's bounds.
func checkAnswer(t *testing.T, ok bool, err error, body []byte) {
	t.Helper()
	if err != nil {
		var ae *Error
		if !errors.As(err, &ae) {
			t.Fatalf("refusal %v (%T) is not an *adcp.Error", err, err)
		}
		return
	}
	if !ok {
		t.Fatal("no result and no error")
	}
	var ne *jsonnum.Error
	if errors.As(jsonnum.Check(body), &ne) {
		t.Fatalf("accepted an answer with %v", ne)
	}
}

func FuzzDecodeGovernance(f *testing.F) { fuzzDecoder(f, DecodeGovernance) }
func FuzzDecodeOutcome(f *testing.F)    { fuzzDecoder(f, DecodeOutcome) }

// FuzzDecodeCapabilities covers get_adcp_capabilities, which the client reads through
// responseFromBody (the bound) and then decodeCapabilities.
func FuzzDecodeCapabilities(f *testing.F) {
	fuzzDecoder(f, func(body json.RawMessage) (*Capabilities, error) {
		resp, err := responseFromBody(body)
		if err != nil {
			return nil, err
		}
		caps, err := decodeCapabilities(resp.Body)
		if err != nil {
			return nil, &Error{Kind: KindProtocol, Recovery: RecoveryTerminal, Err: err}
		}
		return caps, nil
	})
}

// FuzzInterpret feeds whole MCP tool results (structuredContent, text content, isError) to
// the extraction every call goes through: it never panics, answers an *Response or an *Error,
// and a Response's body holds only bounded numbers.
func FuzzInterpret(f *testing.F) {
	for _, s := range answerSeeds(f) {
		f.Add(s, false, true)
		f.Add(s, false, false)
		f.Add(s, true, false)
	}
	f.Fuzz(func(t *testing.T, payload []byte, isError, structured bool) {
		res := &mcp.CallToolResult{IsError: isError, Content: []mcp.Content{&mcp.TextContent{Text: string(payload)}}}
		if structured {
			var obj map[string]any
			if json.Unmarshal(payload, &obj) != nil {
				return // the MCP SDK never hands over structuredContent it could not decode
			}
			res.StructuredContent = obj
		}
		resp, err := interpret(res)
		var body []byte
		if resp != nil {
			body = resp.Body
		}
		checkAnswer(t, resp != nil, err, body)
	})
}

// FuzzDecodeMediaBuy: a seller's create/update answer (inline, a poll's result or a webhook's
// result) never panics the decoder, and what it accepts holds together: a success carries a
// media buy in a completed task, a submitted answer a task id, every error a recovery; a
// failure read from a result always names a code. The same bytes as an isError payload always
// give an *Error. Like every decoder, it accepts only bounded numbers.
func FuzzDecodeMediaBuy(f *testing.F) {
	for _, s := range []string{
		`{"status":"completed","media_buy_id":"mb1","media_buy_status":"active","revision":1,"packages":[{"package_id":"p1"}]}`,
		`{"media_buy_id":"mb1","status":"canceled","revision":2}`,
		`{"media_buy_id":"mb1","media_buy_status":"pending_start"}`,
		`{"status":"submitted","task_id":"task_9"}`,
		`{"errors":[{"code":"BUDGET_TOO_LOW","message":"low","recovery":"correctable","retry_after":30}]}`,
		`{"status":"failed","adcp_error":{"code":"PRODUCT_NOT_FOUND","message":"gone","retry_after":"soon"}}`,
		`{"status":"rejected","media_buy_id":"mb1","errors":[{"code":"W","severity":"warning"}]}`,
		`{"status":7,"errors":{"code":"X"}}`,
		`{}`,
	} {
		f.Add([]byte(s))
	}
	for _, s := range answerSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !json.Valid(body) {
			return
		}
		r, err := DecodeMediaBuy(body)
		checkAnswer(t, r != nil, err, body)
		var ae *Error
		switch {
		case err != nil && !errors.As(err, &ae):
			t.Fatalf("error of another type: %v", err)
		case ae != nil && ae.Recovery == "":
			t.Fatalf("error without recovery: %+v", ae)
		case err == nil && r.Shape == ShapeSuccess && (r.MediaBuyID == "" || r.Status != StatusCompleted):
			t.Fatalf("success without a media buy in a completed task: %+v", r)
		case err == nil && r.Shape == ShapeSubmitted && r.TaskID == "":
			t.Fatalf("submitted without a task: %+v", r)
		}
		if e := ResultFailure(body); e != nil && (e.Code == "" || e.Recovery == "") {
			t.Fatalf("result failure without code or recovery: %+v", e)
		}
		var obj map[string]any
		if json.Unmarshal(body, &obj) == nil {
			res := &mcp.CallToolResult{IsError: true, StructuredContent: obj, Content: []mcp.Content{&mcp.TextContent{Text: string(body)}}}
			if _, err := interpret(res); err == nil || !errors.As(err, &ae) {
				t.Fatalf("an isError payload gave %v", err)
			}
		}
	})
}

// FuzzOAuthChallenge: any WWW-Authenticate an agent answers is read into a metadata URL that
// buyflow may call (https, or http on loopback) or none, scopes without blanks, and a refusal
// of bounded length; never a panic.
func FuzzOAuthChallenge(f *testing.F) {
	f.Add(`Bearer realm="mcp", error="invalid_token", error_description="expired", resource_metadata="https://s.example/.well-known/oauth-protected-resource/mcp", scope="adcp:buy adcp:read"`)
	f.Add(`Basic realm="x", Bearer resource_metadata="javascript:alert(1)"`)
	f.Add(`Bearer error="insufficient_scope", scope="` + strings.Repeat("a", 5000) + `"`)
	f.Add(`Bearer ,,, "`)
	f.Add(`Bearer error="` + strings.Repeat("e", 100) + `", scope="` + strings.Repeat("\x01", 400) + `"`) // quoting grows each byte fourfold
	f.Fuzz(func(t *testing.T, header string) {
		challenges, _ := oauthex.ParseWWWAuthenticate([]string{header})
		metaURL, scopes := readChallenges(challenges)
		if metaURL != "" && checkAgentURL(metaURL, true) != nil {
			t.Fatalf("kept metadata URL %q", metaURL)
		}
		for _, s := range scopes {
			if s == "" || strings.ContainsAny(s, " \t\r\n") {
				t.Fatalf("scope %q", s)
			}
		}
		s := &oauthSession{st: &oauthAgent{agent: Agent{ID: "s1", Auth: &AuthConfig{Mode: AuthOAuth2ClientCredentials}}}}
		if e := s.refused(401, challenges); len(e.Message) > 1000 || e.Code != CodeOAuthTokenRejected {
			t.Fatalf("refusal %d bytes, code %s", len(e.Message), e.Code)
		}
	})
}
