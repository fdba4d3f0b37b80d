package iampolicy

import (
	"slices"
	"strings"
	"testing"
)

var testEnv = Env{Partition: "aws", Region: "us-east-1", AccountID: "123456789012", StackName: "Buyflow"}

// testTemplate has the shapes the synthesized buyflow stack uses.
const testTemplate = `{"Resources": {
  "LedgerB7379752": {"Type": "AWS::DynamoDB::Table", "Properties": {}},
  "Slack738A1058": {"Type": "AWS::SecretsManager::Secret", "Properties": {"Name": "Buyflow/slack"}},
  "NotifyRoleB73FE60E": {"Type": "AWS::IAM::Role", "Properties": {}},
  "NotifyFunction0D8C391B": {"Type": "AWS::Lambda::Function", "Properties": {
    "Role": {"Fn::GetAtt": ["NotifyRoleB73FE60E", "Arn"]},
    "Environment": {"Variables": {
      "BUYFLOW_TABLE_NAME": {"Ref": "LedgerB7379752"},
      "BUYFLOW_SLACK_SECRET": {"Fn::Select": [0, {"Fn::Split": ["-", {"Fn::Select": [6, {"Fn::Split": [":", {"Ref": "Slack738A1058"}]}]}]}]},
      "BUYFLOW_STATE_MACHINE_ARN": {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, ":states:", {"Ref": "AWS::Region"}, ":", {"Ref": "AWS::AccountId"}, ":stateMachine:Buyflow-MediaBuy"]]}
    }}}},
  "NotifyRoleDefaultPolicyBF67238D": {"Type": "AWS::IAM::Policy", "Properties": {
    "Roles": [{"Ref": "NotifyRoleB73FE60E"}],
    "PolicyDocument": {"Statement": [
      {"Action": ["dynamodb:GetItem", "dynamodb:Query"], "Effect": "Allow", "Resource": [{"Fn::GetAtt": ["LedgerB7379752", "Arn"]}, {"Fn::Join": ["", [{"Fn::GetAtt": ["LedgerB7379752", "Arn"]}, "/index/gsi1"]]}]},
      {"Action": "secretsmanager:GetSecretValue", "Effect": "Allow", "Resource": {"Ref": "Slack738A1058"}},
      {"Action": "dynamodb:Query", "Effect": "Deny", "Resource": "*", "Condition": {"Bool": {"aws:SecureTransport": false}}}
    ]}}},
  "OtherPolicy": {"Type": "AWS::IAM::Policy", "Properties": {"Roles": [{"Ref": "OtherRole"}],
    "PolicyDocument": {"Statement": [{"Action": "dynamodb:Scan", "Effect": "Allow", "Resource": "*"}]}}}
}}`

func TestTemplateResolvesTheStackShapes(t *testing.T) {
	tpl, err := ParseTemplate([]byte(testTemplate), testEnv)
	if err != nil {
		t.Fatal(err)
	}
	fn, err := tpl.Function("NotifyFunction")
	if err != nil {
		t.Fatal(err)
	}
	if fn.Role != "NotifyRoleB73FE60E" {
		t.Errorf("role %s", fn.Role)
	}
	want := map[string]string{
		"BUYFLOW_TABLE_NAME":        "LedgerB7379752",
		"BUYFLOW_SLACK_SECRET":      "Buyflow/slack",
		"BUYFLOW_STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:Buyflow-MediaBuy",
	}
	for k, v := range want {
		if fn.Env[k] != v {
			t.Errorf("%s = %q, want %q", k, fn.Env[k], v)
		}
	}
	pol, err := tpl.RolePolicy(fn.Role)
	if err != nil {
		t.Fatal(err)
	}
	if len(pol) != 3 {
		t.Fatalf("%d statements, want the role's 3 (not the other role's): %+v", len(pol), pol)
	}
	table := "arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752"
	if !slices.Equal(pol[0].Resource, []string{table, table + "/index/gsi1"}) {
		t.Errorf("resources %v", pol[0].Resource)
	}
	if pol[1].Source != "NotifyRoleDefaultPolicyBF67238D[1]" {
		t.Errorf("source %s", pol[1].Source)
	}
	secret := "arn:aws:secretsmanager:us-east-1:123456789012:secret:Buyflow/slack" + SecretSuffix
	if d := pol.Evaluate(Request{Action: "secretsmanager:GetSecretValue", Resource: secret}); !d.Allowed {
		t.Errorf("the Slack secret is denied")
	}
	if d := pol.Evaluate(Request{Action: "dynamodb:Query", Resource: table + "/index/gsi1", Context: map[string][]string{"aws:SecureTransport": {"false"}}}); d.Allowed {
		t.Errorf("the Deny with a Bool condition did not apply")
	}
	if d := pol.Evaluate(Request{Action: "dynamodb:Query", Resource: table + "/index/gsi1", Context: map[string][]string{"aws:SecureTransport": {"true"}}}); !d.Allowed {
		t.Errorf("the index query is denied")
	}
}

// TestTemplateResolvesTheSigningKey: the request-signing KMS key's ARN resolves in a grant and
// in the environment variable that names it, so kms:Sign on it is checked like any call.
func TestTemplateResolvesTheSigningKey(t *testing.T) {
	tpl, err := ParseTemplate([]byte(`{"Resources": {
  "RequestSigningKeyA1": {"Type": "AWS::KMS::Key", "Properties": {}},
  "CreateRole": {"Type": "AWS::IAM::Role", "Properties": {}},
  "CreateFunction0D8C391C": {"Type": "AWS::Lambda::Function", "Properties": {"Role": {"Fn::GetAtt": ["CreateRole", "Arn"]},
    "Environment": {"Variables": {"BUYFLOW_SIGNING_KEY": {"Fn::Join": ["", ["kms:", {"Fn::GetAtt": ["RequestSigningKeyA1", "Arn"]}]]}}}}},
  "CreatePolicy": {"Type": "AWS::IAM::Policy", "Properties": {"Roles": [{"Ref": "CreateRole"}],
    "PolicyDocument": {"Statement": [{"Action": ["kms:Sign", "kms:GetPublicKey"], "Effect": "Allow", "Resource": {"Fn::GetAtt": ["RequestSigningKeyA1", "Arn"]}}]}}}
}}`), testEnv)
	if err != nil {
		t.Fatal(err)
	}
	fn, err := tpl.Function("CreateFunction")
	if err != nil {
		t.Fatal(err)
	}
	key := "arn:aws:kms:us-east-1:123456789012:key/RequestSigningKeyA1"
	if fn.Env["BUYFLOW_SIGNING_KEY"] != "kms:"+key {
		t.Fatalf("BUYFLOW_SIGNING_KEY = %q", fn.Env["BUYFLOW_SIGNING_KEY"])
	}
	pol, err := tpl.RolePolicy(fn.Role)
	if err != nil {
		t.Fatal(err)
	}
	if d := pol.Evaluate(Request{Action: "kms:Sign", Resource: key}); !d.Allowed {
		t.Error("kms:Sign on the key is denied")
	}
	if d := pol.Evaluate(Request{Action: "kms:Sign", Resource: key + "-other"}); d.Allowed {
		t.Error("kms:Sign on another key is allowed")
	}
}

func TestTemplateRefusesWhatItCannotModel(t *testing.T) {
	for name, tpl := range map[string]string{
		"unknown operator": `{"Resources": {"R": {"Type": "AWS::IAM::Role"}, "P": {"Type": "AWS::IAM::Policy", "Properties": {"Roles": [{"Ref": "R"}], "PolicyDocument": {"Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*", "Condition": {"NumericLessThan": {"s3:max-keys": "10"}}}]}}}}}`,
		"unknown function": `{"Resources": {"R": {"Type": "AWS::IAM::Role"}, "P": {"Type": "AWS::IAM::Policy", "Properties": {"Roles": [{"Ref": "R"}], "PolicyDocument": {"Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": {"Fn::Sub": "x"}}]}}}}}`,
		"missing resource": `{"Resources": {"R": {"Type": "AWS::IAM::Role"}, "P": {"Type": "AWS::IAM::Policy", "Properties": {"Roles": [{"Ref": "R"}], "PolicyDocument": {"Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": {"Ref": "Nope"}}]}}}}}`,
		"no action":        `{"Resources": {"R": {"Type": "AWS::IAM::Role"}, "P": {"Type": "AWS::IAM::Policy", "Properties": {"Roles": [{"Ref": "R"}], "PolicyDocument": {"Statement": [{"Effect": "Allow", "Resource": "*"}]}}}}}`,
	} {
		p, err := ParseTemplate([]byte(tpl), testEnv)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.RolePolicy("R"); err == nil || !strings.HasPrefix(err.Error(), "iampolicy: P statement 0") {
			t.Errorf("%s: err %v", name, err)
		}
	}
}

func TestStateMachineRole(t *testing.T) {
	tpl, err := ParseTemplate([]byte(`{"Resources": {
  "SM": {"Type": "AWS::StepFunctions::StateMachine", "Properties": {"StateMachineName": "Buyflow-MediaBuy", "RoleArn": {"Fn::GetAtt": ["SMRole", "Arn"]}}},
  "Bad": {"Type": "AWS::StepFunctions::StateMachine", "Properties": {"StateMachineName": "Buyflow-Bad", "RoleArn": "arn:aws:iam::1:role/x"}}
}}`), testEnv)
	if err != nil {
		t.Fatal(err)
	}
	if role, err := tpl.StateMachineRole("Buyflow-MediaBuy"); err != nil || role != "SMRole" {
		t.Errorf("role %q, %v", role, err)
	}
	for _, name := range []string{"Buyflow-Bad", "Buyflow-None"} {
		if _, err := tpl.StateMachineRole(name); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// A template with one statement taken out refuses what only that statement allowed, and keeps
// every other statement where it was (the sources of the others do not move before it).
func TestRemoveStatement(t *testing.T) {
	raw, err := RemoveStatement([]byte(testTemplate), "NotifyRoleDefaultPolicyBF67238D[1]")
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := ParseTemplate(raw, testEnv)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := tpl.RolePolicy("NotifyRoleB73FE60E")
	if err != nil {
		t.Fatal(err)
	}
	secret := Request{Action: "secretsmanager:GetSecretValue", Resource: "arn:aws:secretsmanager:us-east-1:123456789012:secret:Buyflow/slack" + SecretSuffix}
	if d := pol.Evaluate(secret); d.Allowed {
		t.Errorf("GetSecretValue still allowed by %s after its statement was removed", d.Statement.Source)
	}
	get := Request{Action: "dynamodb:GetItem", Resource: "arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752"}
	if d := pol.Evaluate(get); !d.Allowed || d.Statement.Source != "NotifyRoleDefaultPolicyBF67238D[0]" {
		t.Errorf("GetItem: %+v, want allowed by statement [0]", d)
	}
	for _, bad := range []string{"NotifyRoleDefaultPolicyBF67238D[3]", "NotifyRoleDefaultPolicyBF67238D", "NotifyRoleB73FE60E[0]", "NotifyRoleDefaultPolicyBF67238D[-1]", "X[1"} {
		if _, err := RemoveStatement([]byte(testTemplate), bad); err == nil {
			t.Errorf("RemoveStatement(%q) succeeded", bad)
		}
	}
}
