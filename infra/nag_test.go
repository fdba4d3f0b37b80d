package main

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/buyflow/buyflow/internal/topology"
	"github.com/buyflow/buyflow/statemachine"
)

// nagVariant is one stack configuration the AwsSolutions rules must pass.
type nagVariant struct {
	name  string
	extra map[string]any
	env   *awscdk.Environment
	// mutate, when set, changes the stack before synthesis (the negative test).
	mutate func(*BuyflowStack)
}

var nagVariants = []nagVariant{
	{name: "prod"},
	{name: "dev", extra: map[string]any{CtxDev: "true", CtxStackName: "BuyflowDev"}},
	// With an account and region (what `cdk deploy` synthesizes): ARNs have literal
	// partition/region/account, which the suppressions' findings must still match.
	{name: "prod-with-env", env: &awscdk.Environment{Account: jsii.String("123456789012"), Region: jsii.String("eu-west-1")}},
	{name: "configured", extra: map[string]any{
		CtxTracing: "false", CtxAlarmEmail: "ops@example.com",
		CtxAgents: `{"agents":[{"id":"seller1","role":"seller","mcp_url":"https://seller.example/mcp","credential_ref":"Buyflow/agents/seller1",` +
			`"webhook":{"mode":"hmac","hmac_secret_ref":"Buyflow/agents/seller1-webhook"}}]}`,
		CtxApprovalPolicy: `{"threshold":"10000.00","currency":"USD","approvers":["U123"],"on_timeout":"reject"}`,
		CtxRunConfig:      `{"approval_timeout_seconds":7200}`,
	}},
	// The sandbox (simulated agents behind Function URLs) next to configured agents.
	{name: "sandbox", extra: map[string]any{CtxSandbox: "true",
		CtxAgents: `{"agents":[{"id":"seller1","role":"seller","mcp_url":"https://seller.example/mcp","credential_ref":"Buyflow/agents/seller1",` +
			`"webhook":{"mode":"hmac","hmac_secret_ref":"Buyflow/agents/seller1-webhook"}}]}`}},
}

var reportPathRE = regexp.MustCompile(`found in: (\S+validation-report\.json)`)

// synthWithNag builds the app the way main does (cdk.json's context, the AwsSolutions checks as
// an aspect of the app) and synthesizes it. A failed synth (with cdk.json's
// annotationsInValidationReport, any unsuppressed cdk-nag error) is returned with the
// validation report's findings.
func synthWithNag(t *testing.T, v nagVariant) (_ *BuyflowStack, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			msg := fmt.Sprint(r)
			if m := reportPathRE.FindStringSubmatch(msg); m != nil {
				if report, rerr := os.ReadFile(m[1]); rerr == nil {
					msg += "\n" + string(report)
				}
			}
			err = fmt.Errorf("synth: %s", msg)
		}
	}()
	ctx := cdkContext(t)
	ctx[CtxAssetRoot] = fakeAssets(t, topology.App)
	ctx["aws:cdk:disable-version-reporting"] = true
	for k, val := range v.extra {
		ctx[k] = val
	}
	app := awscdk.NewApp(&awscdk.AppProps{Context: &ctx, Outdir: jsii.String(t.TempDir())})
	cfg, err := ConfigFromContext(app.Node())
	if err != nil {
		return nil, err
	}
	stack, err := NewBuyflowStack(app, cfg.StackName, &BuyflowStackProps{
		StackProps: awscdk.StackProps{Env: v.env}, App: &topology.App, Definition: statemachine.Definition, CampaignDefinition: statemachine.CampaignDefinition, Config: cfg,
	})
	if err != nil {
		return nil, err
	}
	if v.mutate != nil {
		v.mutate(stack)
	}
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(nil), nil)
	app.Synth(nil)
	return stack, nil
}

// nagFindings lists cdk-nag's errors and warnings. The Go binding marks every field of
// cxapi.SynthesisMessage deprecated (its definition moved to @aws-cdk/cloud-assembly-api, which
// has no Go binding), so the reads below are exempt from staticcheck's SA1019.
func nagFindings(stack awscdk.Stack) (errs, warns []string) {
	ann := assertions.Annotations_FromStack(stack)
	awsSolutions := assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*"))
	for _, m := range *ann.FindError(jsii.String("*"), awsSolutions) {
		errs = append(errs, fmt.Sprintf("%s: %v", *m.Id, m.Entry.Data)) //nolint:staticcheck // see above
	}
	for _, m := range *ann.FindWarning(jsii.String("*"), awsSolutions) {
		warns = append(warns, fmt.Sprintf("%s: %v", *m.Id, m.Entry.Data)) //nolint:staticcheck // see above
	}
	return errs, warns
}

// TestAwsSolutionsNag: the prod and dev stacks (and the other variants) pass every cdk-nag
// AwsSolutions rule, with no unsuppressed error or warning.
func TestAwsSolutionsNag(t *testing.T) {
	for _, v := range nagVariants {
		t.Run(v.name, func(t *testing.T) {
			stack, err := synthWithNag(t, v)
			if err != nil {
				t.Fatal(err)
			}
			errs, warns := nagFindings(stack.Stack)
			for _, e := range errs {
				t.Errorf("unsuppressed cdk-nag error %s", e)
			}
			for _, w := range warns {
				t.Errorf("unsuppressed cdk-nag warning %s", w)
			}
		})
	}
}

// TestNagCatchesAViolation proves the check above can fail: a secret without rotation and
// without a suppression fails synth with cdk.json's flags, and is an AwsSolutions-SMG4 error
// annotation when annotations stay out of the validation report.
func TestNagCatchesAViolation(t *testing.T) {
	unrotated := func(b *BuyflowStack) {
		awssecretsmanager.NewSecret(b.Stack, jsii.String("Unrotated"), nil)
	}
	if _, err := synthWithNag(t, nagVariant{name: "violation", mutate: unrotated}); err == nil || !strings.Contains(err.Error(), "AwsSolutions-SMG4") {
		t.Errorf("an unsuppressed AwsSolutions-SMG4 did not fail synth: err = %v", err)
	}
	stack, err := synthWithNag(t, nagVariant{
		name: "violation-annotated", mutate: unrotated,
		extra: map[string]any{"@aws-cdk/core:annotationsInValidationReport": false},
	})
	if err != nil {
		t.Fatal(err)
	}
	errs, _ := nagFindings(stack.Stack)
	if len(errs) != 1 || !strings.Contains(errs[0], "AwsSolutions-SMG4") || !strings.Contains(errs[0], "Unrotated") {
		t.Errorf("FindError = %q, want the one AwsSolutions-SMG4 on Unrotated", errs)
	}
}

// suppressedRules are the AwsSolutions rules the stack may suppress (each with its reason in
// nag.go). A new kind of suppression needs a review: add it here and to README.md.
var suppressedRules = []string{"AwsSolutions-APIG4", "AwsSolutions-IAM5", "AwsSolutions-KMS5", "AwsSolutions-SF2", "AwsSolutions-SMG4", "AwsSolutions-SQS3"}

// TestNagSuppressionsAreJustified lists every suppression in the prod, configured and sandbox
// templates and checks it is one of suppressedRules, with a reason of a sentence or more.
func TestNagSuppressionsAreJustified(t *testing.T) {
	for _, v := range []nagVariant{nagVariants[0], nagVariants[3], nagVariants[4]} {
		t.Run(v.name, func(t *testing.T) {
			stack, err := synthWithNag(t, v)
			if err != nil {
				t.Fatal(err)
			}
			tpl := *assertions.Template_FromStack(stack.Stack, nil).ToJSON()
			var lines []string
			for id, raw := range tpl["Resources"].(map[string]any) {
				md, _ := raw.(map[string]any)["Metadata"].(map[string]any)
				nag, _ := md["cdk_nag"].(map[string]any)
				for _, r := range asSlice(nag["rules_to_suppress"]) {
					rule := r.(map[string]any)
					id2, _ := rule["id"].(string)
					reason, _ := rule["reason"].(string)
					if !slices.Contains(suppressedRules, id2) {
						t.Errorf("%s: suppression of %s, which is not in suppressedRules", id, id2)
					}
					if len(reason) < 40 {
						t.Errorf("%s: %s suppressed with a short reason %q", id, id2, reason)
					}
					lines = append(lines, fmt.Sprintf("%s %s %v: %s", id, id2, rule["applies_to"], reason))
				}
			}
			slices.Sort(lines)
			for _, l := range lines {
				t.Log(l)
			}
		})
	}
}
