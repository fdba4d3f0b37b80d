package devstack

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
)

// Deployed is what the emulator holds after Start, read back through its own APIs, so a test
// can compare it with internal/topology and statemachine (the CDK stack's test does the same
// with the synthesized template).
type Deployed struct {
	// Functions maps each function name to its ARN and the sorted names of its environment
	// variables.
	Functions map[string]deployedFunction
	// Routes maps each route key ("POST /v1/media-buys") to its integration.
	Routes map[string]deployedRoute
	// Definition is the state machine's ASL as the emulator stores it.
	Definition string
}

// deployedFunction is one function as the emulator records it.
type deployedFunction struct {
	ARN string
	Env []string
}

// deployedRoute is one route and its integration.
type deployedRoute struct {
	FunctionARN          string
	PayloadFormatVersion string
	AuthorizationType    string
}

type integration struct {
	IntegrationID        string `json:"integrationId"`
	IntegrationURI       string `json:"integrationUri"`
	PayloadFormatVersion string `json:"payloadFormatVersion"`
}

// Deployed reads back the functions, routes and state machine definition.
func (s *Stack) Deployed(ctx context.Context) (Deployed, error) {
	out := Deployed{Functions: map[string]deployedFunction{}, Routes: map[string]deployedRoute{}}
	var fns struct {
		Functions []struct {
			FunctionName string `json:"FunctionName"`
			FunctionArn  string `json:"FunctionArn"`
			Environment  *struct {
				Variables map[string]string `json:"Variables"`
			} `json:"Environment"`
		} `json:"Functions"`
	}
	if err := s.rest.call(ctx, "lambda", http.MethodGet, "/2015-03-31/functions", nil, &fns); err != nil {
		return Deployed{}, err
	}
	for _, f := range fns.Functions {
		df := deployedFunction{ARN: f.FunctionArn}
		if f.Environment != nil {
			df.Env = sortedKeys(f.Environment.Variables)
		}
		out.Functions[f.FunctionName] = df
	}
	var integ struct {
		Items []integration `json:"items"`
	}
	if err := s.rest.call(ctx, "apigateway", http.MethodGet, "/v2/apis/"+s.APIID+"/integrations", nil, &integ); err != nil {
		return Deployed{}, err
	}
	var routes struct {
		Items []struct {
			RouteKey          string `json:"routeKey"`
			Target            string `json:"target"`
			AuthorizationType string `json:"authorizationType"`
		} `json:"items"`
	}
	if err := s.rest.call(ctx, "apigateway", http.MethodGet, "/v2/apis/"+s.APIID+"/routes", nil, &routes); err != nil {
		return Deployed{}, err
	}
	for _, r := range routes.Items {
		i := slices.IndexFunc(integ.Items, func(it integration) bool { return "integrations/"+it.IntegrationID == r.Target })
		if i < 0 {
			return Deployed{}, fmt.Errorf("devstack: route %s targets %s, which is not an integration", r.RouteKey, r.Target)
		}
		out.Routes[r.RouteKey] = deployedRoute{FunctionARN: integ.Items[i].IntegrationURI,
			PayloadFormatVersion: integ.Items[i].PayloadFormatVersion, AuthorizationType: r.AuthorizationType}
	}
	sm, err := s.sfn.DescribeStateMachine(ctx, &sfn.DescribeStateMachineInput{StateMachineArn: aws.String(s.StateMachineARN)})
	if err != nil {
		return Deployed{}, fmt.Errorf("devstack: describe state machine: %w", err)
	}
	out.Definition = aws.ToString(sm.Definition)
	return out, nil
}
