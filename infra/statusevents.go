package main

import (
	"encoding/json"
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

const (
	reasonStreamList = "dynamodb:ListStreams has no resource-level permissions (IAM Service Authorization Reference), so the " +
		"DynamoDB event source grants it on *; the stream reads themselves (DescribeStream, GetRecords, GetShardIterator) are on the ledger's stream ARN only."
	reasonFailureQueue = "This queue is itself a failure destination (the ledger stream records the publish function could not publish, " +
		"the status events the requester notifier could not take, or the sweep's shards that failed every delivery, after their retries); " +
		"a queue of failures needs no queue of its own."
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
	b.PublishFailures = failureQueue(b.Stack, "PublishFailures")
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

// failureQueue is a queue that keeps what could not be delivered (14 days, encrypted, TLS only).
func failureQueue(stack awscdk.Stack, id string) awssqs.Queue {
	q := awssqs.NewQueue(stack, jsii.String(id), &awssqs.QueueProps{
		Encryption:      awssqs.QueueEncryption_SQS_MANAGED,
		EnforceSSL:      jsii.Bool(true),
		RetentionPeriod: awscdk.Duration_Days(jsii.Number(14)),
	})
	suppress(q, "AwsSolutions-SQS3", reasonFailureQueue)
	return q
}

// addRequesterRule makes the status event bus invoke fn with the events topology's
// RequesterRule matches (a buy's, a change's or a campaign's events that carry a requester's
// Slack id); an event the function still fails on after the retries is kept in a queue.
func (b *BuyflowStack) addRequesterRule(p *stackParts, fn awslambda.Function) error {
	var pattern struct {
		Source     []string       `json:"source"`
		DetailType []string       `json:"detail-type"`
		Detail     map[string]any `json:"detail"`
	}
	if err := json.Unmarshal([]byte(p.app.RequesterRule), &pattern); err != nil {
		return fmt.Errorf("infra: the requester rule's pattern: %w", err)
	}
	b.NotifyFailures = failureQueue(b.Stack, "RequesterNotificationFailures")
	awsevents.NewRule(b.Stack, jsii.String("RequesterNotifications"), &awsevents.RuleProps{
		EventBus:    b.EventBus,
		Description: jsii.String("buyflow: the status events of buys, changes and campaigns, to the requester notifier, when the submit asked for Slack"),
		EventPattern: &awsevents.EventPattern{
			Source: jsii.Strings(pattern.Source...), DetailType: jsii.Strings(pattern.DetailType...), Detail: &pattern.Detail,
		},
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(fn, &awseventstargets.LambdaFunctionProps{
			DeadLetterQueue: b.NotifyFailures,
			RetryAttempts:   jsii.Number(4),
			MaxEventAge:     awscdk.Duration_Hours(jsii.Number(6)),
		})},
	})
	return nil
}

// addFailureQueueAlarms pages when a status event could not be published (its record is in the
// failure queue: a consumer is then missing a transition), a requester was not told, or a
// sweep shard failed every delivery.
func (b *BuyflowStack) addFailureQueueAlarms() {
	for _, q := range []struct {
		queue       awssqs.Queue
		id, message string
	}{
		{b.PublishFailures, "StatusEventsNotPublishedAlarm", "buyflow: a ledger stream record could not be published as a status event after every retry (see the PublishFailures queue)"},
		{b.NotifyFailures, "RequesterNotNotifiedAlarm", "buyflow: a requester notification failed after every retry (see the RequesterNotificationFailures queue)"},
		{b.SweepShardFailures, "SweepShardsFailedAlarm", "buyflow: a sweep shard failed every delivery (its seller's pending operations unreadable) or was no shard (see the SweepShardFailures queue; runbook: internal/reconcile/RUNBOOK.md)"},
	} {
		if q.queue == nil {
			continue
		}
		alarm := awscloudwatch.NewAlarm(b.Stack, jsii.String(q.id), &awscloudwatch.AlarmProps{
			AlarmDescription: jsii.String(q.message),
			Metric: q.queue.MetricApproximateNumberOfMessagesVisible(&awscloudwatch.MetricOptions{
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
}
