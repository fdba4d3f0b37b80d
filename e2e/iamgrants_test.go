package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/devstack"
)

// iamGrantsDoc is the generated table of every grant and the test that exercises it.
const iamGrantsDoc = "docs/iam-grants.md"

// The committed docs/iam-grants.md is the table the synthesized template and iamClaims make
// (BUYFLOW_E2E_IAM_DOC=docs/iam-grants.md writes it instead), and every grant of every role has
// a test that makes the call, or a service-side reason no function code can. It depends on the
// template and the claims alone, so it is the same on every run; that each claiming test did
// make its call is checked after the suite (checkIAM).
func TestIAMGrantsTableIsCurrent(t *testing.T) {
	if skip != "" {
		t.Skip(skip)
	}
	if suite.local == nil || suite.local.IAM == nil {
		t.Skip("IAM is enforced only on the local stack with BUYFLOW_E2E_IAM unset")
	}
	doc, problems := suite.local.IAM.Report(iamClaims, iamUntested)
	for _, p := range problems {
		t.Error(p)
	}
	root, err := devstack.FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, iamGrantsDoc)
	if out := os.Getenv("BUYFLOW_E2E_IAM_DOC"); out != "" {
		if !filepath.IsAbs(out) {
			out = filepath.Join(root, out)
		}
		if err := os.WriteFile(out, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	committed, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(committed, []byte(doc)) {
		t.Errorf("%s is stale: regenerate it with BUYFLOW_E2E_IAM_DOC=%s make e2e (or go test -run %s ./e2e with the e2e variables)",
			iamGrantsDoc, iamGrantsDoc, t.Name())
		for _, line := range strings.Split(doc, "\n") {
			if !bytes.Contains(committed, []byte(line)) {
				t.Logf("not in the committed table: %s", line)
			}
		}
	}
}

// iamClaims names, for each grant (IAMGrant.Key) of each role, the test that makes the call: the
// suite fails when that test ran and no allowed call used the grant while it ran. TestMain is
// the suite's own run, for the calls no one test is sure to start: what a function reads once
// per process (the agent registry, a secret, the signing key's public half, cached after), and
// the scheduled sweep (the sweep's execution check has a test of its own).
//
// The KMS grants are made by the functions signing every request to the simulated agents
// (sign_requests) through moto_server's KMS; without moto_server the stack signs with a file
// key and checkIAM leaves their claims unchecked (CI has moto_server, so CI checks them).
var iamClaims = map[string]string{
	"submit dynamodb:GetItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                        "TestTheApprovedAmountIsTheBoughtAmount",
	"submit dynamodb:PutItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                        "TestTheApprovedAmountIsTheBoughtAmount",
	"submit dynamodb:Query arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                          "TestTheApprovedAmountIsTheBoughtAmount",
	"submit dynamodb:UpdateItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                     "TestTheApprovedAmountIsTheBoughtAmount",
	"submit states:StartExecution arn:aws:states:us-east-1:123456789012:stateMachine:Buyflow-MediaBuy":                            "TestTheApprovedAmountIsTheBoughtAmount",
	"submit dynamodb:DeleteItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                     "TestDisabledSellerRefusesNewBuysAndFinishesOpenOnes",
	"submit dynamodb:Query arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752/index/gsi2":                               "TestCampaignAcrossThreeSellersCompletedByWebhooks",
	"submit states:StartExecution arn:aws:states:us-east-1:123456789012:stateMachine:Buyflow-Campaign":                            "TestCampaignAcrossThreeSellersCompletedByWebhooks",
	"campaign dynamodb:GetItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                      "TestCampaignAcrossThreeSellersCompletedByWebhooks",
	"campaign dynamodb:Query arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                        "TestMain",
	"campaign dynamodb:UpdateItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                   "TestCampaignAcrossThreeSellersCompletedByWebhooks",
	"campaign dynamodb:PutItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                      "TestCampaignWhosePlanIsRefusedFailsItsLegs",
	"campaign secretsmanager:GetSecretValue arn:aws:secretsmanager:us-east-1:123456789012:secret:Buyflow/agents/*":                "TestMain",
	"governance dynamodb:GetItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                    "TestTheApprovedAmountIsTheBoughtAmount",
	"governance dynamodb:PutItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                    "TestTheApprovedAmountIsTheBoughtAmount",
	"governance dynamodb:Query arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                      "TestTransientFaultsAreRetried",
	"governance dynamodb:UpdateItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                 "TestTheApprovedAmountIsTheBoughtAmount",
	"governance secretsmanager:GetSecretValue arn:aws:secretsmanager:us-east-1:123456789012:secret:Buyflow/agents/*":              "TestMain",
	"notify dynamodb:GetItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                        "TestApprovalApproved",
	"notify dynamodb:PutItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                        "TestApprovalApproved",
	"notify dynamodb:Query arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                          "TestApprovalApproved",
	"notify dynamodb:UpdateItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                     "TestApprovalApproved",
	"notify secretsmanager:GetSecretValue arn:aws:secretsmanager:us-east-1:123456789012:secret:Buyflow/approval-link-keys-AbCdEf": "TestMain",
	"notify secretsmanager:GetSecretValue arn:aws:secretsmanager:us-east-1:123456789012:secret:Buyflow/slack-AbCdEf":              "TestMain",
	"approve states:SendTaskFailure *": "TestApprovalRejected",
	"approve states:SendTaskSuccess *": "TestApprovalApproved",
	"approve dynamodb:GetItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                        "TestApprovalApproved",
	"approve dynamodb:PutItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                        "TestApprovalApproved",
	"approve dynamodb:Query arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                          "TestApprovalApproved",
	"approve dynamodb:UpdateItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                     "TestApprovalApproved",
	"approve dynamodb:Query arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752/index/gsi2":                               "TestApproverInboxAndTheBuyersView",
	"approve secretsmanager:GetSecretValue arn:aws:secretsmanager:us-east-1:123456789012:secret:Buyflow/approval-link-keys-AbCdEf": "TestCrashApproveBeforeTheHandOver",
	"approve secretsmanager:GetSecretValue arn:aws:secretsmanager:us-east-1:123456789012:secret:Buyflow/slack-AbCdEf":              "TestCrashApproveBeforeTheHandOver",
	"create dynamodb:ConditionCheckItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                              "TestTransientFaultsAreRetried",
	"create dynamodb:GetItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                         "TestTransientFaultsAreRetried",
	"create dynamodb:PutItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                         "TestTransientFaultsAreRetried",
	"create dynamodb:UpdateItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                      "TestTransientFaultsAreRetried",
	"create dynamodb:Query arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                           "TestCrashCreateAfterTheSellerCommitted",
	"create secretsmanager:GetSecretValue arn:aws:secretsmanager:us-east-1:123456789012:secret:Buyflow/agents/*":                   "TestMain",
	"create secretsmanager:GetSecretValue arn:aws:secretsmanager:us-east-1:123456789012:secret:Buyflow/webhook-route-key-AbCdEf":   "TestMain",
	"modify dynamodb:GetItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                         "TestCrashModifyAfterTheSellerCommittedTheUpdate",
	"modify dynamodb:PutItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                         "TestCrashModifyAfterTheSellerCommittedTheUpdate",
	"modify dynamodb:Query arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                           "TestCrashModifyAfterTheSellerCommittedTheUpdate",
	"modify dynamodb:UpdateItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                      "TestCrashModifyAfterTheSellerCommittedTheUpdate",
	"modify secretsmanager:GetSecretValue arn:aws:secretsmanager:us-east-1:123456789012:secret:Buyflow/agents/*":                   "TestCrashModifyAfterTheSellerCommittedTheUpdate",
	"modify secretsmanager:GetSecretValue arn:aws:secretsmanager:us-east-1:123456789012:secret:Buyflow/webhook-route-key-AbCdEf":   "TestMain",
	"poll states:SendTaskSuccess *": "TestCompletedByPollingWhenWebhooksDropped",
	"poll dynamodb:GetItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                       "TestCompletedByPollingWhenWebhooksDropped",
	"poll dynamodb:PutItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                       "TestCompletedByPollingWhenWebhooksDropped",
	"poll dynamodb:Query arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                         "TestMain",
	"poll dynamodb:UpdateItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                    "TestCompletedByPollingWhenWebhooksDropped",
	"poll secretsmanager:GetSecretValue arn:aws:secretsmanager:us-east-1:123456789012:secret:Buyflow/agents/*": "TestMain",
	"webhook states:SendTaskSuccess *": "TestWebhookWakesTheParkedBuy",
	"webhook dynamodb:GetItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                       "TestWebhookWakesTheParkedBuy",
	"webhook dynamodb:PutItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                       "TestWebhookWakesTheParkedBuy",
	"webhook dynamodb:UpdateItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                    "TestWebhookWakesTheParkedBuy",
	"webhook dynamodb:Query arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                         "TestCrashWebhookAfterTheReceipt",
	"webhook dynamodb:DeleteItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                    "TestLedgerFailureWhileAWebhookIsAppliedReleasesItsReceipt",
	"webhook secretsmanager:GetSecretValue arn:aws:secretsmanager:us-east-1:123456789012:secret:Buyflow/agents/*":                 "TestHMACSellerWebhooksAreVerifiedWithItsSecret",
	"webhook secretsmanager:GetSecretValue arn:aws:secretsmanager:us-east-1:123456789012:secret:Buyflow/webhook-route-key-AbCdEf": "TestMain",
	"reconcile dynamodb:GetItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                     "TestMain",
	"reconcile dynamodb:PutItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                     "TestMain",
	"reconcile dynamodb:Query arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                       "TestMain",
	"reconcile dynamodb:UpdateItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                  "TestMain",
	"reconcile dynamodb:Scan arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                        "TestMain",
	"reconcile dynamodb:Query arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752/index/gsi1":                            "TestMain",
	"reconcile dynamodb:Query arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752/index/gsi3":                            "TestMain",
	"reconcile dynamodb:DeleteItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                  "TestMain",
	"reconcile secretsmanager:GetSecretValue arn:aws:secretsmanager:us-east-1:123456789012:secret:Buyflow/agents/*":               "TestMain",
	"reconcile states:DescribeExecution arn:aws:states:us-east-1:123456789012:execution:Buyflow-MediaBuy:*":                       "TestSweepChecksTheExecutionOfAQuietBuy",
	"reconcile states:SendTaskSuccess *":                                                                                             "TestSweepWakesTheParkedBuy",
	"reconcile sqs:SendMessage arn:aws:sqs:us-east-1:123456789012:SweepShards2B5F5F47":                                               "TestScheduledSweepRunsItsShardsThroughTheQueue",
	"agents dynamodb:GetItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                           "TestAgentAddedThroughTheAPIIsUsedByTheNextBuy",
	"agents dynamodb:PutItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                           "TestAgentAddedThroughTheAPIIsUsedByTheNextBuy",
	"agents dynamodb:Query arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                             "TestAgentAddedThroughTheAPIIsUsedByTheNextBuy",
	"agents secretsmanager:GetSecretValue arn:aws:secretsmanager:us-east-1:123456789012:secret:Buyflow/agents/*":                     "TestMain",
	"publish events:PutEvents arn:aws:events:us-east-1:123456789012:event-bus/Buyflow-status-events":                                 "TestEveryTransitionIsPublishedOnceInOrder",
	"inform dynamodb:GetItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                           "TestRequesterIsToldInSlack",
	"inform dynamodb:PutItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                           "TestRequesterIsToldInSlack",
	"inform dynamodb:Query arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                             "TestRequesterIsToldInSlack",
	"inform dynamodb:DeleteItem arn:aws:dynamodb:us-east-1:123456789012:table/LedgerB7379752":                                        "TestRequesterIsToldAfterSlackRefusedOnce",
	"inform secretsmanager:GetSecretValue arn:aws:secretsmanager:us-east-1:123456789012:secret:Buyflow/slack-AbCdEf":                 "TestMain",
	"campaign kms:GetPublicKey arn:aws:kms:us-east-1:123456789012:key/RequestSigningKey7B8BAB5D":                                     "TestMain",
	"campaign kms:Sign arn:aws:kms:us-east-1:123456789012:key/RequestSigningKey7B8BAB5D":                                             "TestCampaignWithAPlanPushesItToGovernance",
	"governance kms:GetPublicKey arn:aws:kms:us-east-1:123456789012:key/RequestSigningKey7B8BAB5D":                                   "TestMain",
	"governance kms:Sign arn:aws:kms:us-east-1:123456789012:key/RequestSigningKey7B8BAB5D":                                           "TestTheApprovedAmountIsTheBoughtAmount",
	"create kms:GetPublicKey arn:aws:kms:us-east-1:123456789012:key/RequestSigningKey7B8BAB5D":                                       "TestMain",
	"create kms:Sign arn:aws:kms:us-east-1:123456789012:key/RequestSigningKey7B8BAB5D":                                               "TestAsyncBuyCompletedByWebhook",
	"modify kms:GetPublicKey arn:aws:kms:us-east-1:123456789012:key/RequestSigningKey7B8BAB5D":                                       "TestMain",
	"modify kms:Sign arn:aws:kms:us-east-1:123456789012:key/RequestSigningKey7B8BAB5D":                                               "TestBuyIncreasedPausedResumedCanceled",
	"poll kms:GetPublicKey arn:aws:kms:us-east-1:123456789012:key/RequestSigningKey7B8BAB5D":                                         "TestMain",
	"poll kms:Sign arn:aws:kms:us-east-1:123456789012:key/RequestSigningKey7B8BAB5D":                                                 "TestCompletedByPollingWhenWebhooksDropped",
	"reconcile kms:GetPublicKey arn:aws:kms:us-east-1:123456789012:key/RequestSigningKey7B8BAB5D":                                    "TestMain",
	"reconcile kms:Sign arn:aws:kms:us-east-1:123456789012:key/RequestSigningKey7B8BAB5D":                                            "TestMain",
	"agents kms:GetPublicKey arn:aws:kms:us-east-1:123456789012:key/RequestSigningKey7B8BAB5D":                                       "TestMain",
	"agents kms:Sign arn:aws:kms:us-east-1:123456789012:key/RequestSigningKey7B8BAB5D":                                               "TestAgentAddedThroughTheAPIIsUsedByTheNextBuy",
	"webhook kms:GetPublicKey arn:aws:kms:us-east-1:123456789012:key/RequestSigningKey7B8BAB5D":                                      "TestMain",
	"state machine Buyflow-Campaign lambda:InvokeFunction arn:aws:lambda:us-east-1:123456789012:function:CampaignFunctionC9F0CF18":   "TestCampaignAcrossThreeSellersCompletedByWebhooks",
	"state machine Buyflow-Campaign lambda:InvokeFunction arn:aws:lambda:us-east-1:123456789012:function:CreateFunction1693F3C7":     "TestCampaignWithAFailingSellerCancelsTheOthers",
	"state machine Buyflow-Campaign lambda:InvokeFunction arn:aws:lambda:us-east-1:123456789012:function:GovernanceFunction149F312C": "TestCampaignAcrossThreeSellersCompletedByWebhooks",
	"state machine Buyflow-Campaign lambda:InvokeFunction arn:aws:lambda:us-east-1:123456789012:function:NotifyFunction0D8C391B":     "TestCampaignWithOneApprovalApprovedFromTheLink",
	"state machine Buyflow-MediaBuy lambda:InvokeFunction arn:aws:lambda:us-east-1:123456789012:function:CreateFunction1693F3C7":     "TestAsyncBuyCompletedByWebhook",
	"state machine Buyflow-MediaBuy lambda:InvokeFunction arn:aws:lambda:us-east-1:123456789012:function:GovernanceFunction149F312C": "TestTheApprovedAmountIsTheBoughtAmount",
	"state machine Buyflow-MediaBuy lambda:InvokeFunction arn:aws:lambda:us-east-1:123456789012:function:ModifyFunction620B5AFA":     "TestBuyIncreasedPausedResumedCanceled",
	"state machine Buyflow-MediaBuy lambda:InvokeFunction arn:aws:lambda:us-east-1:123456789012:function:NotifyFunction0D8C391B":     "TestApprovalApproved",
	"state machine Buyflow-MediaBuy lambda:InvokeFunction arn:aws:lambda:us-east-1:123456789012:function:PollFunctionFBFFF505":       "TestAsyncBuyCompletedByWebhook",
}

// iamUntested names the grants a function's code needs on a path no test takes yet, each with
// that path: they stay in the roles (taking them out would break that path in production) and
// the table says so.
var iamUntested = map[string]string{}
