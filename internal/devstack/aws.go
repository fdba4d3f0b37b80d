package devstack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/buyflow/buyflow/internal/apiclient"
)

// region is the region the local stack pretends to be in.
const region = "us-east-1"

// creds are the dummy credentials every local client and function uses.
var creds = aws.Credentials{AccessKeyID: "local", SecretAccessKey: "local", Source: "buyflow-local"}

// restClient calls kumo's REST-JSON APIs (Lambda, API Gateway v2) without their SDK service
// modules: kumo routes them by the SigV4 credential scope, so requests are signed.
type restClient struct {
	base string
	http *http.Client
}

func (c restClient) call(ctx context.Context, service, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("devstack: %s %s: encode: %w", method, path, err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("devstack: %s %s: %w", method, path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if err := apiclient.SignV4(credentials.StaticCredentialsProvider{Value: creds}, service, region)(req, body); err != nil {
		return fmt.Errorf("devstack: sign %s %s: %w", method, path, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("devstack: %s %s: %w", method, path, err)
	}
	defer discard(resp)
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("devstack: %s %s: read: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		return fmt.Errorf("devstack: %s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(raw))
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("devstack: %s %s: decode: %w", method, path, err)
		}
	}
	return nil
}

// createFunction registers a Lambda function in kumo and returns its ARN. kumo never runs the
// code it is given (the bootstrap runs as a process against the runtime API), so the zip is a
// stub; the environment is recorded for GetFunctionConfiguration only.
func (c restClient) createFunction(ctx context.Context, name, description string, memoryMB, timeoutSeconds int, env map[string]string) (string, error) {
	in := map[string]any{
		"FunctionName":  name,
		"Runtime":       "provided.al2023",
		"Role":          "arn:aws:iam::000000000000:role/buyflow-local-" + name,
		"Handler":       "bootstrap",
		"Code":          map[string]any{"ZipFile": stubZip},
		"Description":   description,
		"Timeout":       timeoutSeconds,
		"MemorySize":    memoryMB,
		"Architectures": []string{"x86_64"},
		"Environment":   map[string]any{"Variables": env},
	}
	var out struct {
		FunctionArn string `json:"FunctionArn"`
	}
	if err := c.call(ctx, "lambda", http.MethodPost, "/2015-03-31/functions", in, &out); err != nil {
		return "", err
	}
	if out.FunctionArn == "" {
		return "", fmt.Errorf("devstack: create function %s: no ARN in the answer", name)
	}
	return out.FunctionArn, nil
}

// updateEnvironment replaces a function's recorded environment.
func (c restClient) updateEnvironment(ctx context.Context, name string, env map[string]string) error {
	return c.call(ctx, "lambda", http.MethodPut, "/2015-03-31/functions/"+name+"/configuration",
		map[string]any{"Environment": map[string]any{"Variables": env}}, nil)
}

// stubZip is an empty zip archive (the end-of-central-directory record alone).
var stubZip = []byte{0x50, 0x4b, 0x05, 0x06, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

// httpAPI is what createHTTPAPI built.
type httpAPI struct {
	ID string
}

type apiRoute struct {
	Key, Method, Path, FunctionARN string
	IAM                            bool
}

// createHTTPAPI creates an HTTP API with one Lambda proxy integration (payload 2.0) per
// function, the routes and an auto-deployed $default stage.
func (c restClient) createHTTPAPI(ctx context.Context, name string, routes []apiRoute) (httpAPI, error) {
	var api struct {
		APIID string `json:"apiId"`
	}
	if err := c.call(ctx, "apigateway", http.MethodPost, "/v2/apis", map[string]any{"name": name, "protocolType": "HTTP"}, &api); err != nil {
		return httpAPI{}, err
	}
	integrations := map[string]string{}
	for _, r := range routes {
		if _, ok := integrations[r.FunctionARN]; ok {
			continue
		}
		var integ struct {
			IntegrationID string `json:"integrationId"`
		}
		in := map[string]any{
			"integrationType": "AWS_PROXY", "integrationUri": r.FunctionARN,
			"integrationMethod": "POST", "payloadFormatVersion": "2.0", "timeoutInMillis": 29000,
		}
		if err := c.call(ctx, "apigateway", http.MethodPost, "/v2/apis/"+api.APIID+"/integrations", in, &integ); err != nil {
			return httpAPI{}, err
		}
		integrations[r.FunctionARN] = integ.IntegrationID
	}
	for _, r := range routes {
		auth := "NONE"
		if r.IAM {
			auth = "AWS_IAM" // kumo does not enforce it; recorded as the CDK stack declares it
		}
		in := map[string]any{
			"routeKey": r.Key, "target": "integrations/" + integrations[r.FunctionARN],
			"authorizationType": auth,
		}
		if err := c.call(ctx, "apigateway", http.MethodPost, "/v2/apis/"+api.APIID+"/routes", in, nil); err != nil {
			return httpAPI{}, err
		}
	}
	if err := c.call(ctx, "apigateway", http.MethodPost, "/v2/apis/"+api.APIID+"/stages",
		map[string]any{"stageName": "$default", "autoDeploy": true}, nil); err != nil {
		return httpAPI{}, err
	}
	return httpAPI{ID: api.APIID}, nil
}
