package adcp

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/buyflow/buyflow/internal/clocktest"
)

// recordingGuard refuses while refuse is set and records every outcome it is told.
type recordingGuard struct {
	mu       sync.Mutex
	refuse   *UnavailableError
	outcomes []error
}

func (g *recordingGuard) Admit(context.Context, string) (func(error), error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.refuse != nil {
		return nil, g.refuse
	}
	return func(err error) {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.outcomes = append(g.outcomes, err)
	}, nil
}

func TestGuardSeesEveryExchangeAndARefusalSendsNothing(t *testing.T) {
	agent := newFakeAgent(t, map[string]toolFunc{
		ToolGetAdCPCapabilities: capsTool(capsWithReplay),
		ToolCreateMediaBuy: func(json.RawMessage) (*mcp.CallToolResult, error) {
			return toolError(`{"code":"SERVICE_UNAVAILABLE","message":"down"}`)
		},
	})
	clock := clocktest.At(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	c := newTestClient(t, clock, map[string]string{"s1": agent.URL()})
	g := &recordingGuard{}
	c.opts.Guard = g
	in := mustIntent(t, ToolCreateMediaBuy, validCreate(), clock.Now())

	_, err := c.CreateMediaBuy(context.Background(), "s1", in)
	if Decide(err) != DecisionRetry {
		t.Fatalf("create: %v", err)
	}
	// get_adcp_capabilities (an answer) and create_media_buy (the agent's transient error).
	if len(g.outcomes) != 2 || g.outcomes[0] != nil || Decide(g.outcomes[1]) != DecisionRetry {
		t.Fatalf("guard outcomes %v", g.outcomes)
	}

	g.refuse = &UnavailableError{Agent: "s1", Since: clock.Now(), RetryAt: clock.Now().Add(20 * time.Second)}
	requests := agent.Requests()
	_, err = c.CreateMediaBuy(context.Background(), "s1", in.Retry())
	var ae *Error
	var u *UnavailableError
	if !errors.As(err, &ae) || ae.Code != CodeAgentUnavailable || ae.Recovery != RecoveryTransient || ae.RetryAfter != 20*time.Second || !errors.As(err, &u) {
		t.Fatalf("refused create: %#v", err)
	}
	if n := agent.Requests(); n != requests {
		t.Fatalf("a refused call sent %d requests", n-requests)
	}
	if _, err := c.Tools(context.Background(), "s1"); !errors.As(err, &u) {
		t.Fatalf("tools/list while refused: %v", err)
	}
}

// NotSent is true only for failures before anything left: the guard's refusal, a capabilities
// read that failed before a mutating call, a credential that could not be had. The agent's
// own transient error is not, and at an agent without a replay window only that one is
// reported terminal (it may have been executed).
func TestNotSentOnlyWhenNothingLeft(t *testing.T) {
	capsDown := true
	var mu sync.Mutex
	agent := newFakeAgent(t, map[string]toolFunc{
		ToolGetAdCPCapabilities: func(args json.RawMessage) (*mcp.CallToolResult, error) {
			mu.Lock()
			defer mu.Unlock()
			if capsDown {
				return toolError(`{"code":"SERVICE_UNAVAILABLE","message":"down"}`)
			}
			return capsTool(capsNoReplay)(args)
		},
		ToolCreateMediaBuy: func(json.RawMessage) (*mcp.CallToolResult, error) {
			return toolError(`{"code":"SERVICE_UNAVAILABLE","message":"down"}`)
		},
	})
	clock := clocktest.At(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	c := newTestClient(t, clock, map[string]string{"s1": agent.URL()})
	g := &recordingGuard{}
	c.opts.Guard = g
	in := mustIntent(t, ToolCreateMediaBuy, validCreate(), clock.Now())
	ctx := context.Background()

	g.refuse = &UnavailableError{Agent: "s1", Since: clock.Now(), RetryAt: clock.Now().Add(time.Minute)}
	if _, err := c.CreateMediaBuy(ctx, "s1", in); !NotSent(err) || Decide(err) != DecisionRetry {
		t.Fatalf("refused by the guard: NotSent false or not retryable: %v", err)
	}
	g.refuse = nil
	_, err := c.CreateMediaBuy(ctx, "s1", in)
	if !NotSent(err) || Decide(err) != DecisionRetry || len(agent.Calls(ToolCreateMediaBuy)) != 0 {
		t.Fatalf("capabilities down: NotSent %v, decision %v, %d creates sent: %v", NotSent(err), Decide(err), len(agent.Calls(ToolCreateMediaBuy)), err)
	}
	mu.Lock()
	capsDown = false
	mu.Unlock()
	_, err = c.CreateMediaBuy(ctx, "s1", in)
	var ae *Error
	if NotSent(err) || !errors.As(err, &ae) || ae.Code != CodeNoReplayWindow || len(agent.Calls(ToolCreateMediaBuy)) != 1 {
		t.Fatalf("the agent's own transient error at an agent without a replay window: NotSent %v, %v", NotSent(err), err)
	}

	creds := newTestClient(t, clock, map[string]string{"s1": agent.URL()})
	creds.opts.Credentials = CredentialsFunc(func(context.Context, string) (string, error) { return "", errors.New("secrets manager down") })
	if _, err := creds.GetMediaBuys(ctx, "s1", GetMediaBuysRequest{}); !NotSent(err) {
		t.Fatalf("no credential: NotSent false: %v", err)
	}
	if NotSent(errors.New("connection reset")) || NotSent(nil) {
		t.Fatal("NotSent of an error that may have been sent")
	}
}
