package main

import (
	"regexp"
	"strings"

	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// cdk-nag (AwsSolutions) suppressions. Every rule the stack does not satisfy is suppressed on
// the one construct it is about, with the reason below; main.go and nag_test.go run the
// AwsSolutions checks over the whole app. README.md lists them.
const (
	reasonSendTask = "states:SendTaskSuccess/SendTaskFailure/SendTaskHeartbeat have no resource type and no condition key in the " +
		"IAM Service Authorization Reference, so they can only be granted on *; the unguessable task token (kept in the ledger) is the capability."
	reasonXRay = "xray:PutTraceSegments/PutTelemetryRecords (and GetSampling* for Step Functions) support no resource-level permissions: " +
		"X-Ray tracing needs them on *."
	reasonLogDelivery = "Step Functions logging to CloudWatch Logs needs the vended-log delivery actions (logs:CreateLogDelivery, " +
		"GetLogDelivery, ..., DescribeLogGroups, PutResourcePolicy), which support no resource-level permissions: CDK grants them on *."
	reasonAgentsPrefix = "Agent credentials are operator-created secrets referenced by name from the agent registry; the grant is " +
		"secretsmanager:GetSecretValue on this stack's <stack>/agents/* prefix only (secret ARNs also end in a random suffix)."
	reasonExecutions = "states:DescribeExecution on the executions of this stack's one state machine (execution:<stack>-MediaBuy:*): " +
		"execution names are per buy and not known at deploy time."
	reasonChildExecutions = "The Campaign state machine follows and stops the MediaBuy executions it starts for a campaign's legs " +
		"(states:DescribeExecution/StopExecution on execution:<stack>-MediaBuy:*, as StartExecution.sync requires): their names are per leg."
	reasonSchedulerInvoke = "The EventBridge Scheduler Lambda target grants lambda:InvokeFunction on the reconcile function and its " +
		"versions/aliases (<arn>:*) through fn.grantInvoke; the role is dedicated to this one schedule and this one function."
	reasonSchedulerInvokeAgents = "The EventBridge Scheduler Lambda target grants lambda:InvokeFunction on the agents function and its " +
		"versions/aliases (<arn>:*) through fn.grantInvoke; the role is dedicated to the capabilities schedule and this one function."
	reasonNoXRayStateMachine = "buyflow:tracing=false: the operator turned X-Ray off for this stack (the default is on)."
	reasonPublicRoute        = "Public by design: seller webhooks and approval links cannot sign with IAM. The function authenticates " +
		"every request itself (webhook: the per-agent RFC 9421 signature, HMAC or bearer check configured in buyflow:agents; approval: HMAC-signed, " +
		"expiring link with the <stack>/approval-link-keys key) and rejects unsigned or expired ones before any side effect."
	reasonDefaultRoute = "Public by design: the $default route answers every request no other route matches with buyflow's " +
		"404 no_route (an unsigned probe or a mistyped link included), which IAM would turn into API Gateway's bare 403. Its " +
		"function answers from the route table alone: it reads and changes nothing for such a request."
	reasonLinkSeedRotation = "Read only by CloudFormation (dynamic reference) to build the first approval-link key; no function can " +
		"read it. Rotating it would change nothing: keys rotate in <stack>/approval-link-keys."
	reasonRouteKeyRotation = "Rotated by the operator with put-secret-value: a URL sealed under the old value does not open, and its " +
		"webhooks find the operation's owner in the ledger, as before routes; a single-value rotation Lambda adds nothing to that."
	reasonLinkKeysRotation = "Rotated by the operator with put-secret-value (add a kid, switch \"current\", keep the old kid until its " +
		"links expire): links in flight must stay verifiable, which a single-value rotation Lambda would break."
	reasonSigningKeyRotation = "An asymmetric KMS key has no automatic rotation (KMS rotates symmetric keys only). The request-signing " +
		"key rotates by publishing a new key in the JWKS before it signs and keeping the old one until its signatures expire (docs/cloud-team.md)."
	reasonJWKSRoute = "Public by design: GET /v1/jwks.json serves buyflow's public request-signing keys, which every seller must be " +
		"able to fetch without AWS credentials to verify buyflow's signed requests; it reveals nothing private and changes nothing."
	reasonSlackRotation = "A Slack bot token / incoming-webhook URL is issued by Slack; Secrets Manager cannot rotate it. Rotate in " +
		"Slack and store it with put-secret-value."
)

// suppress adds one AwsSolutions suppression to c and its children (a role's default policy,
// a route's CfnRoute). cdk-nag records it on the CloudFormation resources that exist when it is
// called: call it after the grants that create a role's default policy. appliesTo narrows a granular rule (IAM4/IAM5) to these findings:
// exact strings, or /regex/ for findings that embed the account, region or a logical id.
func suppress(c constructs.IConstruct, rule, reason string, appliesTo ...string) {
	s := &cdknag.NagPackSuppression{Id: jsii.String(rule), Reason: jsii.String(reason)}
	if len(appliesTo) > 0 {
		list := make([]any, 0, len(appliesTo))
		for _, a := range appliesTo {
			if strings.HasPrefix(a, "/") {
				list = append(list, &cdknag.RegexAppliesTo{Regex: jsii.String(a)})
			} else {
				list = append(list, a)
			}
		}
		s.AppliesTo = &list
	}
	cdknag.NagSuppressions_AddResourceSuppressions(c, &[]*cdknag.NagPackSuppression{s}, jsii.Bool(true))
}

// arnFinding is the /regex/ of an IAM5 finding on an ARN this stack formats itself
// (service, resource, name as written, any partition, region and account: literal when the
// stack has an environment, <AWS::...> when it is environment-agnostic).
func arnFinding(service, resource, name string) string {
	const part = `(?:<AWS::[A-Za-z]+>|[^:<>]+)` // <AWS::Region> or eu-west-1
	return "/^Resource::arn:" + part + ":" + service + ":" + part + ":" + part + ":" + resource + ":" + regexp.QuoteMeta(name) + "$/"
}
