package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

// sweepQueueConsumer are the actions the Lambda service makes with the function's role to run
// the queue's event source mapping (the AWS-managed AWSLambdaSQSQueueExecutionRole's): no more,
// where Queue.GrantConsumeMessages would add ChangeMessageVisibility and GetQueueUrl.
var sweepQueueConsumer = []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}

// addSweepQueue creates the sweep's shard queue and its dead-letter queue, when the topology
// has a function that sweeps shards: before the functions, whose environment names it.
func (b *BuyflowStack) addSweepQueue(p *stackParts) {
	if !p.sweepsShards() {
		return
	}
	src := p.app.SweepQueue
	b.SweepShardFailures = failureQueue(b.Stack, "SweepShardFailures")
	b.SweepQueue = awssqs.NewQueue(b.Stack, jsii.String("SweepShards"), &awssqs.QueueProps{
		Encryption:        awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:        jsii.Bool(true),
		VisibilityTimeout: awscdk.Duration_Seconds(jsii.Number(float64(src.VisibilityTimeoutSeconds))),
		RetentionPeriod:   awscdk.Duration_Seconds(jsii.Number(float64(src.RetentionSeconds))),
		DeadLetterQueue:   &awssqs.DeadLetterQueue{Queue: b.SweepShardFailures, MaxReceiveCount: jsii.Number(float64(src.MaxReceiveCount))},
	})
}

// consumeSweepQueue lets fn send the plan's shards to the queue and makes the queue invoke fn
// with them: batches of BatchSize, MaximumConcurrency invocations at once, each failed shard
// reported alone (ReportBatchItemFailures).
func (b *BuyflowStack) consumeSweepQueue(p *stackParts, fn awslambda.Function) {
	src := p.app.SweepQueue
	awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee: fn, Actions: jsii.Strings("sqs:SendMessage"), ResourceArns: &[]*string{b.SweepQueue.QueueArn()},
	})
	awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee: fn, Actions: jsii.Strings(sweepQueueConsumer...), ResourceArns: &[]*string{b.SweepQueue.QueueArn()},
	})
	awslambda.NewEventSourceMapping(b.Stack, jsii.String("SweepShardsMapping"), &awslambda.EventSourceMappingProps{
		Target:                  fn,
		EventSourceArn:          b.SweepQueue.QueueArn(),
		BatchSize:               jsii.Number(float64(src.BatchSize)),
		MaxConcurrency:          jsii.Number(float64(src.MaximumConcurrency)),
		ReportBatchItemFailures: jsii.Bool(true),
	})
}

// sweepsShards reports whether the application has a function that sweeps shards.
func (p *stackParts) sweepsShards() bool {
	for _, f := range p.app.Functions {
		if f.SweepsShards {
			return true
		}
	}
	return false
}
