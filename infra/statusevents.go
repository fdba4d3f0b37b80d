package main

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

const (
	reasonStreamList = "dynamodb:ListStreams has no resource-level permissions (IAM Service Authorization Reference), so the " +
		"DynamoDB event source grants it on *; the stream reads themselves (DescribeStream, GetRecords, GetShardIterator) are on the ledger's stream ARN only."
	reasonFailureQueue = "This queue is itself the failure destination of the ledger stream's event source mapping (records the publish " +
		"function could not publish after its retries); a queue of failures needs no queue of its own."
)

// addEventBus creates the status events' bus: every status change of a buy, a change or a
// campaign is put there by the publish function; cloud teams route it with their own rules.
func (b *BuyflowStack) addEventBus(p *stackParts) {
	b.EventBus = awsevents.NewEventBus(b.Stack, jsii.String("StatusEvents"), &awsevents.EventBusProps{
		EventBusName: jsii.String(p.stackName + "-status-events"),
		Description:  jsii.String("buyflow status events: one per status change of a media buy, a change or a campaign"),
	})
}

// addLedgerStream makes the ledger table's stream invoke fn with topology's settings: the
// records that can carry a status change only, retried from the first record not published,
// in order (one batch per shard at a time), the ones that never publish kept in a queue.
func (b *BuyflowStack) addLedgerStream(p *stackParts, fn awslambda.Function) {
	src := p.app.LedgerStream
	b.PublishFailures = awssqs.NewQueue(b.Stack, jsii.String("PublishFailures"), &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
	})
	suppress(b.PublishFailures, "AwsSolutions-SQS3", reasonFailureQueue)
	fn.AddEventSource(awslambdaeventsources.NewDynamoEventSource(b.Table, &awslambdaeventsources.DynamoEventSourceProps{
		StartingPosition:        awslambda.StartingPosition_TRIM_HORIZON,
		BatchSize:               jsii.Number(float64(src.BatchSize)),
		MaxBatchingWindow:       awscdk.Duration_Seconds(jsii.Number(float64(src.MaxBatchingWindowSeconds))),
		RetryAttempts:           jsii.Number(float64(src.RetryAttempts)),
		MaxRecordAge:            awscdk.Duration_Seconds(jsii.Number(float64(src.MaxRecordAgeSeconds))),
		ParallelizationFactor:   jsii.Number(1),
		BisectBatchOnError:      jsii.Bool(false),
		ReportBatchItemFailures: jsii.Bool(true),
		OnFailure:               awslambdaeventsources.NewSqsDlq(b.PublishFailures),
		Filters:                 &[]*map[string]any{{"pattern": src.FilterPattern}},
	}))
}

// addStatusEventAlarm pages when a status event could not be published (its record is in the
// failure queue): a consumer is then missing a transition.
func (b *BuyflowStack) addStatusEventAlarm() {
	if b.PublishFailures == nil {
		return
	}
	alarm := awscloudwatch.NewAlarm(b.Stack, jsii.String("StatusEventsNotPublishedAlarm"), &awscloudwatch.AlarmProps{
		AlarmDescription: jsii.String("buyflow: a ledger stream record could not be published as a status event after every retry (see the PublishFailures queue)"),
		Metric: b.PublishFailures.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{
			Statistic: jsii.String("Sum"), Period: awscdk.Duration_Minutes(jsii.Number(5)),
		}),
		Threshold:          jsii.Number(1),
		EvaluationPeriods:  jsii.Number(1),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
		TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
	})
	action := awscloudwatchactions.NewSnsAction(b.AlarmTopic)
	alarm.AddAlarmAction(action)
	alarm.AddOkAction(action)
}
