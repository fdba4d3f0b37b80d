package main

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/sandbox"
	"github.com/buyflow/buyflow/internal/statusevent"
	"github.com/buyflow/buyflow/internal/topology"
)

// Sandbox-only nag reasons: the sandbox is a smoke test's counterpart, deployed on purpose
// and removed after (README, "Smoke-test a deployment").
const (
	reasonSandboxSecret = "A sandbox agent's bearer token or webhook key seed, generated at deploy for a smoke test and removed " +
		"with the sandbox (deploy without buyflow:sandbox); nothing to rotate."
	reasonSandboxQueue = "The sandbox's status events, read and deleted by buyflow smoke within the hour they are kept; an event " +
		"that cannot be delivered fails the smoke's last stage, which is what the smoke is for, so no dead-letter queue."
)

// addSandbox adds, with buyflow:sandbox, the simulated agents of topology.Sandbox: each a
// function behind a public Function URL (the agents check the bearer token themselves, as
// sellers do), its token in a secret under the agents' prefix (so buyflow reads it as the
// agent's credential), and the seller's webhook key seed. It returns the agents to register,
// their URLs as tokens.
func (b *BuyflowStack) addSandbox(p *stackParts) ([]map[string]any, error) {
	if !p.cfg.Sandbox {
		return nil, nil
	}
	stack := b.Stack
	keySeedName := p.stackName + "/sandbox/webhook-key-seed"
	keySeed := awssecretsmanager.NewSecret(stack, jsii.String("SandboxWebhookKeySeed"), &awssecretsmanager.SecretProps{
		SecretName:  jsii.String(keySeedName),
		Description: jsii.String("Sandbox only: the seed of the sandbox seller's Ed25519 webhook-signing key."),
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			PasswordLength: jsii.Number(64), ExcludePunctuation: jsii.Bool(true), IncludeSpace: jsii.Bool(false),
		},
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	suppress(keySeed, "AwsSolutions-SMG4", reasonSandboxSecret)
	var agentsToSeed []map[string]any
	for _, s := range topology.Sandbox {
		cid := topology.ConstructID(s.Name)
		names := map[string]string{topology.EnvSandboxTokenSecret: p.agentsPrefix + s.Agent, topology.EnvSandboxWebhookKeySecret: keySeedName}
		token := awssecretsmanager.NewSecret(stack, jsii.String(cid+"Token"), &awssecretsmanager.SecretProps{
			SecretName:  jsii.String(names[topology.EnvSandboxTokenSecret]),
			Description: jsii.String("Sandbox only: the bearer token of the " + s.Agent + " agent (buyflow's credential for it)."),
			GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
				PasswordLength: jsii.Number(48), ExcludePunctuation: jsii.Bool(true), IncludeSpace: jsii.Bool(false),
			},
			RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
		})
		suppress(token, "AwsSolutions-SMG4", reasonSandboxSecret)
		// The environment is the function's own (which secret), so it is set here, not from
		// the stack-wide values of envValue.
		bare := s.Function
		bare.Env = nil
		fn, role, err := b.addFunction(p, bare)
		if err != nil {
			return nil, err
		}
		if p.cfg.Tracing {
			suppress(role, "AwsSolutions-IAM5", reasonXRay, "Resource::*")
		}
		b.Functions[s.Name] = fn
		secrets := map[string]awssecretsmanager.Secret{topology.EnvSandboxTokenSecret: token, topology.EnvSandboxWebhookKeySecret: keySeed}
		for _, name := range s.Env {
			sec, ok := secrets[name]
			if !ok {
				return nil, fmt.Errorf("infra: sandbox function %s: no value for %s", s.Name, name)
			}
			// The name as given: SecretName() renders as a split of the secret's ARN.
			fn.AddEnvironment(jsii.String(name), jsii.String(names[name]), nil)
			sec.GrantRead(fn, nil)
		}
		url := fn.AddFunctionUrl(&awslambda.FunctionUrlOptions{AuthType: awslambda.FunctionUrlAuthType_NONE})
		agent := map[string]any{
			"id": s.Agent, "role": s.Role, "credential_ref": p.agentsPrefix + s.Agent,
			"mcp_url": awscdk.Fn_Join(jsii.String(""), &[]*string{url.Url(), jsii.String("mcp")}),
		}
		if s.Role == string(adcp.RoleSeller) {
			agent["webhook"] = map[string]any{"mode": "rfc9421",
				"jwks_uri": awscdk.Fn_Join(jsii.String(""), &[]*string{url.Url(), jsii.String(strings.TrimPrefix(sandbox.JWKSPath, "/"))})}
		}
		agentsToSeed = append(agentsToSeed, agent)
		awscdk.NewCfnOutput(stack, jsii.String(cid+"Url"), &awscdk.CfnOutputProps{
			Value: url.Url(), Description: jsii.String("Sandbox only: the " + s.Agent + " agent's Function URL"),
		})
	}
	b.addSandboxEvents(p)
	return agentsToSeed, nil
}

// addSandboxEvents sends the status events of the buys at the sandbox seller to a queue of the
// sandbox's own, from which `buyflow smoke --events <SandboxEventsQueueUrl>` reads them: the
// bus seen from a terminal, without touching the team's own rules.
func (b *BuyflowStack) addSandboxEvents(p *stackParts) {
	stack := b.Stack
	q := awssqs.NewQueue(stack, jsii.String("SandboxEvents"), &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: awscdk.Duration_Hours(jsii.Number(1)),
		RemovalPolicy:   awscdk.RemovalPolicy_DESTROY,
	})
	suppress(q, "AwsSolutions-SQS3", reasonSandboxQueue)
	awsevents.NewRule(stack, jsii.String("SandboxEventsRule"), &awsevents.RuleProps{
		EventBus:    b.EventBus,
		Description: jsii.String("Sandbox only: the status events of buys at the sandbox seller, for buyflow smoke"),
		EventPattern: &awsevents.EventPattern{
			Source: jsii.Strings(statusevent.Source), Detail: &map[string]any{"seller_id": []string{topology.SandboxSellerAgent}},
		},
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewSqsQueue(q, nil)},
	})
	awscdk.NewCfnOutput(stack, jsii.String("SandboxEventsQueueUrl"), &awscdk.CfnOutputProps{
		Value: q.QueueUrl(), Description: jsii.String("Sandbox only: buyflow smoke --events reads the status events here"),
	})
}

// seedDocument is the agents seed of the deploy: the context's agents and the sandbox's. A
// stack without a sandbox seeds the context's document as it is.
func seedDocument(stack awscdk.Stack, contextAgents string, sandboxAgents []map[string]any) (*string, error) {
	if len(sandboxAgents) == 0 {
		return jsii.String(contextAgents), nil
	}
	var doc struct {
		Agents []any `json:"agents"`
	}
	if s := strings.TrimSpace(contextAgents); s != "" {
		if err := json.Unmarshal([]byte(s), &doc); err != nil {
			return nil, fmt.Errorf("infra: context %s: %w", CtxAgents, err)
		}
	}
	for _, a := range sandboxAgents {
		doc.Agents = append(doc.Agents, a)
	}
	// The URLs are tokens: ToJsonString renders the document as an Fn::Join CloudFormation
	// resolves at deploy.
	return stack.ToJsonString(map[string]any{"agents": doc.Agents}, nil), nil
}
