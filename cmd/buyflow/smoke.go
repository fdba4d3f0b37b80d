package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"regexp"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"

	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/smoke"
)

// exitSmokeFailed is a smoke run that ran but did not see every stage.
const exitSmokeFailed = 8

// smokeFailed is returned by smoke when a stage was not reached; the diagnosis is printed.
type smokeFailed struct{ stage string }

func (f smokeFailed) Error() string { return "smoke: the buy did not reach " + f.stage }

// smoke runs one buy at the sandbox agents and prints each stage with its time, then the
// diagnosis of the first stage not reached.
func (c cli) smoke(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("smoke", flag.ContinueOnError)
	fs.SetOutput(c.err.w)
	seller := fs.String("seller", smoke.SandboxSellerID, "the seller agent's registry id")
	gov := fs.String("governance", smoke.SandboxGovernanceID, "the governance agent's registry id")
	events := fs.String("events", "", "where the bus's status events can be read: the sandbox's queue (the SandboxEventsQueueUrl output) or the local stack's sink URL (it prints it)")
	sim := fs.String("sim", "", "ask the simulated agents for a scripted outcome (e.g. rejected) to see a failure's diagnosis")
	timeout := fs.Duration("timeout", 3*time.Minute, "give up on the buy after this long")
	if err := fs.Parse(args); err != nil {
		return usageError("smoke: " + err.Error())
	}
	if fs.NArg() != 0 {
		return usageError("smoke takes no arguments")
	}
	o := smoke.Options{Client: c.c, SellerID: *seller, GovernanceID: *gov, Sim: *sim, Timeout: *timeout}
	if *events != "" {
		src, err := eventSource(ctx, *events)
		if err != nil {
			return err
		}
		o.Events = src
	}
	c.out.printf("smoke: one buy at seller %s and governance %s\n", o.SellerID, o.GovernanceID)
	rep, err := smoke.Run(ctx, o, func(s smoke.Stage) {
		c.out.printf("  %8s  %-22s %s\n", fmt.Sprintf("+%.2fs", s.At.Seconds()), s.Name, s.Note)
	})
	if err != nil {
		return err
	}
	c.out.printf("operation %s\n", rep.OperationID)
	d := rep.Failure
	if d == nil {
		c.out.println("smoke: every stage passed")
		return c.out.err
	}
	c.out.printf("FAILED at stage %q\n", d.Stage)
	c.out.printf("  function    %s\n", d.Function)
	c.out.printf("  call        %s\n", d.Call)
	if d.Permission != "" {
		c.out.printf("  permission  %s is not allowed", d.Permission)
		if d.Resource != "" {
			c.out.printf(" on %s", d.Resource)
		}
		c.out.println()
	}
	c.out.printf("  buy status  %s\n", orDefault(d.Status, "(unknown)"))
	c.out.printf("  reason      %s\n", d.Reason)
	c.out.printf("  look at     %s\n", d.Hint)
	return errors.Join(smokeFailed{d.Stage}, c.out.err)
}

// sqsHost is an SQS endpoint's host: sqs.<region>.amazonaws.com.
var sqsHost = regexp.MustCompile(`^sqs\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$`)

// eventSource is what --events names: the sandbox's SQS queue (read with SigV4 and the
// default AWS credentials) or an event sink that answers GET ?operation_id=.
func eventSource(ctx context.Context, raw string) (smoke.Events, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError("smoke: --events takes an http(s) URL: the SandboxEventsQueueUrl output or a local event sink")
	}
	m := sqsHost.FindStringSubmatch(u.Host)
	if m == nil {
		return smoke.SinkEvents{URL: raw}, nil
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("load AWS credentials to read the events queue: %w", err)
	}
	return &smoke.SQSEvents{QueueURL: raw, Sign: apiclient.SignV4(cfg.Credentials, "sqs", m[1])}, nil
}
