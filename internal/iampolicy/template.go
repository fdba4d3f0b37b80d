package iampolicy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Env is the account the template is resolved for: the pseudo parameters and the account the
// ARNs of the template's own resources are built in.
type Env struct {
	Partition, Region, AccountID, StackName string
}

// SecretSuffix is the random suffix Secrets Manager appends to a secret's name in its ARN; the
// template's secrets resolve with it, as a deployed secret's ARN has one.
const SecretSuffix = "-AbCdEf"

// Template is a synthesized CloudFormation template whose IAM policies and Lambda functions
// can be read with their intrinsic functions resolved.
type Template struct {
	env       Env
	resources map[string]resource
}

type resource struct {
	Type       string         `json:"Type"`
	Properties map[string]any `json:"Properties"`
}

// ParseTemplate reads a template (JSON, as `cdk synth` writes it) for env.
func ParseTemplate(raw []byte, env Env) (*Template, error) {
	var doc struct {
		Resources map[string]resource `json:"Resources"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("iampolicy: template: %w", err)
	}
	if len(doc.Resources) == 0 {
		return nil, fmt.Errorf("iampolicy: template: no resources")
	}
	return &Template{env: env, resources: doc.Resources}, nil
}

// Env returns the account the template is resolved for.
func (t *Template) Env() Env { return t.env }

// physicalName is the name a resource gets: its name property, else its logical id (what
// CloudFormation generates is unknown before a deploy, and the logical id is as unique).
func (t *Template) physicalName(id string) string {
	r := t.resources[id]
	for _, k := range []string{"TableName", "Name", "StateMachineName", "FunctionName", "LogGroupName", "QueueName", "RoleName"} {
		if s, ok := r.Properties[k].(string); ok && s != "" {
			return s
		}
	}
	return id
}

func (t *Template) arn(service, rest string) string {
	return "arn:" + t.env.Partition + ":" + service + ":" + t.env.Region + ":" + t.env.AccountID + ":" + rest
}

// ref is what {"Ref": id} returns for the resource types buyflow's policies and functions name.
func (t *Template) ref(id string) (string, error) {
	switch id {
	case "AWS::Partition":
		return t.env.Partition, nil
	case "AWS::Region":
		return t.env.Region, nil
	case "AWS::AccountId":
		return t.env.AccountID, nil
	case "AWS::StackName":
		return t.env.StackName, nil
	case "AWS::URLSuffix":
		return "amazonaws.com", nil
	}
	r, ok := t.resources[id]
	if !ok {
		return "", fmt.Errorf("iampolicy: Ref to %s, which the template does not have", id)
	}
	name := t.physicalName(id)
	switch r.Type {
	case "AWS::SecretsManager::Secret":
		return t.arn("secretsmanager", "secret:"+name+SecretSuffix), nil
	case "AWS::StepFunctions::StateMachine":
		return t.arn("states", "stateMachine:"+name), nil
	case "AWS::SQS::Queue":
		return "https://sqs." + t.env.Region + ".amazonaws.com/" + t.env.AccountID + "/" + name, nil
	}
	return name, nil
}

// getAtt is what {"Fn::GetAtt": [id, attr]} returns.
func (t *Template) getAtt(id, attr string) (string, error) {
	r, ok := t.resources[id]
	if !ok {
		return "", fmt.Errorf("iampolicy: Fn::GetAtt of %s, which the template does not have", id)
	}
	name := t.physicalName(id)
	switch r.Type + "." + attr {
	case "AWS::DynamoDB::Table.Arn":
		return t.arn("dynamodb", "table/"+name), nil
	case "AWS::DynamoDB::Table.StreamArn":
		return t.arn("dynamodb", "table/"+name+"/stream/"+StreamLabel), nil
	case "AWS::Events::EventBus.Arn":
		return t.arn("events", "event-bus/"+name), nil
	case "AWS::Logs::LogGroup.Arn":
		return t.arn("logs", "log-group:"+name+":*"), nil
	case "AWS::SQS::Queue.Arn":
		return t.arn("sqs", name), nil
	case "AWS::Lambda::Function.Arn":
		return t.arn("lambda", "function:"+name), nil
	case "AWS::IAM::Role.Arn":
		return "arn:" + t.env.Partition + ":iam::" + t.env.AccountID + ":role/" + name, nil
	case "AWS::StepFunctions::StateMachine.Arn":
		return t.arn("states", "stateMachine:"+name), nil
	case "AWS::KMS::Key.Arn":
		return t.arn("kms", "key/"+name), nil
	}
	return "", fmt.Errorf("iampolicy: Fn::GetAtt %s.%s (%s) is not modelled", id, attr, r.Type)
}

// StreamLabel is the stream label the ledger's stream ARN resolves with.
const StreamLabel = "local"

// Resolve returns v with its intrinsic functions evaluated: a string, or a []any of them.
func (t *Template) Resolve(v any) (any, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case []any:
		out := make([]any, 0, len(x))
		for _, e := range x {
			r, err := t.Resolve(e)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, nil
	case map[string]any:
		if len(x) != 1 {
			return nil, fmt.Errorf("iampolicy: %v is not an intrinsic function", x)
		}
		for fn, arg := range x {
			return t.intrinsic(fn, arg)
		}
	}
	return nil, fmt.Errorf("iampolicy: cannot resolve %T %v", v, v)
}

// ResolveString resolves v to one string.
func (t *Template) ResolveString(v any) (string, error) {
	r, err := t.Resolve(v)
	if err != nil {
		return "", err
	}
	s, ok := r.(string)
	if !ok {
		return "", fmt.Errorf("iampolicy: %v resolves to a list, not a string", v)
	}
	return s, nil
}

func (t *Template) intrinsic(fn string, arg any) (any, error) {
	args, _ := arg.([]any)
	switch fn {
	case "Ref":
		id, _ := arg.(string)
		return t.ref(id)
	case "Fn::GetAtt":
		if len(args) != 2 {
			return nil, fmt.Errorf("iampolicy: Fn::GetAtt %v", arg)
		}
		id, _ := args[0].(string)
		attr, _ := args[1].(string)
		return t.getAtt(id, attr)
	case "Fn::Join":
		if len(args) != 2 {
			return nil, fmt.Errorf("iampolicy: Fn::Join %v", arg)
		}
		sep, _ := args[0].(string)
		parts, err := t.strings(args[1])
		if err != nil {
			return nil, err
		}
		return strings.Join(parts, sep), nil
	case "Fn::Split":
		if len(args) != 2 {
			return nil, fmt.Errorf("iampolicy: Fn::Split %v", arg)
		}
		sep, _ := args[0].(string)
		s, err := t.ResolveString(args[1])
		if err != nil {
			return nil, err
		}
		var out []any
		for _, p := range strings.Split(s, sep) {
			out = append(out, p)
		}
		return out, nil
	case "Fn::Select":
		if len(args) != 2 {
			return nil, fmt.Errorf("iampolicy: Fn::Select %v", arg)
		}
		i, ok := args[0].(float64)
		list, err := t.strings(args[1])
		if err != nil {
			return nil, err
		}
		if !ok || int(i) < 0 || int(i) >= len(list) {
			return nil, fmt.Errorf("iampolicy: Fn::Select %v out of range", args[0])
		}
		return list[int(i)], nil
	}
	return nil, fmt.Errorf("iampolicy: intrinsic function %s is not modelled", fn)
}

func (t *Template) strings(v any) ([]string, error) {
	r, err := t.Resolve(v)
	if err != nil {
		return nil, err
	}
	list, ok := r.([]any)
	if !ok {
		return nil, fmt.Errorf("iampolicy: %v is not a list", v)
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("iampolicy: %v holds a nested list", v)
		}
		out = append(out, s)
	}
	return out, nil
}

// RolePolicy returns the statements of every AWS::IAM::Policy attached to the role with
// logical id role (the only kind of policy buyflow's roles have: infra's tests forbid managed
// and inline role policies), in a stable order.
func (t *Template) RolePolicy(role string) (Policy, error) {
	var ids []string
	for id, r := range t.resources {
		if r.Type != "AWS::IAM::Policy" {
			continue
		}
		for _, ref := range asList(r.Properties["Roles"]) {
			if m, ok := ref.(map[string]any); ok && m["Ref"] == role {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	var out Policy
	for _, id := range ids {
		doc, _ := t.resources[id].Properties["PolicyDocument"].(map[string]any)
		for i, raw := range asList(doc["Statement"]) {
			m, ok := raw.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("iampolicy: %s statement %d is not an object", id, i)
			}
			s, err := t.statement(m)
			if err != nil {
				return nil, fmt.Errorf("iampolicy: %s statement %d: %w", id, i, err)
			}
			s.Source = fmt.Sprintf("%s[%d]", id, i)
			out = append(out, s)
		}
	}
	return out, nil
}

func (t *Template) statement(m map[string]any) (Statement, error) {
	var s Statement
	s.Effect, _ = m["Effect"].(string)
	if s.Effect != "Allow" && s.Effect != "Deny" {
		return s, fmt.Errorf("effect %q", m["Effect"])
	}
	for key, dst := range map[string]*[]string{"Action": &s.Action, "NotAction": &s.NotAction, "Resource": &s.Resource, "NotResource": &s.NotResource} {
		if m[key] == nil {
			continue
		}
		vals, err := t.resolveList(m[key])
		if err != nil {
			return s, fmt.Errorf("%s: %w", key, err)
		}
		*dst = vals
	}
	if len(s.Action) == 0 && len(s.NotAction) == 0 {
		return s, fmt.Errorf("no Action or NotAction")
	}
	if cond, ok := m["Condition"].(map[string]any); ok {
		s.Condition = map[string]map[string][]string{}
		for op, kv := range cond {
			if err := checkOperator(op); err != nil {
				return s, err
			}
			keys, _ := kv.(map[string]any)
			s.Condition[op] = map[string][]string{}
			for k, v := range keys {
				vals, err := t.resolveList(v)
				if err != nil {
					return s, fmt.Errorf("condition %s %s: %w", op, k, err)
				}
				s.Condition[op][k] = vals
			}
		}
	}
	return s, nil
}

// resolveList resolves a policy value that is one string or a list of them.
func (t *Template) resolveList(v any) ([]string, error) {
	var out []string
	for _, e := range asList(v) {
		r, err := t.Resolve(e)
		if err != nil {
			return nil, err
		}
		switch x := r.(type) {
		case string:
			out = append(out, x)
		case bool:
			out = append(out, fmt.Sprint(x))
		default:
			return nil, fmt.Errorf("%v resolves to %T", e, r)
		}
	}
	return out, nil
}

func asList(v any) []any {
	switch x := v.(type) {
	case nil:
		return nil
	case []any:
		return x
	case bool:
		return []any{fmt.Sprint(x)}
	}
	return []any{v}
}

// Function is one Lambda function of the template: its role and environment, resolved.
type Function struct {
	LogicalID, Role string
	Env             map[string]string
}

// Function returns the Lambda function whose logical id is the construct id prefix (infra
// names each function's construct <Pascal(name)>Function) followed by CDK's 8-hex-digit hash.
func (t *Template) Function(constructID string) (Function, error) {
	var found []string
	for id, r := range t.resources {
		if r.Type != "AWS::Lambda::Function" {
			continue
		}
		hash, ok := strings.CutPrefix(id, constructID)
		if ok && len(hash) == 8 && strings.Trim(hash, "0123456789ABCDEF") == "" {
			found = append(found, id)
		}
	}
	if len(found) != 1 {
		return Function{}, fmt.Errorf("iampolicy: %d Lambda functions with construct id %s in the template", len(found), constructID)
	}
	id := found[0]
	p := t.resources[id].Properties
	role, ok := p["Role"].(map[string]any)
	ga, _ := role["Fn::GetAtt"].([]any)
	if !ok || len(ga) != 2 {
		return Function{}, fmt.Errorf("iampolicy: function %s: role %v is not a role of the template", id, p["Role"])
	}
	fn := Function{LogicalID: id, Env: map[string]string{}}
	fn.Role, _ = ga[0].(string)
	envProp, _ := p["Environment"].(map[string]any)
	vars, _ := envProp["Variables"].(map[string]any)
	for k, v := range vars {
		s, err := t.ResolveString(v)
		if err != nil {
			return Function{}, fmt.Errorf("iampolicy: function %s: %s: %w", id, k, err)
		}
		fn.Env[k] = s
	}
	return fn, nil
}

// StateMachineRole returns the logical id of the role of the state machine named name.
func (t *Template) StateMachineRole(name string) (string, error) {
	for id, r := range t.resources {
		if r.Type != "AWS::StepFunctions::StateMachine" || t.physicalName(id) != name {
			continue
		}
		role, _ := r.Properties["RoleArn"].(map[string]any)
		if ga, ok := role["Fn::GetAtt"].([]any); ok && len(ga) == 2 {
			if id, ok := ga[0].(string); ok {
				return id, nil
			}
		}
		return "", fmt.Errorf("iampolicy: state machine %s: role %v is not a role of the template", name, r.Properties["RoleArn"])
	}
	return "", fmt.Errorf("iampolicy: no state machine named %s in the template", name)
}

// RemoveStatement returns raw (a synthesized template) with the statement source names
// (`<policy logical id>[<index>]`, as Statement.Source has it) taken out of its policy: the
// template a build of the stack without that one grant would synthesize.
func RemoveStatement(raw []byte, source string) ([]byte, error) {
	id, rest, ok := strings.Cut(source, "[")
	idx, err := strconv.Atoi(strings.TrimSuffix(rest, "]"))
	if !ok || err != nil || !strings.HasSuffix(rest, "]") || idx < 0 {
		return nil, fmt.Errorf("iampolicy: %q does not name a statement (<policy id>[<index>])", source)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("iampolicy: template: %w", err)
	}
	resources, _ := doc["Resources"].(map[string]any)
	res, _ := resources[id].(map[string]any)
	props, _ := res["Properties"].(map[string]any)
	pd, _ := props["PolicyDocument"].(map[string]any)
	stmts := asList(pd["Statement"])
	if res == nil || res["Type"] != "AWS::IAM::Policy" || idx >= len(stmts) {
		return nil, fmt.Errorf("iampolicy: the template has no statement %s", source)
	}
	pd["Statement"] = slices.Delete(slices.Clone(stmts), idx, idx+1)
	return json.Marshal(doc)
}
