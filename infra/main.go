// Command infra is the buyflow CDK app: `cdk synth` / `cdk deploy` run it (cdk.json builds it
// to bin/infra first). It reads the buyflow:* context keys (see config.go and README.md),
// builds one stack from internal/topology and the ASL in statemachine/, checks it with cdk-nag's
// AwsSolutions rules, and synthesizes it.
//
// Nothing imports this package: Lambdas must never link CDK.
package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"

	"github.com/buyflow/buyflow/internal/topology"
	"github.com/buyflow/buyflow/statemachine"
)

func main() {
	err := run()
	jsii.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "infra:", err)
		os.Exit(1)
	}
}

func run() error {
	app := awscdk.NewApp(nil)
	cfg, err := ConfigFromContext(app.Node())
	if err != nil {
		return err
	}
	_, err = NewBuyflowStack(app, cfg.StackName, &BuyflowStackProps{
		StackProps: awscdk.StackProps{Env: env(), Description: jsii.String("buyflow: AdCP media buys (" + topology.App.StateMachineName + ")")},
		App:        &topology.App,
		Definition: statemachine.Definition, CampaignDefinition: statemachine.CampaignDefinition,
		Config: cfg,
	})
	if err != nil {
		return err
	}
	// cdk-nag: every AwsSolutions rule, on everything in the app. With cdk.json's
	// @aws-cdk/core:annotationsInValidationReport, an unsuppressed error fails the synth (the
	// suppressions, each with its reason, are in nag.go and next to their constructs).
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(nil), nil)
	app.Synth(nil)
	return nil
}

// env pins the stack to the CLI's account and region when they are known, and leaves it
// environment-agnostic otherwise (offline synth).
func env() *awscdk.Environment {
	account, region := os.Getenv("CDK_DEFAULT_ACCOUNT"), os.Getenv("CDK_DEFAULT_REGION")
	if account == "" || region == "" {
		return nil
	}
	return &awscdk.Environment{Account: jsii.String(account), Region: jsii.String(region)}
}
