package devstack

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/smithy-go"

	"github.com/buyflow/buyflow/internal/signingkey"
	"github.com/buyflow/buyflow/internal/topology"
)

// gateTemplate is a template with the synthesized stack's shapes: every topology function with
// its role and environment, and the grants the tests below probe.
func gateTemplate(t *testing.T) []byte {
	t.Helper()
	join := func(parts ...any) any { return map[string]any{"Fn::Join": []any{"", parts}} }
	ref := func(id string) any { return map[string]any{"Ref": id} }
	getAtt := func(id, a string) any { return map[string]any{"Fn::GetAtt": []any{id, a}} }
	machineARN := join("arn:", ref("AWS::Partition"), ":states:", ref("AWS::Region"), ":", ref("AWS::AccountId"), ":stateMachine:Buyflow-MediaBuy")
	res := map[string]any{
		"LedgerB7379752":            map[string]any{"Type": "AWS::DynamoDB::Table", "Properties": map[string]any{}},
		"Slack738A1058":             map[string]any{"Type": "AWS::SecretsManager::Secret", "Properties": map[string]any{"Name": "Buyflow/slack"}},
		"StatusEventsB0717AAF":      map[string]any{"Type": "AWS::Events::EventBus", "Properties": map[string]any{"Name": "Buyflow-status-events"}},
		"RequestSigningKey7B8BAB5D": map[string]any{"Type": "AWS::KMS::Key", "Properties": map[string]any{}},
	}
	signingKey := getAtt("RequestSigningKey7B8BAB5D", "Arn")
	table := getAtt("LedgerB7379752", "Arn")
	grants := map[string][]any{
		"submit": {
			map[string]any{"Effect": "Allow", "Action": []any{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:Query", "dynamodb:UpdateItem"}, "Resource": []any{table, join(table, "/index/gsi1")}},
			map[string]any{"Effect": "Allow", "Action": "states:StartExecution", "Resource": machineARN},
		},
		"notify":  {map[string]any{"Effect": "Allow", "Action": "secretsmanager:GetSecretValue", "Resource": ref("Slack738A1058")}},
		"create":  {map[string]any{"Effect": "Allow", "Action": []any{"kms:Sign", "kms:GetPublicKey"}, "Resource": signingKey}},
		"webhook": {map[string]any{"Effect": "Allow", "Action": "kms:GetPublicKey", "Resource": signingKey}},
		"publish": {map[string]any{"Effect": "Allow", "Action": "events:PutEvents", "Resource": getAtt("StatusEventsB0717AAF", "Arn")}},
		"approve": {map[string]any{"Effect": "Allow", "Action": []any{"states:SendTaskSuccess", "logs:PutLogEvents"}, "Resource": "*"}},
		"reconcile": {map[string]any{"Effect": "Allow", "Action": "states:DescribeExecution",
			"Resource": join("arn:", ref("AWS::Partition"), ":states:", ref("AWS::Region"), ":", ref("AWS::AccountId"), ":execution:Buyflow-MediaBuy:*")}},
	}
	res["StateMachineRole"] = map[string]any{"Type": "AWS::IAM::Role", "Properties": map[string]any{}}
	res["StateMachine2E01A3A5"] = map[string]any{"Type": "AWS::StepFunctions::StateMachine", "Properties": map[string]any{
		"StateMachineName": "Buyflow-MediaBuy", "RoleArn": getAtt("StateMachineRole", "Arn")}}
	res["StateMachineRoleDefaultPolicy"] = map[string]any{"Type": "AWS::IAM::Policy", "Properties": map[string]any{
		"Roles": []any{ref("StateMachineRole")}, "PolicyDocument": map[string]any{"Statement": []any{
			map[string]any{"Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": getAtt("CreateFunction0A1B2C3D", "Arn")},
			map[string]any{"Effect": "Allow", "Action": "states:StartExecution", "Resource": machineARN},
		}}}}
	for _, f := range topology.App.Functions {
		id := topology.ConstructID(f.Name)
		env := map[string]any{}
		for _, name := range f.Env {
			switch name {
			case topology.EnvTableName:
				env[name] = ref("LedgerB7379752")
			case topology.EnvSlackSecret:
				env[name] = map[string]any{"Fn::Select": []any{0, map[string]any{"Fn::Split": []any{"-", map[string]any{"Fn::Select": []any{6, map[string]any{"Fn::Split": []any{":", ref("Slack738A1058")}}}}}}}}
			case topology.EnvStateMachineARN:
				env[name] = machineARN
			case topology.EnvEventBusName:
				env[name] = ref("StatusEventsB0717AAF")
			case topology.EnvAgentsSecretPrefix:
				env[name] = "Buyflow/agents/"
			case topology.EnvSigningKey:
				env[name] = join("kms:", signingKey)
			default:
				env[name] = "same"
			}
		}
		res[id+"Function0A1B2C3D"] = map[string]any{"Type": "AWS::Lambda::Function", "Properties": map[string]any{
			"Role": getAtt(id+"Role12345678", "Arn"), "Environment": map[string]any{"Variables": env}}}
		res[id+"Role12345678"] = map[string]any{"Type": "AWS::IAM::Role", "Properties": map[string]any{}}
		if g := grants[f.Name]; g != nil {
			res[id+"RoleDefaultPolicy"] = map[string]any{"Type": "AWS::IAM::Policy", "Properties": map[string]any{
				"Roles": []any{ref(id + "Role12345678")}, "PolicyDocument": map[string]any{"Statement": g}}}
		}
	}
	raw, err := json.Marshal(map[string]any{"Resources": res})
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// gateValues are the local stack's values for the same variables.
var gateValues = map[string]string{
	topology.EnvTableName:          "buyflow-ledger-1a2b",
	topology.EnvSlackSecret:        "buyflow/slack-1a2b",
	topology.EnvStateMachineARN:    "arn:aws:states:us-east-1:000000000000:stateMachine:MediaBuy-1a2b",
	topology.EnvEventBusName:       "buyflow-status-events-1a2b",
	topology.EnvAgentsSecretPrefix: AgentSecretPrefix,
	topology.EnvSigningKey:         "kms:" + localKeyARN,
}

// localKeyARN is the local stack's request-signing key (in moto's KMS).
const localKeyARN = "arn:aws:kms:us-east-1:123456789012:key/0b6f1e2a-7c9d-4e3f-a1b2-c3d4e5f60718"

func newTestGate(t *testing.T) (*IAMGate, string) {
	t.Helper()
	values := map[string]string{}
	for _, f := range topology.App.Functions {
		for _, name := range f.Env {
			values[name] = "same"
		}
	}
	for k, v := range gateValues {
		values[k] = v
	}
	g, err := newIAMGate(gateTemplate(t), values)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.admit(w, r) {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			_, _ = w.Write([]byte(`{}`))
		}
	}))
	t.Cleanup(srv.Close)
	return g, srv.URL
}

// kmsCall makes KMS call op on key at url as function fn does (signingkey.KMSClient: KMS's
// JSON protocol, SigV4-signed with fn's credentials) and returns KMS's error, or the gate's.
func kmsCall(ctx context.Context, url, fn, op, key string) error {
	c := signingkey.NewKMS(aws.Config{Region: region, BaseEndpoint: aws.String(url), Credentials: as(fn).Credentials})
	digest := make([]byte, 32)
	if op == "Sign" {
		_, err := c.Sign(ctx, key, digest)
		if err != nil && strings.Contains(err.Error(), "without a signature") {
			return nil // the test gate answers {} when it lets a call through
		}
		return err
	}
	_, err := c.GetPublicKey(ctx, key)
	return err
}

// as is the AWS configuration of function fn's processes (lambdaEnv's credentials).
func as(fn string) aws.Config {
	return aws.Config{Region: region, Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{AccessKeyID: creds.AccessKeyID + "-" + fn, SecretAccessKey: creds.SecretAccessKey}, nil
	}), RetryMaxAttempts: 1}
}

func TestIAMGateDecidesAsTheRoleDoes(t *testing.T) {
	g, url := newTestGate(t)
	ctx := context.Background()
	ep := aws.String(url)
	ddb := func(fn string) *dynamodb.Client {
		return dynamodb.NewFromConfig(as(fn), func(o *dynamodb.Options) { o.BaseEndpoint = ep })
	}
	states := func(fn string) *sfn.Client {
		return sfn.NewFromConfig(as(fn), func(o *sfn.Options) { o.BaseEndpoint = ep })
	}
	table := gateValues[topology.EnvTableName]
	key := map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "k"}}
	mediaBuy := gateValues[topology.EnvStateMachineARN]
	done := g.Track("TestA")
	for _, c := range []struct {
		name    string
		call    func() error
		allowed bool
	}{
		{"submit puts an item in the ledger", func() error {
			_, err := ddb("submit").PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: key})
			return err
		}, true},
		{"submit names the table by its ARN", func() error {
			_, err := ddb("submit").GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("arn:aws:dynamodb:us-east-1:000000000000:table/" + table), Key: key})
			return err
		}, true},
		{"submit queries an index the role names", func() error {
			_, err := ddb("submit").Query(ctx, &dynamodb.QueryInput{TableName: &table, IndexName: aws.String("gsi1")})
			return err
		}, true},
		{"submit queries an index the role does not name", func() error {
			_, err := ddb("submit").Query(ctx, &dynamodb.QueryInput{TableName: &table, IndexName: aws.String("gsi2")})
			return err
		}, false},
		{"submit deletes, which its role does not allow", func() error {
			_, err := ddb("submit").DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &table, Key: key})
			return err
		}, false},
		{"a transaction item on another table", func() error {
			_, err := ddb("submit").TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
				{Put: &ddbtypes.Put{TableName: &table, Item: key}},
				{Update: &ddbtypes.Update{TableName: aws.String("other"), Key: key, UpdateExpression: aws.String("SET a = :a")}},
			}})
			return err
		}, false},
		{"a transaction the role allows item by item", func() error {
			_, err := ddb("submit").TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []ddbtypes.TransactWriteItem{
				{Put: &ddbtypes.Put{TableName: &table, Item: key}},
				{Update: &ddbtypes.Update{TableName: &table, Key: key, UpdateExpression: aws.String("SET a = :a")}},
			}})
			return err
		}, true},
		{"notify reads the ledger with no grant on it", func() error {
			_, err := ddb("notify").GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, Key: key})
			return err
		}, false},
		{"submit starts the MediaBuy machine", func() error {
			_, err := states("submit").StartExecution(ctx, &sfn.StartExecutionInput{StateMachineArn: &mediaBuy})
			return err
		}, true},
		{"submit starts another machine", func() error {
			_, err := states("submit").StartExecution(ctx, &sfn.StartExecutionInput{StateMachineArn: aws.String("arn:aws:states:us-east-1:000000000000:stateMachine:Other")})
			return err
		}, false},
		{"reconcile describes a MediaBuy execution", func() error {
			_, err := states("reconcile").DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String("arn:aws:states:us-east-1:000000000000:execution:MediaBuy-1a2b:op1")})
			return err
		}, true},
		{"approve completes a task (no resource-level permission)", func() error {
			_, err := states("approve").SendTaskSuccess(ctx, &sfn.SendTaskSuccessInput{TaskToken: aws.String("t"), Output: aws.String("{}")})
			return err
		}, true},
		{"submit completes a task", func() error {
			_, err := states("submit").SendTaskSuccess(ctx, &sfn.SendTaskSuccessInput{TaskToken: aws.String("t"), Output: aws.String("{}")})
			return err
		}, false},
		{"notify reads the Slack secret by name", func() error {
			_, err := secretsmanager.NewFromConfig(as("notify"), func(o *secretsmanager.Options) { o.BaseEndpoint = ep }).
				GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(gateValues[topology.EnvSlackSecret])})
			return err
		}, true},
		{"notify reads an agent's secret", func() error {
			_, err := secretsmanager.NewFromConfig(as("notify"), func(o *secretsmanager.Options) { o.BaseEndpoint = ep }).
				GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(AgentSecretPrefix + "seller")})
			return err
		}, false},
		{"create signs with the signing key, named by its ARN", func() error {
			return kmsCall(ctx, url, "create", "Sign", localKeyARN)
		}, true},
		{"create reads the signing key's public half, named by its id", func() error {
			return kmsCall(ctx, url, "create", "GetPublicKey", "0b6f1e2a-7c9d-4e3f-a1b2-c3d4e5f60718")
		}, true},
		{"create signs with another key", func() error {
			return kmsCall(ctx, url, "create", "Sign", "arn:aws:kms:us-east-1:123456789012:key/other")
		}, false},
		{"webhook reads the signing key's public half", func() error {
			return kmsCall(ctx, url, "webhook", "GetPublicKey", localKeyARN)
		}, true},
		{"webhook signs, which its role does not allow", func() error {
			return kmsCall(ctx, url, "webhook", "Sign", localKeyARN)
		}, false},
		{"create names the key by an alias, which the gate cannot resolve", func() error {
			return kmsCall(ctx, url, "create", "Sign", "alias/buyflow-signing")
		}, false},
		{"publish puts events on the status bus", func() error {
			_, err := eventbridge.NewFromConfig(as("publish"), func(o *eventbridge.Options) { o.BaseEndpoint = ep }).
				PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{EventBusName: aws.String(gateValues[topology.EnvEventBusName]), Source: aws.String("s"), DetailType: aws.String("d"), Detail: aws.String("{}")}}})
			return err
		}, true},
		{"publish puts events on the default bus", func() error {
			_, err := eventbridge.NewFromConfig(as("publish"), func(o *eventbridge.Options) { o.BaseEndpoint = ep }).
				PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{{Source: aws.String("s"), DetailType: aws.String("d"), Detail: aws.String("{}")}}})
			return err
		}, false},
	} {
		err := c.call()
		var api smithy.APIError
		switch {
		case c.allowed && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case !c.allowed && (!errors.As(err, &api) || api.ErrorCode() != "AccessDeniedException" || !strings.Contains(api.ErrorMessage(), "is not authorized to perform")) &&
			// signingkey's KMS client reports KMS's error type and message in its text.
			(err == nil || !strings.Contains(err.Error(), "HTTP 400 AccessDeniedException: User: arn:aws:sts::123456789012:assumed-role/")):
			t.Errorf("%s: err %v, want AccessDeniedException as AWS words it", c.name, err)
		}
	}

	denied := DeniedError(g.Denied())
	for _, want := range []string{
		"submit: dynamodb:Query on arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752/index/gsi2",
		"submit: dynamodb:DeleteItem on arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752",
		"submit: dynamodb:UpdateItem on arn:aws:dynamodb:us-east-1:123456789012:table/other",
		"submit: states:StartExecution on arn:aws:states:us-east-1:123456789012:stateMachine:Other",
		"notify: secretsmanager:GetSecretValue on arn:aws:secretsmanager:us-east-1:123456789012:secret:Buyflow/agents/seller-AbCdEf",
		"publish: events:PutEvents on arn:aws:events:us-east-1:123456789012:event-bus/default",
		"create: kms:Sign on arn:aws:kms:us-east-1:123456789012:key/other",
		"webhook: kms:Sign on arn:aws:kms:us-east-1:123456789012:key/RequestSigningKey7B8BAB5D",
		"create: TrentService.Sign on ? (TrentService.Sign: KeyId \"alias/buyflow-signing\"",
	} {
		if denied == nil || !strings.Contains(denied.Error(), want) {
			t.Errorf("the denials do not name %q:\n%v", want, denied)
		}
	}

	done()
	// Made after TestA ended: exercised by no test.
	if _, err := ddb("submit").UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &table, Key: key, UpdateExpression: aws.String("SET a = :a")}); err != nil {
		t.Fatal(err)
	}

	const arn = "arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752"
	describe := IAMGrant{Caller: "reconcile", Action: "states:DescribeExecution", Resource: "arn:aws:states:us-east-1:123456789012:execution:Buyflow-MediaBuy:*", Statement: "ReconcileRoleDefaultPolicy[0]"}
	put := IAMGrant{Caller: "submit", Action: "dynamodb:PutItem", Resource: arn, Statement: "SubmitRoleDefaultPolicy[0]"}
	update := IAMGrant{Caller: "submit", Action: "dynamodb:UpdateItem", Resource: arn, Statement: "SubmitRoleDefaultPolicy[0]"}
	onIndex := IAMGrant{Caller: "submit", Action: "dynamodb:UpdateItem", Resource: arn + "/index/gsi1", Statement: "SubmitRoleDefaultPolicy[0]"}
	for _, c := range []struct {
		gr   IAMGrant
		want []string
	}{{describe, []string{"TestA", SuiteRun}}, {put, []string{"TestA", SuiteRun}}, {update, []string{"TestA", SuiteRun}}, {onIndex, nil}} {
		if got := g.ExercisedBy(c.gr); !slices.Equal(got, c.want) {
			t.Errorf("%s exercised by %v, want %v", c.gr.Key(), got, c.want)
		}
	}
	if !slices.Contains(g.Grants(), onIndex) || !slices.Contains(g.Grants(), describe) {
		t.Errorf("the grants lack %v or %v: %v", onIndex, describe, g.Grants())
	}

	claims := map[string]string{describe.Key(): "TestA", put.Key(): "TestA", onIndex.Key(): "TestA",
		"submit dynamodb:Scan " + arn: "TestA", update.Key(): "TestB"}
	doc, problems := g.Report(claims, map[string]string{"approve states:SendTaskSuccess *": "the path"})
	for _, want := range []string{
		"| reconcile | `states:DescribeExecution` | `arn:aws:states:us-east-1:123456789012:execution:Buyflow-MediaBuy:*` | `ReconcileRoleDefaultPolicy[0]` | `TestA` |",
		"| submit | `dynamodb:Query` | `" + arn + "/index/gsi1` | `SubmitRoleDefaultPolicy[0]` | **no test** |",
		"| approve | `logs:PutLogEvents` | `*` | `ApproveRoleDefaultPolicy[0]` | none: the service writes the logs",
		"| approve | `states:SendTaskSuccess` | `*` | `ApproveRoleDefaultPolicy[0]` | **untested**: the path |",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("the table lacks %q:\n%s", want, doc)
		}
	}
	if again, _ := g.Report(claims, map[string]string{"approve states:SendTaskSuccess *": "the path"}); again != doc {
		t.Error("the table differs between two reports of the same grants and claims")
	}
	joined := strings.Join(problems, "\n")
	for _, want := range []string{
		"no test exercises submit dynamodb:Query " + arn + "/index/gsi1",
		"TestA claims submit dynamodb:Scan " + arn + ", which no role of the template grants",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("the problems lack %q:\n%s", want, joined)
		}
	}
	if strings.Contains(joined, "approve logs:PutLogEvents") || strings.Contains(joined, describe.Key()) {
		t.Errorf("a service-side or claimed grant is a problem:\n%s", joined)
	}
	// TestA ran and never updated on the index: unproven. TestB never ran: not checked here.
	unproven := strings.Join(g.Unproven(claims), "\n")
	if !strings.Contains(unproven, "TestA claims "+onIndex.Key()) || strings.Contains(unproven, describe.Key()) || strings.Contains(unproven, "TestB") {
		t.Errorf("unproven claims:\n%s", unproven)
	}
}

func TestIAMGateWithoutStatement(t *testing.T) {
	g, url := newTestGate(t)
	client := sfn.NewFromConfig(as("submit"), func(o *sfn.Options) { o.BaseEndpoint = aws.String(url) })
	start := func() error {
		_, err := client.StartExecution(context.Background(), &sfn.StartExecutionInput{StateMachineArn: aws.String(gateValues[topology.EnvStateMachineARN])})
		return err
	}
	src, restore, err := g.WithoutStatement("submit", "states:StartExecution")
	if err != nil {
		t.Fatal(err)
	}
	if src != "SubmitRoleDefaultPolicy[1]" {
		t.Errorf("removed %s", src)
	}
	if err := start(); err == nil {
		t.Fatal("StartExecution allowed without its statement")
	}
	if d := g.Denied(); len(d) != 0 {
		t.Errorf("a provoked denial fails the suite: %v", d)
	}
	restore()
	if err := start(); err != nil {
		t.Fatalf("StartExecution after restore: %v", err)
	}
	if _, _, err := g.WithoutStatement("notify", "states:StartExecution"); err == nil {
		t.Error("removed a statement that does not exist")
	}
}

// The local Step Functions names the machine whose execution invokes a function: the
// invocation is checked against that machine's role, and refused as Lambda refuses it.
func TestIAMGateChecksTheStateMachinesInvocations(t *testing.T) {
	g, url := newTestGate(t)
	invoke := func(fn string) (status int, errType string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url+"/2015-03-31/functions/arn%3Aaws%3Alambda%3Aus-east-1%3A000000000000%3Afunction%3A"+fn+"/invocations", strings.NewReader(`{}`))
		req.Header.Set(statesCallerHeader, "states")
		req.Header.Set(statesMachineHeader, gateValues[topology.EnvStateMachineARN])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("X-Amzn-ErrorType")
	}
	if status, _ := invoke("create"); status != http.StatusOK {
		t.Errorf("the machine's invocation of create got %d", status)
	}
	if status, errType := invoke("poll"); status != http.StatusForbidden || errType != "AccessDeniedException" {
		t.Errorf("the machine's invocation of poll, which its role does not allow, got %d %s", status, errType)
	}
	want := "state machine Buyflow-MediaBuy: lambda:InvokeFunction on arn:aws:lambda:us-east-1:123456789012:function:PollFunction0A1B2C3D"
	if d := DeniedError(g.Denied()); d == nil || !strings.Contains(d.Error(), want) {
		t.Errorf("denials %v, want %q", d, want)
	}
	doc, _ := g.Report(map[string]string{"state machine Buyflow-MediaBuy lambda:InvokeFunction arn:aws:lambda:us-east-1:123456789012:function:CreateFunction0A1B2C3D": "TestB"}, nil)
	for _, row := range []string{
		"| state machine Buyflow-MediaBuy | `lambda:InvokeFunction` | `arn:aws:lambda:us-east-1:123456789012:function:CreateFunction0A1B2C3D` | `StateMachineRoleDefaultPolicy[0]` | `TestB` |",
		"| state machine Buyflow-MediaBuy | `states:StartExecution` | `arn:aws:states:us-east-1:123456789012:stateMachine:Buyflow-MediaBuy` | `StateMachineRoleDefaultPolicy[1]` | none: the local Step Functions engine",
	} {
		if !strings.Contains(doc, row) {
			t.Errorf("the table lacks %q:\n%s", row, doc)
		}
	}
}

func TestIAMGateLetsUnsignedRequestsThrough(t *testing.T) {
	_, url := newTestGate(t)
	resp, err := http.Post(url+"/2015-03-31/functions/x/invocations", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("an unsigned request (the stack's own, the engine's) got %s", resp.Status)
	}
}

func TestIAMGateRefusesWhatItCannotModel(t *testing.T) {
	g, url := newTestGate(t)
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{}`))
	req.Header.Set("X-Amz-Target", "AmazonSSM.GetParameter")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=local-submit/20260101/us-east-1/ssm/aws4_request, SignedHeaders=host, Signature=x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("X-Amzn-ErrorType") != "AccessDeniedException" {
		t.Errorf("an unmodelled API got %s %s", resp.Status, resp.Header.Get("X-Amzn-ErrorType"))
	}
	if d := DeniedError(g.Denied()); d == nil || !strings.Contains(d.Error(), "submit: AmazonSSM.GetParameter") {
		t.Errorf("denials: %v", d)
	}
}

// An SQS batch is authorized as its single action, on the queue its URL names.
func TestParseAWSCallOfSQS(t *testing.T) {
	for target, want := range map[string]string{
		"AmazonSQS.SendMessageBatch": "sqs:SendMessage", "AmazonSQS.SendMessage": "sqs:SendMessage",
		"AmazonSQS.DeleteMessageBatch": "sqs:DeleteMessage", "AmazonSQS.ReceiveMessage": "sqs:ReceiveMessage",
	} {
		calls, err := parseAWSCall(target, []byte(`{"QueueUrl":"http://h/000000000000/q"}`))
		if err != nil || len(calls) != 1 || calls[0] != (awsCall{Action: want, Kind: "queue", Resource: "http://h/000000000000/q"}) {
			t.Errorf("%s: %+v, %v; want %s on the queue", target, calls, err, want)
		}
	}
	if _, err := parseAWSCall("AmazonSQS.SendMessage", []byte(`{}`)); err == nil {
		t.Error("a call without a QueueUrl was modelled")
	}
}

func FuzzParseAWSCall(f *testing.F) {
	f.Add("DynamoDB_20120810.TransactWriteItems", `{"TransactItems":[{"Put":{"TableName":"t"}},{"Update":{"TableName":"u"}}]}`)
	f.Add("DynamoDB_20120810.Query", `{"TableName":"t","IndexName":"gsi1"}`)
	f.Add("DynamoDB_20120810.BatchGetItem", `{"RequestItems":{"a":{},"b":{}}}`)
	f.Add("AWSStepFunctions.DescribeExecution", `{"executionArn":"arn:aws:states:r:a:execution:m:id"}`)
	f.Add("AWSEvents.PutEvents", `{"Entries":[{"EventBusName":"b"},{}]}`)
	f.Add("secretsmanager.GetSecretValue", `{"SecretId":"s"}`)
	f.Add("TrentService.Sign", `{"KeyId":"arn:aws:kms:r:a:key/k","Message":"AA==","MessageType":"DIGEST"}`)
	f.Add("TrentService.GetPublicKey", `{"KeyId":"arn:aws:kms:r:a:alias/a"}`)
	f.Add("AmazonSQS.SendMessageBatch", `{"QueueUrl":"http://127.0.0.1:1/000000000000/q","Entries":[]}`)
	f.Add("x", `[`)
	f.Fuzz(func(t *testing.T, target, body string) {
		calls, err := parseAWSCall(target, []byte(body))
		if err != nil {
			if len(calls) != 0 {
				t.Fatalf("calls %v with error %v", calls, err)
			}
			return
		}
		if len(calls) == 0 {
			t.Fatal("no call and no error: the gate would let it through unchecked")
		}
		for _, c := range calls {
			if !strings.Contains(c.Action, ":") || c.Resource == "" {
				t.Fatalf("call %+v has no action or resource", c)
			}
		}
	})
}

func TestIAMGateRefusesABodyItCannotReadWhole(t *testing.T) {
	_, url := newTestGate(t)
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(strings.Repeat(" ", maxIAMBody+1)))
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.PutItem")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=local-submit/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("an oversized body got %s, want 413 (never forwarded cut)", resp.Status)
	}
}
