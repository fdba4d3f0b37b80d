package devstack

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// awsCall is one IAM question an AWS API request asks: the action and the resource it names,
// in the local stack's names (iamGate translates them to the template's).
type awsCall struct {
	Action string
	// Kind says what Resource is: "table" (a table name, or table/index), "stateMachine" or
	// "execution" (an ARN), "secret" (a name or ARN), "bus" (a name or ARN), "key" (a KMS
	// key's ARN or id), "queue" (a queue URL), or "" for an action without resource-level
	// permissions (Resource is then "*").
	Kind, Resource string
}

// errNotModelled is returned for a request whose IAM action parseAWSCall does not know: the
// gate refuses it, so a function that starts using a new API is noticed, not waved through.
var errNotModelled = errors.New("the local stack does not model this AWS API's permissions")

// maxIAMBody bounds the request body the gate reads (the largest a DynamoDB request may be).
const maxIAMBody = 16 << 20

// parseAWSCall returns the IAM questions of one JSON-protocol AWS request (target is its
// X-Amz-Target header, body its JSON body): one per resource it names, and for a DynamoDB
// transaction one per item, as IAM authorizes each item's own action.
func parseAWSCall(target string, body []byte) ([]awsCall, error) {
	prefix, op, ok := strings.Cut(target, ".")
	if !ok || op == "" {
		return nil, fmt.Errorf("X-Amz-Target %q: %w", target, errNotModelled)
	}
	var in map[string]any
	if len(body) > 0 {
		if err := json.Unmarshal(body, &in); err != nil {
			return nil, fmt.Errorf("%s: the body is not a JSON object: %w", target, err)
		}
	}
	switch prefix {
	case "DynamoDB_20120810":
		return dynamoCalls(op, in)
	case "AWSStepFunctions":
		return statesCalls(op, in)
	case "secretsmanager":
		id := str(in, "SecretId")
		if id == "" {
			return nil, fmt.Errorf("%s: no SecretId: %w", target, errNotModelled)
		}
		return []awsCall{{Action: "secretsmanager:" + op, Kind: "secret", Resource: id}}, nil
	case "TrentService":
		// KMS authorizes a call on the key it names. An alias is authorized on the key it
		// points to, which only KMS knows: the gate refuses it rather than guess.
		id := str(in, "KeyId")
		if id == "" || strings.HasPrefix(id, "alias/") || strings.Contains(id, ":alias/") {
			return nil, fmt.Errorf("%s: KeyId %q: %w", target, id, errNotModelled)
		}
		return []awsCall{{Action: "kms:" + op, Kind: "key", Resource: id}}, nil
	case "AmazonSQS":
		url := str(in, "QueueUrl")
		if url == "" {
			return nil, fmt.Errorf("%s: no QueueUrl: %w", target, errNotModelled)
		}
		// A batch is authorized as its single action (the Service Authorization Reference
		// lists no sqs:SendMessageBatch).
		action, _ := strings.CutSuffix(op, "Batch")
		return []awsCall{{Action: "sqs:" + action, Kind: "queue", Resource: url}}, nil
	case "AWSEvents":
		if op != "PutEvents" {
			return nil, fmt.Errorf("%s: %w", target, errNotModelled)
		}
		var calls []awsCall
		entries, _ := in["Entries"].([]any)
		for _, e := range entries {
			bus := str(asObject(e), "EventBusName")
			if bus == "" {
				bus = "default"
			}
			c := awsCall{Action: "events:PutEvents", Kind: "bus", Resource: bus}
			if !slices.Contains(calls, c) {
				calls = append(calls, c)
			}
		}
		if len(calls) == 0 {
			return nil, fmt.Errorf("%s: no entries: %w", target, errNotModelled)
		}
		return calls, nil
	}
	return nil, fmt.Errorf("X-Amz-Target %q: %w", target, errNotModelled)
}

// dynamoTransactActions maps a transaction item's kind to the action IAM checks for it.
var dynamoTransactActions = map[string]string{
	"Put": "dynamodb:PutItem", "Update": "dynamodb:UpdateItem", "Delete": "dynamodb:DeleteItem",
	"ConditionCheck": "dynamodb:ConditionCheckItem", "Get": "dynamodb:GetItem",
}

func dynamoCalls(op string, in map[string]any) ([]awsCall, error) {
	var calls []awsCall
	add := func(action, table, index string) {
		res := table
		if index != "" {
			res += "/index/" + index
		}
		c := awsCall{Action: action, Kind: "table", Resource: res}
		if table != "" && !slices.Contains(calls, c) {
			calls = append(calls, c)
		}
	}
	switch op {
	case "TransactWriteItems", "TransactGetItems":
		items, _ := in["TransactItems"].([]any)
		for _, it := range items {
			for kind, v := range asObject(it) {
				action, ok := dynamoTransactActions[kind]
				if !ok {
					return nil, fmt.Errorf("DynamoDB %s item %q: %w", op, kind, errNotModelled)
				}
				add(action, str(asObject(v), "TableName"), "")
			}
		}
	case "BatchGetItem", "BatchWriteItem":
		items := asObject(in["RequestItems"])
		for _, table := range sortedKeys(items) {
			add("dynamodb:"+op, table, "")
		}
	default:
		add("dynamodb:"+op, str(in, "TableName"), str(in, "IndexName"))
	}
	if len(calls) == 0 {
		return nil, fmt.Errorf("DynamoDB %s names no table: %w", op, errNotModelled)
	}
	return calls, nil
}

func statesCalls(op string, in map[string]any) ([]awsCall, error) {
	action := "states:" + op
	switch op {
	case "SendTaskSuccess", "SendTaskFailure", "SendTaskHeartbeat":
		// No resource-level permissions: the task token is the capability.
		return []awsCall{{Action: action, Resource: "*"}}, nil
	case "StartExecution", "StartSyncExecution", "DescribeStateMachine", "ListExecutions":
		if arn := str(in, "stateMachineArn"); arn != "" {
			return []awsCall{{Action: action, Kind: "stateMachine", Resource: arn}}, nil
		}
	case "DescribeExecution", "StopExecution", "GetExecutionHistory":
		if arn := str(in, "executionArn"); arn != "" {
			return []awsCall{{Action: action, Kind: "execution", Resource: arn}}, nil
		}
	}
	return nil, fmt.Errorf("states %s: %w", op, errNotModelled)
}

func asObject(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}
