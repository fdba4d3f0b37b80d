package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/devstack"
)

// A test build of the stack without one grant (the synthesized template with the statement of
// submit's role that allows states:StartExecution taken out, fed to the local stack's check)
// refuses the call as AWS would: the buy is not accepted, and the denial, named, is what fails
// the suite. Not parallel: the grant is missing only while no other test runs.
func TestRemovedGrantIsDeniedAndNamed(t *testing.T) {
	if skip != "" {
		t.Skip(skip)
	}
	if suite.local == nil || suite.local.IAM == nil {
		t.Skip("IAM is enforced only on the local stack with BUYFLOW_E2E_IAM unset")
	}
	g := suite.local.IAM
	src, restore, err := g.WithoutStatement("submit", "states:StartExecution")
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	c := client(t, "t"+randomID(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if sub, _, err := c.Submit(ctx, "key-"+randomID(t), buy{PO: po(t), Sim: "async_complete"}.body(t)); err == nil {
		t.Errorf("submit accepted the buy (%+v) although its execution could not start", sub)
	}
	var provoked []devstack.IAMCall
	for _, call := range g.Calls() {
		if call.Denied && call.Caller == "submit" && strings.HasSuffix(call.Reason, "[provoked by a test]") {
			provoked = append(provoked, call)
		}
	}
	msg := devstack.DeniedError(provoked)
	want := "submit: states:StartExecution on arn:aws:states:" + devstack.TemplateEnv.Region + ":" + devstack.TemplateEnv.AccountID + ":stateMachine:"
	if msg == nil || !strings.Contains(msg.Error(), want) {
		t.Fatalf("with %s removed, the denials are %v; want one naming %q", src, msg, want)
	}
	t.Logf("with %s removed the suite would fail with:\n%v", src, msg)
}
