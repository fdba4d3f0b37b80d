// Package modifyfn builds the modify function's use case from its Lambda environment, once per
// cold start. It is apart from modification because it links the approval policy, whose
// package links the HTTP adapters that link modification.
package modifyfn

import (
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcpschemas"
	"github.com/buyflow/buyflow/internal/approvals"
	"github.com/buyflow/buyflow/internal/awsenv"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/modification"
	"github.com/buyflow/buyflow/internal/money"
	"github.com/buyflow/buyflow/internal/secrets"
	"github.com/buyflow/buyflow/internal/stages"
	"github.com/buyflow/buyflow/internal/topology"
)

// Function is the topology name of the function that runs a change's stages.
const Function = "modify"

// thresholdPolicy asks a person for a budget increase above the approval policy's threshold:
// the amount at which a new buy needs one is the amount of new spend a change may add alone.
type thresholdPolicy struct{ threshold money.Amount }

func (p thresholdPolicy) IncreaseThreshold() money.Amount { return p.threshold }

// FromEnv builds the modify function's modification.Service from its Lambda environment, once per cold
// start: the variables topology lists for it, the embedded AdCP schemas, the agents with
// credentials from Secrets Manager, the ledger and the approval policy's threshold.
func FromEnv(getenv func(string) string) (*modification.Service, error) {
	env, err := stages.LoadEnv(Function, getenv)
	if err != nil {
		return nil, err
	}
	var policy modification.Policy
	pol, err := approvals.ParsePolicy([]byte(env[topology.EnvApprovalPolicy]))
	if err != nil {
		return nil, err
	}
	if pol.Threshold != "" {
		amt, err := money.ParseDecimal(pol.Threshold, pol.Currency)
		if err != nil {
			return nil, fmt.Errorf("config: %s threshold: %w", topology.EnvApprovalPolicy, err)
		}
		policy = thresholdPolicy{threshold: amt}
	}
	awsCfg, err := awsenv.Load(getenv)
	if err != nil {
		return nil, fmt.Errorf("load aws config: %w", err)
	}
	client, err := stages.NewAgentClient(env[topology.EnvAgentsConfig], env[topology.EnvAgentsSecretPrefix],
		secrets.New(secretsmanager.NewFromConfig(awsCfg)), adcp.NewLazyValidator(adcpschemas.FS))
	if err != nil {
		return nil, err
	}
	return modification.New(ledger.New(dynamodb.NewFromConfig(awsCfg), env[topology.EnvTableName]), client, policy,
		modification.Config{CallerURI: env[topology.EnvCallerURI], PublicBaseURL: env[topology.EnvPublicBaseURL], Now: time.Now}), nil
}
